//! The invocation built for each CLI: its arguments, environment, key aliases and files;
//! that no secret ever appears in them; long prompts through stdin or a file; resume.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};

use arbiter_agents::{
    CliAgent, ENDPOINT_KEY_VAR, EndpointProvider, EndpointSpec, INLINE_PROMPT_LIMIT, Invocation, InvocationSpec,
    PLACEHOLDER_KEY, PromptInput, invocation, validate,
};

const HOME: &str = "/runs/r1/candidates/c1/agent-home";
const PROMPT_FILE: &str = "/runs/r1/candidates/c1/prompt.md";
/// The value the runner's key variable holds; it must never show up in an invocation.
const FAKE_KEY: &str = "sk-test-FAKE-7f3a9c1e5b";

fn spec() -> InvocationSpec {
    InvocationSpec {
        prompt: "Fix add in calc.py".into(),
        prompt_file: PROMPT_FILE.into(),
        agent_home: HOME.into(),
        confined: false,
        ..Default::default()
    }
}

fn endpoint(provider: EndpointProvider, base_url: &str) -> EndpointSpec {
    EndpointSpec { base_url: base_url.into(), key_env: Some("MY_KEY_VAR".into()), provider }
}

fn home(rel: &str) -> String {
    Path::new(HOME).join(rel).to_string_lossy().into_owned()
}

fn env<'a>(inv: &'a Invocation, name: &str) -> Option<&'a str> {
    inv.env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn file<'a>(inv: &'a Invocation, rel: &str) -> &'a str {
    inv.files
        .iter()
        .find(|(p, _)| p == Path::new(rel))
        .map(|(_, c)| c.as_str())
        .unwrap_or_else(|| panic!("no file {rel} in {:?}", inv.files))
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The spec each CLI is pointed at its natural endpoint with, the key in `MY_KEY_VAR`.
fn endpoint_spec(agent: CliAgent) -> InvocationSpec {
    let provider = agent.endpoint_providers()[0];
    let url = match provider {
        EndpointProvider::Anthropic | EndpointProvider::Gemini => "http://127.0.0.1:7001",
        _ => "http://127.0.0.1:7001/v1",
    };
    InvocationSpec {
        model: Some("mock".into()),
        max_turns: Some(7),
        endpoint: Some(endpoint(provider, url)),
        extra_args: vec!["--extra-flag".into()],
        ..spec()
    }
}

// ---------------------------------------------------------------- every CLI

