//! A GitHub Enterprise host on loopback for the real `gh`: the REST API under `/api/v3/`
//! over HTTPS (a certificate from a test CA, which `gh` trusts through `SSL_CERT_FILE`),
//! issues with labels and comments, pull requests (whose head branch must exist on a local
//! bare repository, as on a real forge), a token it requires, and a record of every call.
//!
//! `gh` is pointed at it with [`GitHubMock::gh_env`]: `GH_HOST` (enterprise mode),
//! `GH_ENTERPRISE_TOKEN`, `SSL_CERT_FILE` and a `GH_CONFIG_DIR` of its own.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tempfile::TempDir;

/// One call the mock received.
#[derive(Clone, Debug)]
pub struct ApiCall {
    pub method: String,
    /// Without `/api/v3` and without the query.
    pub path: String,
    pub query: String,
    pub body: Value,
    /// It carried the token the mock expects.
    pub authorized: bool,
    /// Every header value it carried, joined (to prove what never travels).
    pub headers: String,
}

/// An issue as the mock keeps it.
#[derive(Clone, Debug, Default)]
pub struct MockIssue {
    pub title: String,
    pub body: String,
    pub state: String,
    pub labels: Vec<String>,
    /// `(author, body)`.
    pub comments: Vec<(String, String)>,
}

/// A pull request the mock was asked to open.
#[derive(Clone, Debug)]
pub struct MockPull {
    pub repo: String,
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
    pub labels: Vec<String>,
    pub reviewers: Vec<String>,
}

#[derive(Default)]
struct State {
    calls: Vec<ApiCall>,
    issues: BTreeMap<(String, u64), MockIssue>,
    pulls: Vec<MockPull>,
    next_number: u64,
    /// `repo` → the bare repository its branches are pushed to.
    bare: BTreeMap<String, PathBuf>,
}

/// The mock host, stopped when dropped.
pub struct GitHubMock {
    /// `127.0.0.1:PORT`.
    pub host: String,
    pub token: String,
    ca_file: PathBuf,
    config_dir: PathBuf,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: TempDir,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl GitHubMock {
    /// Starts the host with a fresh test CA; `token` is the one `gh` must present.
    pub fn start(token: &str) -> GitHubMock {
        let dir = tempfile::Builder::new().prefix("arbiter-ghmock-").tempdir().expect("temp dir");
        let (ca_pem, cert_pem, key_pem) = test_certificates();
        let ca_file = dir.path().join("ca.pem");
        let cert_file = dir.path().join("server.pem");
        let key_file = dir.path().join("server.key");
        std::fs::write(&ca_file, ca_pem).expect("write the CA");
        std::fs::write(&cert_file, cert_pem).expect("write the certificate");
        std::fs::write(&key_file, key_pem).expect("write the key");
        let config_dir = dir.path().join("gh-config");
        std::fs::create_dir_all(&config_dir).expect("gh config dir");
        let acceptor =
            arbiter_server::serve::acceptor(&arbiter_server::serve::TlsFiles { cert: cert_file, key: key_file })
                .expect("a TLS acceptor for the mock");
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        std_listener.set_nonblocking(true).expect("non-blocking listener");
        let port = std_listener.local_addr().expect("local address").port();
        let state = Arc::new(Mutex::new(State { next_number: 100, ..State::default() }));
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let expected = token.to_string();
        let host = format!("127.0.0.1:{port}");
        let page_host = host.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for the mock");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
                loop {
                    let (tcp, _) = tokio::select! {
                        _ = &mut stop_rx => break,
                        accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => continue },
                    };
                    let (acceptor, state, expected, page_host) =
                        (acceptor.clone(), served.clone(), expected.clone(), page_host.clone());
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else { return };
                        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                            let (state, expected, page_host) = (state.clone(), expected.clone(), page_host.clone());
                            async move { Ok::<_, Infallible>(handle(req, &state, &expected, &page_host).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    });
                }
            });
        });
        GitHubMock {
            host,
            token: token.to_string(),
            ca_file,
            config_dir,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// Points `cmd` (arbiter, or `gh` itself) at this host: enterprise mode, its token, its CA.
    pub fn gh_env(&self, cmd: &mut Command) {
        cmd.env("GH_HOST", &self.host)
            .env("GH_ENTERPRISE_TOKEN", &self.token)
            .env("SSL_CERT_FILE", &self.ca_file)
            .env("GH_CONFIG_DIR", &self.config_dir)
            .env_remove("GH_TOKEN")
            .env_remove("GITHUB_TOKEN");
    }

    /// The test CA's certificate (PEM file).
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// `https://HOST/OWNER/REPO.git`: what a clone of `repo` from this host would call its remote.
    pub fn repo_url(&self, repo: &str) -> String {
        format!("https://{}/{repo}.git", self.host)
    }

    /// Branches of `repo` go to (and are checked on) the bare repository `bare`.
    pub fn set_remote(&self, repo: &str, bare: &Path) {
        lock(&self.state).bare.insert(repo.to_string(), bare.to_path_buf());
    }

    pub fn add_issue(&self, repo: &str, number: u64, issue: MockIssue) {
        let mut state = lock(&self.state);
        state.issues.insert((repo.to_string(), number), issue);
        state.next_number = state.next_number.max(number + 1);
    }

    pub fn issue(&self, repo: &str, number: u64) -> MockIssue {
        lock(&self.state).issues.get(&(repo.to_string(), number)).cloned().unwrap_or_default()
    }

    pub fn calls(&self) -> Vec<ApiCall> {
        lock(&self.state).calls.clone()
    }

    /// The calls that changed something (every method but GET).
    pub fn writes(&self) -> Vec<ApiCall> {
        self.calls().into_iter().filter(|c| c.method != "GET").collect()
    }

    pub fn pulls(&self) -> Vec<MockPull> {
        lock(&self.state).pulls.clone()
    }
}

