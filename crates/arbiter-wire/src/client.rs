//! The client of a control plane: `arbiter worker register|list|revoke|rotate`, and the
//! work protocol of remote workers on top of [`Client::send_json`].
//!
//! - reqwest over rustls (the `ring` provider, as `arbiter-llm` sets it up); `https://` is
//!   verified against the system's roots, plus a CA certificate the operator names
//!   (`--ca-cert`, for a self-signed server).
//! - Plain `http://` only to a loopback host (`localhost`, 127.0.0.0/8, ::1) unless
//!   `insecure`: every request carries a bearer token.
//! - Redirects are not followed (a redirect could carry a token elsewhere).
//! - A token is sent only in the `Authorization` header and never appears in an error.
//! - An error answer of the server becomes [`ClientError::Api`] with its status, code and
//!   message.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use arbiter_store::workers::Secret;

use crate::api::{
    ErrorBody, RegisterRequest, TokenCreated, TokenList, TokenRequest, TokenView, WorkerCredentials, WorkerList,
    WorkerView,
};

/// How to reach the server.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// A PEM CA certificate (or chain) trusted besides the system's roots.
    pub ca_cert: Option<PathBuf>,
    /// Allow plain HTTP to a host that is not loopback.
    pub insecure: bool,
    /// The whole request's time limit (default 60 s).
    pub timeout: Option<Duration>,
}

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("'{url}' is not a server URL: {reason}; write it like https://arbiter.example:7878")]
    BadUrl { url: String, reason: String },
    #[error(
        "refusing plain HTTP to {host}: the token would cross the network unencrypted; use https://, or pass --insecure on a network you trust"
    )]
    PlainHttp { host: String },
    #[error("cannot use the CA certificate {path}: {reason}")]
    CaCert { path: PathBuf, reason: String },
    #[error("cannot set up the HTTP client: {0}")]
    Build(String),
    #[error("cannot reach {url}: {reason}")]
    Transport { url: String, reason: String },
    #[error(
        "the server at {url} presents a CA certificate as its own (CaUsedAsEndEntity), which TLS clients refuse for a server: make its certificate with `-addext basicConstraints=critical,CA:FALSE` (see docs/distributed.md), or sign it with a CA of its own, and restart arbiter serve with it"
    )]
    CaAsServerCertificate { url: String },
    #[error("the server answered {status}: {message} ({code})")]
    Api { status: StatusCode, code: String, message: String },
    #[error("the server's answer to {url} is not what this arbiter expects: {reason}")]
    Decode { url: String, reason: String },
}

impl ClientError {
    /// The server's status, for an error it answered.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The operator's mistake (a bad URL, a refused or rejected request), as opposed to a
    /// server or network that failed.
    pub fn is_usage(&self) -> bool {
        match self {
            ClientError::BadUrl { .. }
            | ClientError::PlainHttp { .. }
            | ClientError::CaCert { .. }
            | ClientError::CaAsServerCertificate { .. } => true,
            ClientError::Api { status, .. } => status.is_client_error(),
            _ => false,
        }
    }
}

/// A client of one server.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
}

/// Whether `host` names this machine's loopback interface.
pub fn loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Parses and checks a server URL: http or https, a host, no query, fragment or password;
/// plain HTTP only to loopback unless `insecure`.
pub fn server_url(text: &str, insecure: bool) -> Result<Url, ClientError> {
    let bad = |reason: &str| ClientError::BadUrl { url: text.to_string(), reason: reason.into() };
    let url = Url::parse(text.trim()).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    let Some(host) = url.host_str() else { return Err(bad("it has no host")) };
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("it has a query or a fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("it holds credentials; tokens come from the environment or files, never URLs"));
    }
    if url.scheme() == "http" && !insecure && !loopback_host(host) {
        return Err(ClientError::PlainHttp { host: host.to_string() });
    }
    Ok(url)
}

impl Client {
    pub fn new(server: &str, options: &ClientOptions) -> Result<Self, ClientError> {
        let mut base = server_url(server, options.insecure)?;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        // Fails only when a provider is installed already, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("arbiter/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(15))
            .timeout(options.timeout.unwrap_or(Duration::from_secs(60)))
            .redirect(reqwest::redirect::Policy::none());
        if let Some(path) = &options.ca_cert {
            builder = builder.tls_certs_merge(read_ca(path)?);
        }
        let http = builder.build().map_err(|e| ClientError::Build(error_chain(&e)))?;
        Ok(Client { http, base })
    }

    /// The underlying HTTP client (its TLS setup is this client's).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The server's URL (ending in '/').
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// The URL of `path` (e.g. `api/v1/workers`; a leading '/' is ignored) on the server.
    pub fn url(&self, path: &str) -> Result<Url, ClientError> {
        self.base
            .join(path.trim_start_matches('/'))
            .map_err(|e| ClientError::BadUrl { url: path.to_string(), reason: e.to_string() })
    }

