//! Serves a mock script until Ctrl-C, for pointing an agent CLI or `curl` at it:
//!
//! ```sh
//! cargo run -p arbiter-llm --example mock_server -- tests/fixtures/tool-turn.json [127.0.0.1:8089]
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::process::ExitCode;

use arbiter_llm::{MockScript, MockServer};

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(script_path) = args.next() else {
        eprintln!("usage: mock_server SCRIPT.json|SCRIPT.toml [BIND_ADDR]");
        return ExitCode::from(2);
    };
    let bind: SocketAddr = match args.next().unwrap_or_else(|| "127.0.0.1:0".into()).parse() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("the bind address is not host:port ({e}); e.g. 127.0.0.1:8089");
            return ExitCode::from(2);
        }
    };
    let script = match MockScript::from_file(&script_path) {
        Ok(script) => script,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let server = match MockServer::start(script, bind).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot listen on {bind}: {e}; pick another port");
            return ExitCode::from(3);
        }
    };
    println!("anthropic base URL: {}", server.base_url());
    println!("openai base URL:    {}", server.openai_base_url());
    println!("serving {script_path}; Ctrl-C stops");
    let _ = tokio::signal::ctrl_c().await;
    for r in server.requests() {
        println!("#{} {} {} -> {}", r.number, r.method, r.path, r.status);
    }
    println!("{} scripted response(s) unused", server.remaining());
    server.shutdown().await;
    ExitCode::SUCCESS
}
