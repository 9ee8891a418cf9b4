//! `arbiter mock-llm --script FILE [--bind ADDR]`: the scriptable model server on loopback,
//! speaking the OpenAI chat-completions and Anthropic Messages formats, logging every request.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use arbiter_llm::{MockScript, MockServer};

use crate::error::CliError;
use crate::output::{note, out};

pub async fn mock_llm(script: &Path, bind: &str) -> Result<u8, CliError> {
    let addr: SocketAddr = bind
        .parse()
        .map_err(|_| CliError::usage(format!("--bind '{bind}' is not an address such as 127.0.0.1:8089")))?;
    let script = MockScript::from_file(script).map_err(CliError::usage)?;
    let server = MockServer::start(script, addr)
        .await
        .map_err(|e| CliError::environment(format!("cannot listen on {addr}: {e}")))?;
    out!("mock model server listening on {}", server.base_url());
    out!("  OpenAI-compatible base URL: {}", server.openai_base_url());
    out!("  Anthropic base URL:         {}", server.base_url());
    out!(
        "  e.g. arbiter backend add mock --provider openai-compatible --model mock --base-url {}",
        server.openai_base_url()
    );
    out!("Press Ctrl-C to stop.");
    let mut seen = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick() => {
                let requests = server.requests();
                for r in requests.iter().skip(seen) {
                    let model = r.body.get("model").and_then(|m| m.as_str()).unwrap_or("-");
                    let stream = r.body.get("stream").and_then(|m| m.as_bool()).unwrap_or(false);
                    note!("#{} {} {} model={model} stream={stream}", r.number, r.method, r.path);
                }
                seen = requests.len();
            }
        }
    }
    server.shutdown().await;
    Ok(0)
}