    /// Sends a request with `token` as its bearer and `body` as JSON; decodes a 2xx answer
    /// as `T`, any other into [`ClientError::Api`].
    pub async fn send_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        token: &Secret,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let url = self.url(path)?;
        let mut request = self.http.request(method, url.clone()).bearer_auth(token.expose());
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| transport(&url, &e))?;
        decode(&url, response).await
    }

    /// `GET path` with `token` as its bearer.
    pub async fn get<T: DeserializeOwned>(&self, path: &str, token: &Secret) -> Result<T, ClientError> {
        self.send_json::<(), T>(Method::GET, path, token, None).await
    }

    /// `POST path` with `body` as JSON and `token` as its bearer (the work protocol).
    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        token: &Secret,
        body: &B,
    ) -> Result<T, ClientError> {
        self.send_json(Method::POST, path, token, Some(body)).await
    }

    /// `POST /api/v1/workers/register` with the bootstrap token.
    pub async fn register(
        &self,
        bootstrap: &Secret,
        request: &RegisterRequest,
    ) -> Result<WorkerCredentials, ClientError> {
        self.send_json(Method::POST, "api/v1/workers/register", bootstrap, Some(request)).await
    }

    /// `GET /api/v1/workers` with the admin token.
    pub async fn workers(&self, admin: &Secret) -> Result<Vec<WorkerView>, ClientError> {
        let list: WorkerList = self.send_json::<(), _>(Method::GET, "api/v1/workers", admin, None).await?;
        Ok(list.workers)
    }

    /// `POST /api/v1/workers/{name}/revoke` with the admin token.
    pub async fn revoke(&self, admin: &Secret, name: &str) -> Result<WorkerView, ClientError> {
        self.send_json::<(), _>(Method::POST, &format!("api/v1/workers/{}/revoke", segment(name)), admin, None).await
    }

    /// `POST /api/v1/tokens` with the admin token: a new access token, shown once.
    pub async fn create_token(&self, admin: &Secret, request: &TokenRequest) -> Result<TokenCreated, ClientError> {
        self.send_json(Method::POST, "api/v1/tokens", admin, Some(request)).await
    }

    /// `GET /api/v1/tokens` with the admin token.
    pub async fn tokens(&self, admin: &Secret) -> Result<Vec<TokenView>, ClientError> {
        let list: TokenList = self.send_json::<(), _>(Method::GET, "api/v1/tokens", admin, None).await?;
        Ok(list.tokens)
    }

    /// `POST /api/v1/tokens/{name}/revoke` with the admin token.
    pub async fn revoke_token(&self, admin: &Secret, name: &str) -> Result<TokenView, ClientError> {
        self.send_json::<(), _>(Method::POST, &format!("api/v1/tokens/{}/revoke", segment(name)), admin, None).await
    }

    /// `POST /api/v1/workers/{name}/rotate` with the admin token: the new token.
    pub async fn rotate(&self, admin: &Secret, name: &str) -> Result<WorkerCredentials, ClientError> {
        self.send_json::<(), _>(Method::POST, &format!("api/v1/workers/{}/rotate", segment(name)), admin, None).await
    }
}

/// A path segment, percent-encoded.
pub fn segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn read_ca(path: &Path) -> Result<Vec<reqwest::Certificate>, ClientError> {
    let err = |reason: String| ClientError::CaCert { path: path.to_path_buf(), reason };
    let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| err(error_chain(&e)))?;
    if certs.is_empty() {
        return Err(err("no certificate in it; give a PEM file".into()));
    }
    Ok(certs)
}

/// A request to `url` that got no answer: every HTTP call of a client of the control plane
/// says why through this, so a server certificate no client can accept is named as such
/// (and not taken for a network that retrying may cure).
pub fn transport(url: &Url, e: &reqwest::Error) -> ClientError {
    let reason = error_chain(e);
    if reason.contains("CaUsedAsEndEntity") {
        let mut origin = url.clone();
        origin.set_path("/");
        return ClientError::CaAsServerCertificate { url: origin.to_string() };
    }
    ClientError::Transport { url: url.to_string(), reason }
}

async fn decode<T: DeserializeOwned>(url: &Url, response: reqwest::Response) -> Result<T, ClientError> {
    let status = response.status();
    let bytes = response.bytes().await.map_err(|e| transport(url, &e))?;
    if status.is_success() {
        return serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::Decode { url: url.to_string(), reason: e.to_string() });
    }
    match serde_json::from_slice::<ErrorBody>(&bytes) {
        Ok(body) => Err(ClientError::Api { status, code: body.error, message: body.message }),
        Err(_) => Err(ClientError::Api {
            status,
            code: "unexpected".into(),
            message: format!(
                "not an arbiter error answer: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).trim()
            ),
        }),
    }
}

/// An error and its causes, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        assert!(server_url("https://arbiter.example:7878", false).is_ok());
        assert!(server_url("http://127.0.0.1:7878", false).is_ok());
        assert!(server_url("http://localhost:7878", false).is_ok());
        assert!(server_url("http://[::1]:7878", false).is_ok());
        assert!(matches!(server_url("http://10.0.0.2:7878", false), Err(ClientError::PlainHttp { .. })));
        assert!(matches!(server_url("http://localhost.evil:1", false), Err(ClientError::PlainHttp { .. })));
        assert!(matches!(server_url("http://0.0.0.0:1", false), Err(ClientError::PlainHttp { .. })));
        assert!(server_url("http://10.0.0.2:7878", true).is_ok());
        assert!(matches!(server_url("ftp://x", false), Err(ClientError::BadUrl { .. })));
        assert!(matches!(server_url("https://u:p@x", false), Err(ClientError::BadUrl { .. })));
        assert!(matches!(server_url("https://x/?a=b", false), Err(ClientError::BadUrl { .. })));
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn urls_join_under_a_path_prefix() {
        let c = Client::new("https://example.invalid/arbiter", &ClientOptions::default()).unwrap();
        assert_eq!(c.url("/api/v1/workers").unwrap().as_str(), "https://example.invalid/arbiter/api/v1/workers");
    }
}