impl Drop for GitHubMock {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A CA, and a certificate it signed for 127.0.0.1 and localhost with its key (PEM).
fn test_certificates() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
        SanType,
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca.distinguished_name.push(DnType::CommonName, "arbiter test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("server params");
    leaf.subject_alt_names.push(SanType::IpAddress(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)));
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.distinguished_name.push(DnType::CommonName, "127.0.0.1");
    let issuer = Issuer::from_params(&ca, &ca_key);
    let cert = leaf.signed_by(&key, &issuer).expect("server certificate");
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}

fn not_found() -> Response<Full<Bytes>> {
    reply(StatusCode::NOT_FOUND, json!({"message": "Not Found"}))
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| decode(v)))
}

fn issue_json(host: &str, repo: &str, number: u64, issue: &MockIssue) -> Value {
    json!({
        "number": number,
        "title": issue.title,
        "body": issue.body,
        "state": issue.state,
        "html_url": format!("https://{host}/{repo}/issues/{number}"),
        "labels": issue.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
    })
}

fn branch_exists(bare: &Path, branch: &str) -> bool {
    Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

async fn handle(req: Request<Incoming>, state: &Mutex<State>, token: &str, host: &str) -> Response<Full<Bytes>> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let headers: String =
        req.headers().iter().map(|(k, v)| format!("{k}: {}\n", v.to_str().unwrap_or_default())).collect();
    let authorized = auth == format!("token {token}") || auth == format!("Bearer {token}");
    let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let api_path = path.strip_prefix("/api/v3").unwrap_or(&path).to_string();
    let mut st = lock(state);
    st.calls.push(ApiCall {
        method: method.clone(),
        path: api_path.clone(),
        query: query.clone(),
        body: body.clone(),
        authorized,
        headers,
    });
    if !path.starts_with("/api/v3/") {
        return not_found();
    }
    if !authorized {
        return reply(StatusCode::UNAUTHORIZED, json!({"message": "Bad credentials"}));
    }
    let parts: Vec<String> = api_path.trim_start_matches('/').split('/').map(decode).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let repo_of = |owner: &str, name: &str| format!("{owner}/{name}");
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["repos", o, r]) => {
            reply(StatusCode::OK, json!({"full_name": repo_of(o, r), "default_branch": "main"}))
        }
        ("GET", ["repos", o, r, "issues"]) => {
            let repo = repo_of(o, r);
            let label = query_param(&query, "labels");
            let open: Vec<Value> = st
                .issues
                .iter()
                .filter(|((rp, _), i)| *rp == repo && i.state == "open")
                .filter(|(_, i)| label.as_ref().is_none_or(|l| i.labels.contains(l)))
                .map(|((_, n), i)| issue_json(host, &repo, *n, i))
                .collect();
            reply(StatusCode::OK, Value::Array(open))
        }
        ("GET", ["repos", o, r, "issues", n]) => {
            let repo = repo_of(o, r);
            match n.parse::<u64>().ok().and_then(|n| st.issues.get(&(repo.clone(), n)).map(|i| (n, i))) {
                Some((n, i)) => reply(StatusCode::OK, issue_json(host, &repo, n, i)),
                None => not_found(),
            }
        }
        ("GET", ["repos", o, r, "issues", n, "comments"]) => {
            match n.parse::<u64>().ok().and_then(|n| st.issues.get(&(repo_of(o, r), n))) {
                Some(i) => reply(
                    StatusCode::OK,
                    Value::Array(i.comments.iter().map(|(a, b)| json!({"user": {"login": a}, "body": b})).collect()),
                ),
                None => not_found(),
            }
        }
        ("POST", ["repos", o, r, "issues", n, "comments"]) => {
            let repo = repo_of(o, r);
            let Some(n) = n.parse::<u64>().ok() else { return not_found() };
            let text = body.get("body").and_then(Value::as_str).unwrap_or_default().to_string();
            match st.issues.get_mut(&(repo.clone(), n)) {
                Some(i) => {
                    i.comments.push(("arbiter-user".into(), text.clone()));
                    let id = i.comments.len();
                    reply(
                        StatusCode::CREATED,
                        json!({"id": id, "body": text, "html_url": format!("https://{host}/{repo}/issues/{n}#issuecomment-{id}")}),
                    )
                }
                None => not_found(),
            }
        }
        ("POST", ["repos", o, r, "issues", n, "labels"]) => {
            let Some(n) = n.parse::<u64>().ok() else { return not_found() };
            let repo = repo_of(o, r);
            let add: Vec<String> = body
                .get("labels")
                .and_then(Value::as_array)
                .map(|ls| ls.iter().filter_map(|l| l.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            if let Some(i) = st.issues.get_mut(&(repo.clone(), n)) {
                for l in add {
                    if !i.labels.contains(&l) {
                        i.labels.push(l);
                    }
                }
                let labels: Vec<Value> = i.labels.iter().map(|l| json!({"name": l})).collect();
                return reply(StatusCode::OK, Value::Array(labels));
            }
            match st.pulls.iter_mut().find(|p| p.repo == repo && p.number == n) {
                Some(p) => {
                    p.labels.extend(add);
                    reply(StatusCode::OK, Value::Array(p.labels.iter().map(|l| json!({"name": l})).collect()))
                }
                None => not_found(),
            }
        }
        ("DELETE", ["repos", o, r, "issues", n, "labels", label]) => {
            let Some(n) = n.parse::<u64>().ok() else { return not_found() };
            match st.issues.get_mut(&(repo_of(o, r), n)) {
                Some(i) if i.labels.iter().any(|l| l == label) => {
                    i.labels.retain(|l| l != label);
                    reply(StatusCode::OK, Value::Array(i.labels.iter().map(|l| json!({"name": l})).collect()))
                }
                _ => reply(StatusCode::NOT_FOUND, json!({"message": "Label does not exist"})),
            }
        }
        ("GET", ["repos", o, r, "pulls"]) => {
            let repo = repo_of(o, r);
            let head = query_param(&query, "head");
            let open: Vec<Value> = st
                .pulls
                .iter()
                .filter(|p| p.repo == repo && head.as_ref().is_none_or(|h| *h == format!("{o}:{}", p.head)))
                .map(|p| json!({"number": p.number, "html_url": format!("https://{host}/{repo}/pull/{}", p.number)}))
                .collect();
            reply(StatusCode::OK, Value::Array(open))
        }
        ("POST", ["repos", o, r, "pulls"]) => {
            let repo = repo_of(o, r);
            let field = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let (head, base) = (field("head"), field("base"));
            if st.pulls.iter().any(|p| p.repo == repo && p.head == head) {
                return reply(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "Validation Failed", "errors": [{"message": format!("A pull request already exists for {o}:{head}.")}]}),
                );
            }
            let pushed = st.bare.get(&repo).is_some_and(|bare| branch_exists(bare, &head));
            if !pushed {
                return reply(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}]}),
                );
            }
            let number = st.next_number;
            st.next_number += 1;
            st.pulls.push(MockPull {
                repo: repo.clone(),
                number,
                head,
                base,
                title: field("title"),
                body: field("body"),
                draft: body.get("draft").and_then(Value::as_bool).unwrap_or(false),
                labels: Vec::new(),
                reviewers: Vec::new(),
            });
            reply(
                StatusCode::CREATED,
                json!({"number": number, "html_url": format!("https://{host}/{repo}/pull/{number}")}),
            )
        }
        ("POST", ["repos", o, r, "pulls", n, "requested_reviewers"]) => {
            let repo = repo_of(o, r);
            let Some(n) = n.parse::<u64>().ok() else { return not_found() };
            let names: Vec<String> = body
                .get("reviewers")
                .and_then(Value::as_array)
                .map(|ls| ls.iter().filter_map(|l| l.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            match st.pulls.iter_mut().find(|p| p.repo == repo && p.number == n) {
                Some(p) => {
                    p.reviewers.extend(names);
                    reply(StatusCode::CREATED, json!({"number": n}))
                }
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}
