//! The scripted model server (`arbiter_llm::MockServer`) in the test process, on a runtime
//! of its own, for tests that read what arbiter sent: every request's body, as received over
//! real HTTP.

use arbiter_llm::{MockScript, MockServer, RecordedRequest};
use serde_json::Value;

/// The mock model server, serving until dropped.
pub struct ModelServer {
    server: Option<MockServer>,
    runtime: tokio::runtime::Runtime,
}

impl ModelServer {
    /// Serves `script` (the JSON of docs/mock-llm.md) on a free loopback port.
    pub fn start(script: &Value) -> ModelServer {
        let script: MockScript = serde_json::from_value(script.clone()).expect("a valid mock script");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the model server");
        let bind = "127.0.0.1:0".parse().expect("an address");
        let server = runtime.block_on(MockServer::start(script, bind)).expect("start the model server");
        ModelServer { server: Some(server), runtime }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn openai_url(&self) -> String {
        self.server.as_ref().map(|s| s.openai_base_url()).unwrap_or_default()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.server.as_ref().map(|s| s.requests()).unwrap_or_default()
    }

    /// The model requests whose body holds `text`.
    pub fn requests_with(&self, text: &str) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/chat/completions") && r.body.to_string().contains(text))
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
    }
}
