//! `arbiter demo`: the main job on a fresh machine, with nothing configured and no key.
//!
//! It creates a small Python project whose test fails in a temporary directory, starts the
//! scripted model server on loopback, configures four backends on it, and runs a real
//! 4-candidate tournament with the built-in agent: one candidate fixes the bug, one makes a
//! wrong fix, one a partial fix, one fixes it but breaks another test. Everything but the
//! model is real: git worktrees, tool calls editing files, arbiter running the tests itself,
//! the selection, the applied patch and the run directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use arbiter_core::settings::{RunOptions, RunSettings};
use arbiter_core::task::Task;
use arbiter_llm::{MockScript, MockServer};
use arbiter_runner::git::Git;

use crate::commands::run::{Prepared, execute, exit_code, preflight, report};
use crate::context::RepoContext;
use crate::error::CliError;
use crate::output::{note, out};

const SCRIPT: &str = include_str!("../demo/script.json");
const BACKENDS: [&str; 4] = ["demo-fixer", "demo-wrong", "demo-partial", "demo-breaker"];

const CALC_PY: &str =
    "\"\"\"A tiny calculator.\"\"\"\n\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
const TEST_CALC_PY: &str = "import unittest\n\nfrom calc import add, mul\n\n\nclass AddTest(unittest.TestCase):\n    def test_positive(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_negative(self):\n        self.assertEqual(add(-4, 1), -3)\n\n\nclass MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

pub async fn demo(dir: Option<&Path>, as_json: bool) -> Result<u8, CliError> {
    let repo = make_repo(dir).await?;
    let script: MockScript = serde_json::from_str(SCRIPT)
        .map_err(|e| CliError::environment(format!("the bundled demo script is invalid: {e}")))?;
    let bind: SocketAddr = ([127, 0, 0, 1], 0).into();
    let server = MockServer::start(script, bind)
        .await
        .map_err(|e| CliError::environment(format!("cannot start the scripted model server on loopback: {e}")))?;

    let ctx = RepoContext::locate(Some(&repo)).await?;
    ctx.workspace.init(&ctx.git).await?;
    let mut config_text = std::fs::read_to_string(ctx.workspace.config_path())?;
    for (i, name) in BACKENDS.iter().enumerate() {
        config_text.push_str(&format!(
            "\n[backends.{name}]\nprovider = \"openai-compatible\"\nmodel = \"{name}\"\nbase_url = \"{}\"\ninput_cost = \"0.15\"\noutput_cost = \"0.60\"\nroles = [\"coding\"]\ncapability = {}\nmax_parallel = 2\n",
            server.openai_base_url(),
            i + 1
        ));
    }
    std::fs::write(ctx.workspace.config_path(), config_text)?;
    let config = ctx.config()?;
    let verify = vec![
        "python3 -m unittest -q test_calc.AddTest".to_string(),
        "python3 -m unittest -q test_calc.MulTest".to_string(),
    ];
    let settings = RunSettings::resolve(
        &config,
        &[&RunOptions {
            candidates: Some(4),
            runner: Some("builtin".into()),
            backend: Some(BACKENDS.join(",")),
            verify: Some(verify.clone()),
            timeout_seconds: Some(300),
            ..Default::default()
        }],
    )?;
    preflight(&settings, ctx.workspace.repo_root())?;
    let task = Task::new(
        "add() in calc.py returns the wrong result and AddTest fails. Fix it.".into(),
        Some("Every test passes; the change is minimal.".into()),
        verify,
    )
    .map_err(CliError::usage)?;

    if !as_json {
        note!("arbiter demo");
        note!("  repository: {} (calc.py has a bug; AddTest fails, MulTest passes)", repo.display());
        note!("  model: SCRIPTED — a mock server on {} plays four agents:", server.base_url());
        note!("         one fixes the bug, one makes a wrong fix, one a partial fix, one breaks another test");
        note!("  everything else is real: worktrees, tool calls, the tests arbiter runs itself, the selection\n");
    }
    let prepared = Prepared::new(&ctx, &config, task, settings, "HEAD".into(), false)?;
    let outcome = execute(&ctx, prepared).await;
    server.shutdown().await;
    let outcome = outcome?;
    report(&outcome, as_json);
    if !as_json {
        let arbiter = crate::invocation::arbiter();
        out!();
        out!("The model above was scripted. To run the same tournament with a real model:");
        out!(
            "  {arbiter} backend add my-model --provider openai-compatible --model MODEL --base-url http://127.0.0.1:8080/v1"
        );
        out!(
            "  {arbiter} run --runner builtin --backend my-model --candidates 4 --task \"...\" --verify \"your tests\""
        );
        let dir = arbiter_core::command_line::shell_word(&repo.display().to_string());
        out!("Look around: cd {dir} && git diff && {arbiter} runs show latest");
        if arbiter != "arbiter" {
            out!("Put arbiter on your PATH: cargo install --path {} --locked", env!("CARGO_MANIFEST_DIR"));
        }
    }
    Ok(exit_code(&outcome))
}

async fn make_repo(dir: Option<&Path>) -> Result<PathBuf, CliError> {
    let repo = match dir {
        Some(d) => {
            if d.exists() && std::fs::read_dir(d).map(|mut e| e.next().is_some()).unwrap_or(true) {
                return Err(CliError::usage(format!(
                    "--dir {}: the directory exists and is not empty; name a new one",
                    d.display()
                )));
            }
            d.to_path_buf()
        }
        None => {
            let mut b = [0u8; 4];
            let _ = getrandom::fill(&mut b);
            std::env::temp_dir().join(format!("arbiter-demo-{:08x}", u32::from_le_bytes(b)))
        }
    };
    std::fs::create_dir_all(&repo)?;
    std::fs::write(repo.join("calc.py"), CALC_PY)?;
    std::fs::write(repo.join("test_calc.py"), TEST_CALC_PY)?;
    std::fs::write(repo.join(".gitignore"), "__pycache__/\n")?;
    let git = Git::new(repo.clone());
    git.run(["init", "--quiet", "--initial-branch=main"]).await?;
    git.run(["config", "user.name", "arbiter demo"]).await?;
    git.run(["config", "user.email", "demo@arbiter.invalid"]).await?;
    git.run(["add", "--all"]).await?;
    git.run(["commit", "--quiet", "-m", "A calculator with a bug"]).await?;
    Ok(repo)
}