#[test]
fn no_secret_ever_reaches_args_env_or_files() {
    // The runner would hold the secret in MY_KEY_VAR; an invocation only names it.
    let runner_env = [("MY_KEY_VAR", FAKE_KEY)];
    for agent in CliAgent::ALL {
        for long_prompt in [false, true] {
            let mut s = endpoint_spec(*agent);
            if long_prompt {
                s.prompt = "p".repeat(INLINE_PROMPT_LIMIT + 1);
            }
            let inv = invocation(*agent, &s);
            let everything: Vec<&str> = std::iter::once(inv.program.as_str())
                .chain(inv.args.iter().map(String::as_str))
                .chain(inv.env.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
                .chain(inv.files.iter().map(|(_, c)| c.as_str()))
                .collect();
            for (_, secret) in runner_env {
                assert!(!everything.iter().any(|s| s.contains(secret)), "{agent}: secret leaked");
            }
            // The key reaches the agent only through an alias from the runner's variable.
            assert!(inv.key_env_aliases.iter().any(|(_, source)| source == "MY_KEY_VAR"), "{agent}");
            assert!(!inv.display_command().contains(FAKE_KEY));
            assert_eq!(validate(*agent, &s), Ok(()), "{agent}");
        }
    }
}

#[test]
fn every_cli_gets_its_own_home_and_its_default_binary() {
    for agent in CliAgent::ALL {
        let inv = invocation(*agent, &spec());
        assert_eq!(inv.program, agent.default_binary());
        assert_eq!(env(&inv, "HOME"), Some(HOME), "{agent}");
        assert!(inv.files.iter().all(|(p, _)| p.is_relative()), "{agent}: files are relative to agent_home");
        assert!(inv.key_env_aliases.is_empty(), "{agent}: no endpoint, no alias");
        let custom = invocation(*agent, &InvocationSpec { binary: Some("/opt/bin/agent".into()), ..spec() });
        assert_eq!(custom.program, "/opt/bin/agent");
    }
}

#[test]
fn long_prompts_never_go_on_the_command_line() {
    let long = "Refactor everything. ".repeat(1000);
    assert!(long.len() > INLINE_PROMPT_LIMIT);
    for agent in CliAgent::ALL {
        let inv = invocation(*agent, &InvocationSpec { prompt: long.clone(), ..spec() });
        assert!(inv.args.iter().all(|a| a.len() < 1024), "{agent}: {:?}", inv.display_command());
        match agent {
            CliAgent::Aider => {
                assert_eq!(inv.stdin, PromptInput::Null);
                let at = inv.args.iter().position(|a| a == "--message-file").unwrap();
                assert_eq!(inv.args[at + 1], PROMPT_FILE);
                assert!(!inv.args.contains(&"--message".to_string()));
            }
            CliAgent::VillaniCode => {
                assert_eq!(inv.stdin, PromptInput::Null);
                let last = inv.args.last().unwrap();
                assert!(last.contains(PROMPT_FILE), "{last}");
            }
            _ => assert_eq!(inv.stdin, PromptInput::File(PathBuf::from(PROMPT_FILE)), "{agent}"),
        }
    }
}

#[test]
fn an_option_like_prompt_is_not_passed_as_an_argument() {
    let s = InvocationSpec { prompt: "--version please".into(), ..spec() };
    for agent in [CliAgent::ClaudeCode, CliAgent::Codex, CliAgent::Gemini, CliAgent::OpenCode] {
        let inv = invocation(agent, &s);
        assert!(!inv.args.iter().any(|a| a == "--version please"), "{agent}");
        assert_eq!(inv.stdin, PromptInput::File(PROMPT_FILE.into()), "{agent}");
    }
    // villani-code ends its options with `--`, so the prompt stays inline there.
    let inv = invocation(CliAgent::VillaniCode, &s);
    assert_eq!(strs(&inv.args[inv.args.len() - 2..]), ["--", "--version please"]);
}

#[test]
fn resume_flags() {
    let s = InvocationSpec { resume_session: Some("sess-42".into()), ..spec() };
    let expected: [(CliAgent, &[&str]); 4] = [
        (CliAgent::ClaudeCode, &["--resume", "sess-42"]),
        (CliAgent::Codex, &["resume", "sess-42"]),
        (CliAgent::Gemini, &["--resume", "sess-42"]),
        (CliAgent::OpenCode, &["--session", "sess-42"]),
    ];
    for (agent, flag) in expected {
        assert!(agent.resume_supported());
        let inv = invocation(agent, &s);
        assert!(inv.args.windows(2).any(|w| strs(w) == flag), "{agent}: {:?}", inv.args);
        assert_eq!(validate(agent, &s), Ok(()));
    }
    for agent in [CliAgent::Aider, CliAgent::VillaniCode] {
        assert!(!agent.resume_supported());
        assert!(validate(agent, &s).is_err(), "{agent}");
    }
}

// ---------------------------------------------------------------- per CLI

#[test]
fn claude_code_arguments_and_environment() {
    let inv = invocation(CliAgent::ClaudeCode, &spec());
    assert_eq!(
        strs(&inv.args),
        ["-p", "Fix add in calc.py", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"]
    );
    assert_eq!(inv.stdin, PromptInput::Null);
    assert_eq!(env(&inv, "CLAUDE_CONFIG_DIR"), Some(home(".claude").as_str()));
    assert_eq!(env(&inv, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), Some("1"));
    assert_eq!(env(&inv, "DISABLE_AUTOUPDATER"), Some("1"));
    assert_eq!(env(&inv, "ANTHROPIC_BASE_URL"), None);

    let mut s = endpoint_spec(CliAgent::ClaudeCode);
    s.permission_mode = Some("bypassPermissions".into());
    s.resume_session = Some("abc".into());
    let inv = invocation(CliAgent::ClaudeCode, &s);
    assert_eq!(
        strs(&inv.args),
        [
            "-p",
            "Fix add in calc.py",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "bypassPermissions",
            "--max-turns",
            "7",
            "--model",
            "mock",
            "--resume",
            "abc",
            "--extra-flag"
        ]
    );
    assert_eq!(env(&inv, "ANTHROPIC_BASE_URL"), Some("http://127.0.0.1:7001"));
    assert_eq!(inv.key_env_aliases, [("ANTHROPIC_API_KEY".to_string(), "MY_KEY_VAR".to_string())]);
    assert_eq!(env(&inv, "ANTHROPIC_API_KEY"), None, "the key is an alias, never a value");

    // A `/v1` base is tolerated; a keyless endpoint gets the placeholder, not a login prompt.
    s.endpoint =
        Some(EndpointSpec { key_env: None, ..endpoint(EndpointProvider::Anthropic, "http://127.0.0.1:7001/v1") });
    let inv = invocation(CliAgent::ClaudeCode, &s);
    assert_eq!(env(&inv, "ANTHROPIC_BASE_URL"), Some("http://127.0.0.1:7001"));
    assert_eq!(env(&inv, "ANTHROPIC_API_KEY"), Some(PLACEHOLDER_KEY));
    assert!(inv.key_env_aliases.is_empty());
}

#[test]
fn codex_arguments_config_and_stdin() {
    let inv = invocation(CliAgent::Codex, &spec());
    assert_eq!(
        strs(&inv.args),
        ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "Fix add in calc.py"]
    );
    assert_eq!(inv.stdin, PromptInput::Null, "codex waits on an open stdin");
    assert_eq!(env(&inv, "CODEX_HOME"), Some(home(".codex").as_str()));
    // In arbiter's sandbox, Codex's own (which cannot set itself up there) is left out,
    // unless the runner asks for one.
    let confined = invocation(CliAgent::Codex, &InvocationSpec { confined: true, ..spec() });
    assert_eq!(strs(&confined.args)[3..5], ["--sandbox", "danger-full-access"]);
    let asked = InvocationSpec { confined: true, permission_mode: Some("workspace-write".into()), ..spec() };
    assert_eq!(strs(&invocation(CliAgent::Codex, &asked).args)[3..5], ["--sandbox", "workspace-write"]);
    assert!(!file(&inv, ".codex/config.toml").contains("model_provider"));

    let s = InvocationSpec {
        permission_mode: Some("danger-full-access".into()),
        resume_session: Some("0199a213".into()),
        prompt: "x".repeat(INLINE_PROMPT_LIMIT + 1),
        ..endpoint_spec(CliAgent::Codex)
    };
    let inv = invocation(CliAgent::Codex, &s);
    assert_eq!(
        strs(&inv.args),
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "danger-full-access",
            "-m",
            "mock",
            "--extra-flag",
            "resume",
            "0199a213",
            "-"
        ]
    );
    assert_eq!(inv.stdin, PromptInput::File(PROMPT_FILE.into()));
    assert_eq!(
        file(&inv, ".codex/config.toml"),
        format!(
            "# One candidate's Codex configuration; nothing from the user's own applies.\n\
             model_provider = \"arbiter\"\n\n\
             [model_providers.arbiter]\n\
             name = \"arbiter\"\n\
             base_url = \"http://127.0.0.1:7001/v1\"\n\
             env_key = \"{ENDPOINT_KEY_VAR}\"\n\
             wire_api = \"responses\"\n"
        )
    );
    assert_eq!(inv.key_env_aliases, [(ENDPOINT_KEY_VAR.to_string(), "MY_KEY_VAR".to_string())]);
}

