//! A real `arbiter serve` on a loopback port (SQLite in its data directory, or a fresh
//! Postgres database), and the commands that talk to it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{ARBITER, Run, arbiter_cmd_in};

/// The bootstrap token of the servers the tests start.
pub const BOOTSTRAP: &str = "bootstrap-0f1e2d3c4b5a69788796a5b4c3d2e1f0-cli";
/// Their admin token.
pub const ADMIN: &str = "admin-a1b2c3d4e5f60718293a4b5c6d7e8f90-cli";

/// Every token variable a client could pick up from the tests' own environment.
const TOKEN_VARS: [&str; 4] = ["ARBITER_TOKEN", "ARBITER_BOOTSTRAP_TOKEN", "ARBITER_ADMIN_TOKEN", "ARBITER_SERVER"];

/// A running `arbiter serve`.
pub struct Serve {
    child: Child,
    pub url: String,
    data: tempfile::TempDir,
    log: PathBuf,
    /// The Postgres database it uses, if any (dropped after the server).
    pub pg: Option<PgDatabase>,
}

impl Serve {
    /// Starts `arbiter serve --bind 127.0.0.1:0 EXTRA…` with both tokens, on `pg` or on
    /// SQLite in its data directory; waits for its address. Its stderr goes to a log file.
    pub fn start(extra: &[&str], pg: Option<PgDatabase>) -> Serve {
        let data = tempfile::Builder::new().prefix("arbiter-serve-").tempdir().expect("a temp dir");
        let log = data.path().with_extension("log");
        let mut cmd = Command::new(ARBITER);
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(data.path().join("data"))
            .args(extra)
            .env("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)
            .env("ARBITER_ADMIN_TOKEN", ADMIN)
            .env_remove("ARBITER_DATABASE_URL")
            .env_remove("ARBITER_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("create the log file"));
        if let Some(pg) = &pg {
            cmd.env("ARBITER_DATABASE_URL", &pg.url);
        }
        let mut child = cmd.spawn().expect("start arbiter serve");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| {
            panic!("arbiter serve printed no address; its log:\n{}", std::fs::read_to_string(&log).unwrap_or_default())
        });
        let url = line.split("listening on ").nth(1).unwrap_or_else(|| panic!("unexpected line: {line}")).to_string();
        Serve { child, url, data, log, pg }
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
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal the server");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
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

/// A fresh database on the machine's Postgres (`DATABASE_URL`, else the local server as
/// `postgres`), dropped with the value. A missing Postgres fails the test.
pub struct PgDatabase {
    admin: String,
    name: String,
    pub url: String,
}

impl PgDatabase {
    pub fn create() -> Self {
        let admin =
            std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("arbiter_test_{}_{nanos}_{n}", std::process::id());
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
