//! A control plane for the end-to-end tests: a real `arbiter serve` on a loopback port
//! (SQLite in a temporary data directory, or a fresh Postgres database), its tokens, and
//! `arbiter worker ...` against it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{ARBITER, Run, arbiter_cmd_in};

/// Every token variable a client could pick up from the tests' own environment.
const TOKEN_VARS: [&str; 4] = ["ARBITER_TOKEN", "ARBITER_BOOTSTRAP_TOKEN", "ARBITER_ADMIN_TOKEN", "ARBITER_SERVER"];

/// The bootstrap token of the servers the tests start.
pub const BOOTSTRAP: &str = "bootstrap-0f1e2d3c4b5a69788796a5b4c3d2e1f0-cli";
/// Their admin token.
pub const ADMIN: &str = "admin-a1b2c3d4e5f60718293a4b5c6d7e8f90-cli";

/// A running `arbiter serve`.
pub struct Serve {
    pub child: Child,
    pub url: String,
    pub data: tempfile::TempDir,
    pub log: PathBuf,
    /// The arguments it was started with, besides its address and data directory.
    pub extra: Vec<String>,
    pub pg: Option<PgDatabase>,
}

/// Starts `arbiter serve` on `bind`; the child and the URL it printed.
fn spawn_serve(
    bind: &str,
    data: &std::path::Path,
    extra: &[String],
    pg: Option<&PgDatabase>,
    log: &std::path::Path,
) -> (Child, String) {
    let mut cmd = Command::new(ARBITER);
    cmd.args(["serve", "--bind", bind, "--data-dir"])
        .arg(data)
        .args(extra)
        .env("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)
        .env("ARBITER_ADMIN_TOKEN", ADMIN)
        .env_remove("ARBITER_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap());
    if let Some(pg) = pg {
        cmd.env("ARBITER_DATABASE_URL", &pg.url);
    }
    let mut child = cmd.spawn().expect("start arbiter serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| {
        panic!("arbiter serve printed no address; its log:\n{}", std::fs::read_to_string(log).unwrap_or_default())
    });
    let url = line.split("listening on ").nth(1).unwrap_or_else(|| panic!("unexpected line: {line}")).to_string();
    (child, url)
}

impl Serve {
    /// A server on a port of its own choosing.
    pub fn start(extra: &[&str], pg: Option<PgDatabase>) -> Serve {
        Serve::start_on("127.0.0.1:0", extra, pg)
    }

    /// A server on `bind` (a fixed port, for one that must come back where it was).
    pub fn start_on(bind: &str, extra: &[&str], pg: Option<PgDatabase>) -> Serve {
        let data = tempfile::Builder::new().prefix("arbiter-serve-").tempdir().unwrap();
        let log = data.path().with_extension("log");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (child, url) = spawn_serve(bind, &data.path().join("data"), &extra, pg.as_ref(), &log);
        Serve { child, url, data, log, extra, pg }
    }

    /// `kill -9`, then the server again on the same address, data directory and store (its
    /// log goes on in the same file).
    pub fn crash_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let bind = self.url.trim_start_matches("http://").trim_end_matches('/').to_string();
        let (child, url) = spawn_serve(&bind, &self.data.path().join("data"), &self.extra, self.pg.as_ref(), &self.log);
        self.child = child;
        self.url = url;
    }

    pub fn data_dir(&self) -> PathBuf {
        self.data.path().join("data")
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// `arbiter ARGS…` in `dir` with `ARBITER_SERVER` naming this server, no token but those
    /// in `env`.
    pub fn cli(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = arbiter_cmd_in(dir, args);
        for key in TOKEN_VARS {
            cmd.env_remove(key);
        }
        cmd.env_remove("ARBITER_DATABASE_URL").env("ARBITER_SERVER", &self.url);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run::from_output(cmd.output().expect("run arbiter"))
    }

    /// `arbiter worker ARGS…` against this server, with `env`.
    pub fn worker(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut all = vec!["worker"];
        all.extend_from_slice(args);
        self.cli(&std::env::temp_dir(), &all, env)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit code (the server must be gone within 15 s).
    pub fn terminate(&mut self) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(start.elapsed() < Duration::from_secs(15), "arbiter serve did not stop after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh database on the machine's Postgres, dropped afterwards.
pub struct PgDatabase {
    pub admin: String,
    pub name: String,
    pub url: String,
}

impl PgDatabase {
    pub fn create() -> Self {
        let admin =
            std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let name = format!("arbiter_serve_{}_{nanos}", std::process::id());
        let out = Command::new("psql")
            .args([admin.as_str(), "-q", "-c", &format!("CREATE DATABASE {name}")])
            .output()
            .unwrap_or_else(|e| {
                panic!("Postgres is required for this test (psql: {e}); start it and set DATABASE_URL")
            });
        assert!(out.status.success(), "cannot create a database: {}", String::from_utf8_lossy(&out.stderr));
        let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap_or(admin.clone());
        PgDatabase { url: format!("{base}/{name}"), admin, name }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([self.admin.as_str(), "-q", "-c", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)])
            .output();
    }
}

/// A worker registered with `arbiter worker register` (its token in a file of its own
/// directory), and its `arbiter worker run` once started.
pub struct Worker {
    pub name: String,
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
}

impl Worker {
    pub fn register(serve: &Serve, name: &str, runners: &[&str]) -> Worker {
        let dir = tempfile::Builder::new().prefix(&format!("arbiter-worker-{name}-")).tempdir().unwrap();
        let token_file = dir.path().join("worker.token").display().to_string();
        let mut args = vec!["register", "--name", name, "--token-file", token_file.as_str(), "--slots", "2"];
        for r in runners {
            args.extend(["--runner", r]);
        }
        serve.worker(&args, &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)]).assert_code(0);
        Worker { name: name.to_string(), dir, child: None }
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("worker.token")).unwrap().trim().to_string()
    }

    pub fn log(&self) -> PathBuf {
        self.dir.path().join("worker.log")
    }

    pub fn start(&mut self, serve_url: &str, extra: &[&str]) {
        self.start_with_env(serve_url, extra, &[]);
    }

    /// Starts it with `env` set on top of the test's environment.
    pub fn start_with_env(&mut self, serve_url: &str, extra: &[&str], env: &[(&str, &str)]) {
        let mut cmd = Command::new(ARBITER);
        cmd.envs(env.iter().copied());
        cmd.args(["worker", "run", "--slots", "2", "--token-file"])
            .arg(self.dir.path().join("worker.token"))
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(extra)
            .env("ARBITER_SERVER", serve_url)
            .env("ARBITER_CACHE_DIR", self.dir.path().join("cache"))
            .env("ARBITER_CONFIG_DIR", self.dir.path().join("config"))
            .env_remove("ARBITER_TOKEN")
            .env_remove("ARBITER_BOOTSTRAP_TOKEN")
            .env_remove("ARBITER_ADMIN_TOKEN")
            .env_remove("ARBITER_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::OpenOptions::new().create(true).append(true).open(self.log()).unwrap());
        self.child = Some(cmd.spawn().expect("start arbiter worker run"));
    }

    /// SIGTERM, and how long it took to exit (it must, within 15 s).
    pub fn stop(&mut self) -> Duration {
        let Some(mut child) = self.child.take() else { return Duration::ZERO };
        let started = Instant::now();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        loop {
            if child.try_wait().unwrap().is_some() {
                return started.elapsed();
            }
            assert!(started.elapsed() < Duration::from_secs(15), "worker {} did not stop after SIGTERM", self.name);
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How it exited, when it has.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    pub fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill_9();
    }
}

/// An HTTP client for the tests (rustls needs its crypto provider chosen once per process).
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