#[test]
fn codex_config_escapes_the_base_url() {
    let s = InvocationSpec {
        endpoint: Some(EndpointSpec {
            key_env: None,
            ..endpoint(EndpointProvider::OpenAiResponses, "http://h/v1?q=\"a\\b\"")
        }),
        ..spec()
    };
    let config = file(&invocation(CliAgent::Codex, &s), ".codex/config.toml").to_string();
    assert!(config.contains(r#"base_url = "http://h/v1?q=\"a\\b\"""#), "{config}");
    assert!(!config.contains("env_key"), "a keyless endpoint names no key variable");
}

#[test]
fn gemini_arguments_settings_and_endpoint() {
    let inv = invocation(CliAgent::Gemini, &spec());
    assert_eq!(
        strs(&inv.args),
        ["-p", "Fix add in calc.py", "--output-format", "stream-json", "--approval-mode", "yolo"]
    );
    assert_eq!(env(&inv, "GEMINI_CLI_TRUST_WORKSPACE"), Some("true"));
    let settings: serde_json::Value = serde_json::from_str(file(&inv, ".gemini/settings.json")).unwrap();
    assert_eq!(
        settings,
        serde_json::json!({
            "privacy": {"usageStatisticsEnabled": false},
            "security": {"auth": {"selectedType": "gemini-api-key"}}
        })
    );

    let inv = invocation(CliAgent::Gemini, &endpoint_spec(CliAgent::Gemini));
    assert_eq!(
        strs(&inv.args),
        [
            "-p",
            "Fix add in calc.py",
            "--output-format",
            "stream-json",
            "--approval-mode",
            "yolo",
            "-m",
            "mock",
            "--extra-flag"
        ]
    );
    assert_eq!(env(&inv, "GOOGLE_GEMINI_BASE_URL"), Some("http://127.0.0.1:7001"));
    assert_eq!(inv.key_env_aliases, [("GEMINI_API_KEY".to_string(), "MY_KEY_VAR".to_string())]);
    let settings: serde_json::Value = serde_json::from_str(file(&inv, ".gemini/settings.json")).unwrap();
    assert_eq!(settings["model"]["maxSessionTurns"], 7);
}

#[test]
fn aider_arguments_model_prefix_and_price_cache() {
    let inv = invocation(CliAgent::Aider, &endpoint_spec(CliAgent::Aider));
    assert_eq!(
        strs(&inv.args),
        [
            "--model",
            "openai/mock",
            "--message",
            "Fix add in calc.py",
            "--yes-always",
            "--no-auto-commits",
            "--no-pretty",
            "--no-stream",
            "--no-show-model-warnings",
            "--no-check-update",
            "--analytics-disable",
            "--no-gitignore",
            "--map-tokens",
            "0",
            "--chat-history-file",
            "/dev/null",
            "--input-history-file",
            "/dev/null",
            "--edit-format",
            "diff",
            "--extra-flag"
        ]
    );
    assert_eq!(inv.stdin, PromptInput::Null);
    assert_eq!(env(&inv, "OPENAI_API_BASE"), Some("http://127.0.0.1:7001/v1"));
    assert_eq!(inv.key_env_aliases, [("OPENAI_API_KEY".to_string(), "MY_KEY_VAR".to_string())]);
    let prices: serde_json::Value =
        serde_json::from_str(file(&inv, ".aider/caches/model_prices_and_context_window.json")).unwrap();
    assert_eq!(prices["openai/mock"]["litellm_provider"], "openai");
    assert_eq!(prices["openai/mock"]["input_cost_per_token"], 0);
    assert_eq!(prices.as_object().unwrap().len(), 1);

    // An already prefixed model is kept; without an endpoint the model is aider's own.
    let s = InvocationSpec { model: Some("openai/gpt-x".into()), ..endpoint_spec(CliAgent::Aider) };
    assert!(invocation(CliAgent::Aider, &s).args.windows(2).any(|w| strs(w) == ["--model", "openai/gpt-x"]));
    let inv = invocation(CliAgent::Aider, &InvocationSpec { model: Some("sonnet".into()), ..spec() });
    assert!(inv.args.windows(2).any(|w| strs(w) == ["--model", "sonnet"]));
    let prices: serde_json::Value =
        serde_json::from_str(file(&inv, ".aider/caches/model_prices_and_context_window.json")).unwrap();
    assert!(prices.get("sonnet").is_none(), "a real model's price is not overridden");
    assert!(!prices.as_object().unwrap().is_empty(), "an empty cache is refetched");
    assert_eq!(env(&inv, "OPENAI_API_BASE"), None);
}

#[test]
fn opencode_arguments_and_config_file() {
    let inv = invocation(CliAgent::OpenCode, &spec());
    assert_eq!(strs(&inv.args), ["run", "Fix add in calc.py", "--format", "json"]);
    assert_eq!(env(&inv, "OPENCODE_CONFIG"), Some(home("opencode.json").as_str()));
    for offline in ["OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_DEFAULT_PLUGINS", "OPENCODE_DISABLE_AUTOUPDATE"]
    {
        assert_eq!(env(&inv, offline), Some("1"), "{offline}");
    }
    assert_eq!(env(&inv, "XDG_DATA_HOME"), Some(home(".local/share").as_str()));
    let config: serde_json::Value = serde_json::from_str(file(&inv, "opencode.json")).unwrap();
    assert_eq!(config["permission"]["bash"], "allow");
    assert!(config.get("provider").is_none());

    let inv = invocation(CliAgent::OpenCode, &endpoint_spec(CliAgent::OpenCode));
    assert_eq!(
        strs(&inv.args),
        ["run", "Fix add in calc.py", "--format", "json", "-m", "arbiter/mock", "--extra-flag"]
    );
    let config: serde_json::Value = serde_json::from_str(file(&inv, "opencode.json")).unwrap();
    assert_eq!(
        config["provider"]["arbiter"],
        serde_json::json!({
            "npm": "@ai-sdk/openai-compatible",
            "name": "arbiter",
            "options": {"baseURL": "http://127.0.0.1:7001/v1", "apiKey": format!("{{env:{ENDPOINT_KEY_VAR}}}")},
            "models": {"mock": {}}
        })
    );
    assert_eq!(inv.key_env_aliases, [(ENDPOINT_KEY_VAR.to_string(), "MY_KEY_VAR".to_string())]);
}

#[test]
fn villani_code_arguments_keep_the_key_off_argv() {
    let inv = invocation(CliAgent::VillaniCode, &endpoint_spec(CliAgent::VillaniCode));
    assert_eq!(
        strs(&inv.args),
        [
            "run",
            "--base-url",
            "http://127.0.0.1:7001/v1",
            "--provider",
            "openai",
            "--model",
            "mock",
            "--auto-approve",
            "--no-stream",
            // Its own telemetry, in the agent home: read after it exits.
            "--debug",
            "trace",
            "--debug-dir",
            "/runs/r1/candidates/c1/agent-home/villani-debug",
            "--extra-flag",
            "--",
            "Fix add in calc.py"
        ]
    );
    assert!(!inv.args.iter().any(|a| a == "--api-key"));
    assert_eq!(inv.key_env_aliases, [("OPENAI_API_KEY".to_string(), "MY_KEY_VAR".to_string())]);
    assert_eq!(env(&inv, "NO_COLOR"), Some("1"));

    // Anthropic provider: villani-code sends no key, so only a keyless endpoint validates.
    let s = InvocationSpec {
        endpoint: Some(EndpointSpec {
            key_env: None,
            ..endpoint(EndpointProvider::Anthropic, "http://127.0.0.1:7002/v1")
        }),
        ..endpoint_spec(CliAgent::VillaniCode)
    };
    let inv = invocation(CliAgent::VillaniCode, &s);
    assert!(inv.args.windows(2).any(|w| strs(w) == ["--base-url", "http://127.0.0.1:7002"]));
    assert!(inv.args.windows(2).any(|w| strs(w) == ["--provider", "anthropic"]));
    assert!(inv.key_env_aliases.is_empty());
    assert_eq!(validate(CliAgent::VillaniCode, &s), Ok(()));
}
