//! `arbiter mock-llm` as a child process for the end-to-end tests: the scripted model server
//! spoken to over real HTTP, its request log collected, killed when dropped.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::{ARBITER, wait_until};

/// How long a test waits for the mock server to start or to log a request before failing.
pub const MOCK_WAIT: Duration = Duration::from_secs(60);

/// A port nothing listens on (bound, read and released).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// `arbiter mock-llm` as a child process, killed when dropped. Its stderr (one `#N METHOD
/// PATH model=... stream=...` line per request) is collected by a thread.
pub struct MockLlm {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
    probes: usize,
    _dir: TempDir,
}

impl MockLlm {
    /// Writes `script` to a file and serves it on a free loopback port.
    pub fn start(script: &Value) -> MockLlm {
        let dir = tempfile::Builder::new().prefix("arbiter-mock-").tempdir().expect("temp dir");
        let script_path = dir.path().join("script.json");
        fs::write(&script_path, serde_json::to_string_pretty(script).expect("script JSON")).expect("write script");
        let port = free_port();
        let bind = format!("127.0.0.1:{port}");
        let mut child = Command::new(ARBITER)
            .args(["mock-llm", "--script", script_path.to_str().expect("utf-8 path"), "--bind", &bind])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn arbiter mock-llm");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("mock stderr");
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap_or_else(PoisonError::into_inner).push(line);
            }
        });
        let mut mock = MockLlm { child, port, log, reader: Some(reader), probes: 0, _dir: dir };
        let mut exited = None;
        let ready = wait_until(MOCK_WAIT, || {
            if let Ok(Some(status)) = mock.child.try_wait() {
                exited = Some(status);
                return true;
            }
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(
            ready && exited.is_none(),
            "the mock server did not start on {bind} (exit status {exited:?}); stderr:\n{}",
            mock.log_lines().join("\n")
        );
        mock
    }

    /// `http://127.0.0.1:PORT/v1`, the OpenAI-style base URL.
    pub fn openai_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// `http://127.0.0.1:PORT`, the Anthropic base URL.
    pub fn anthropic_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The model requests the server logged so far (`#N POST ...` lines), complete: a probe
    /// request is sent and its log line awaited, and the server logs requests in order of
    /// arrival, so every request made before the probe is in the log by then.
    pub fn chat_requests(&mut self) -> Vec<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the mock");
        stream
            .write_all(b"GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            .expect("send the probe");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read the probe's answer");
        assert!(answer.starts_with("HTTP/1.1 200"), "the probe failed: {answer}");
        self.probes += 1;
        let probes = self.probes;
        let count_probes = |lines: &[String]| lines.iter().filter(|l| l.contains(" GET /v1/models ")).count();
        assert!(
            wait_until(MOCK_WAIT, || count_probes(&self.log_lines()) >= probes),
            "the mock never logged the probe; stderr:\n{}",
            self.log_lines().join("\n")
        );
        self.log_lines().into_iter().filter(|l| l.starts_with('#') && l.contains(" POST ")).collect()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}
