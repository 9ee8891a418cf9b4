//! The settings' resolution, end to end.

use super::*;

fn flags_with_command() -> RunOptions {
    RunOptions { command: Some("./agent.sh".into()), ..Default::default() }
}

#[test]
fn the_command_flag_wins_over_a_runners_command_table() {
    let config =
        ConfigFile::parse("[runners.command]\nkind = \"command\"\ncommand = \"./from-config.sh\"\n", "c").unwrap();
    let flags =
        RunOptions { runner: Some("command".into()), command: Some("./from-flag.sh".into()), ..Default::default() };
    let s = RunSettings::resolve(&config, &[&flags]).unwrap();
    assert_eq!(s.runners[0].kind, RunnerKind::Command { command: "./from-flag.sh".into() });
    let s =
        RunSettings::resolve(&config, &[&RunOptions { runner: Some("command".into()), ..Default::default() }]).unwrap();
    assert_eq!(s.runners[0].kind, RunnerKind::Command { command: "./from-config.sh".into() });
}

#[test]
fn default_config_text_parses_to_defaults() {
    let cfg = ConfigFile::parse(DEFAULT_CONFIG_TOML, "config.toml").unwrap();
    assert_eq!(cfg, ConfigFile::default());
}

/// Every key of the `[run]` table is written, commented, in the file `arbiter init` writes:
/// the keys come from [`RunOptions`] itself, so a new one cannot be left out.
#[test]
fn the_default_configuration_names_every_run_option() {
    let keys = serde_json::to_value(RunOptions::default()).unwrap();
    let keys: Vec<&String> = keys.as_object().unwrap().keys().collect();
    assert!(keys.len() >= 30, "{keys:?}");
    let run_table = DEFAULT_CONFIG_TOML.split("\n[").find(|t| t.starts_with("run]")).unwrap();
    for key in keys {
        assert!(run_table.contains(&format!("\n# {key} = ")), "[run] {key} is missing from default_config.toml");
    }
}

/// The table `config show` prints has a row for every setting, in the order of the type.
#[test]
fn config_show_rows_come_from_the_settings_type() {
    let s = RunSettings::resolve_values(
        &ConfigFile::default(),
        &[&RunOptions { unverified: Some(true), ..flags_with_command() }],
    )
    .unwrap();
    let rows = s.rows();
    let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(&keys[..4], ["candidates", "parallel", "timeout_seconds", "verify"]);
    assert!(keys.contains(&"repair_rounds") && keys.contains(&"unverified"), "{keys:?}");
    let row = |k: &str| rows.iter().find(|r| r.key == k).unwrap().clone();
    assert_eq!(row("unverified"), Row { key: "unverified".into(), value: "true".into(), origin: Origin::Flag });
    assert_eq!(row("command").value, "./agent.sh");
    assert_eq!(row("setup").value, "(none)");
    assert_eq!(row("apply").value, "worktree");
    assert_eq!(row("sandbox_paths").value, "writable [], hidden []");
    assert!(row("protected_paths").value.ends_with(" globs"));
}

#[test]
fn flags_override_config_override_defaults() {
    let cfg =
        ConfigFile::parse("[run]\ncandidates = 5\ntimeout_seconds = 60\nverify = [\"make test\"]\n", "c").unwrap();
    let s = RunSettings::resolve(&cfg, &[&RunOptions { candidates: Some(2), ..flags_with_command() }]).unwrap();
    assert_eq!(s.candidates, Sourced { value: 2, origin: Origin::Flag });
    assert_eq!(s.parallel, Sourced { value: 2, origin: Origin::Default });
    assert_eq!(s.timeout_seconds, Sourced { value: 60, origin: Origin::Config });
    assert_eq!(s.verify.value, vec!["make test".to_string()]);
    assert_eq!(s.verify.origin, Origin::Config);
    assert_eq!(s.verify_timeout_seconds.origin, Origin::Default);
    assert_eq!(s.apply.value, ApplyMode::Worktree);
}

#[test]
fn sandbox_mode_limits_and_paths_layer_and_bad_values_name_the_fix() {
    let cfg = ConfigFile::parse(
        "[run]\nsandbox = \"require\"\nmax_patch_files = 7\n[sandbox]\nwritable = [\"~/.cache/b\"]\nhidden = [\"/srv\"]\n",
        "c",
    )
    .unwrap();
    let s = RunSettings::resolve(&cfg, &[&flags_with_command()]).unwrap();
    assert_eq!(s.sandbox, Sourced { value: SandboxMode::Require, origin: Origin::Config });
    assert_eq!(s.limits.value.max_patch_files, 7);
    assert_eq!(s.limits.value.max_patch_bytes, CandidateLimits::default().max_patch_bytes);
    assert_eq!(s.limits.origin, Origin::Config);
    assert_eq!(s.sandbox_paths.value.writable, vec!["~/.cache/b".to_string()]);
    let flag = RunSettings::resolve(&cfg, &[&RunOptions { sandbox: Some("off".into()), ..flags_with_command() }]);
    assert_eq!(flag.unwrap().sandbox, Sourced { value: SandboxMode::Off, origin: Origin::Flag });
    let defaults = RunSettings::resolve(&ConfigFile::default(), &[&flags_with_command()]).unwrap();
    assert_eq!(defaults.sandbox, Sourced { value: SandboxMode::Auto, origin: Origin::Default });

    let bad = RunSettings::resolve(
        &ConfigFile::default(),
        &[&RunOptions { sandbox: Some("on".into()), ..flags_with_command() }],
    );
    let err = bad.unwrap_err().to_string();
    assert!(err.contains("'on' (from flag) is not a sandbox mode") && err.contains("auto, require, off"), "{err}");
    let relative = ConfigFile::parse("[sandbox]\nwritable = [\"cache\"]\n", "c").unwrap();
    let err = RunSettings::resolve(&relative, &[&flags_with_command()]).unwrap_err().to_string();
    assert!(err.contains("'cache' is not an absolute path") && err.contains("~/paths"), "{err}");
    let zero = ConfigFile::parse("[run]\nmax_file_bytes = 0\n", "c").unwrap();
    assert!(RunSettings::resolve(&zero, &[&flags_with_command()]).unwrap_err().to_string().contains("positive number"));
    // Settings recorded before these existed read as their defaults.
    let mut old = serde_json::to_value(&defaults).unwrap();
    for key in ["sandbox", "sandbox_paths", "limits"] {
        old.as_object_mut().unwrap().remove(key);
    }
    let back: RunSettings = serde_json::from_value(old).unwrap();
    assert_eq!(back.sandbox.value, SandboxMode::Auto);
    assert_eq!(back.limits.value, CandidateLimits::default());
}

#[test]
fn zero_candidates_is_refused() {
    let err =
        RunSettings::resolve(&ConfigFile::default(), &[&RunOptions { candidates: Some(0), ..flags_with_command() }])
            .unwrap_err();
    assert!(err.to_string().contains("at least 1 candidate"), "{err}");
}

#[test]
fn unknown_runner_names_the_known_ones() {
    let err = RunSettings::resolve(
        &ConfigFile::default(),
        &[&RunOptions { runner: Some("nope".into()), ..flags_with_command() }],
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown runner 'nope'"), "{err}");
    assert!(err.to_string().contains("command"), "{err}");
}

#[test]
fn named_runners_round_robin() {
    let cfg = ConfigFile::parse(
        "[runners.a]\nkind = \"command\"\ncommand = \"./a.sh\"\n[runners.b]\nkind = \"command\"\ncommand = \"./b.sh\"\n",
        "c",
    )
    .unwrap();
    let s = RunSettings::resolve(
        &cfg,
        &[&RunOptions { runner: Some("a,b".into()), candidates: Some(3), ..Default::default() }],
    )
    .unwrap();
    assert_eq!(s.runner_for(0).name, "a");
    assert_eq!(s.runner_for(1).name, "b");
    assert_eq!(s.runner_for(2).name, "a");
    // Whatever a runner is called, a worker needs its kind to run it.
    assert_eq!(s.needs_of(1), vec!["runner:command".to_string()]);
    assert!(s.spreads());
    let one = RunSettings::resolve(
        &cfg,
        &[&RunOptions { runner: Some("a".into()), candidates: Some(1), ..Default::default() }],
    );
    assert!(!one.unwrap().spreads(), "one candidate is one unit");
}

#[test]
fn command_runner_without_command_says_how() {
    let err = RunSettings::resolve(&ConfigFile::default(), &[&RunOptions::default()]).unwrap_err();
    assert!(err.to_string().contains("--command"), "{err}");
}

#[test]
fn unknown_config_keys_are_reported() {
    let err = ConfigFile::parse("[run]\ncandidatez = 3\n", ".arbiter/config.toml").unwrap_err();
    assert!(err.to_string().contains("candidatez"), "{err}");
}

fn backends_config(extra: &str) -> ConfigFile {
    let text = format!(
        "[backends.cheap]\nprovider = \"openai-compatible\"\nmodel = \"small\"\nbase_url = \"http://127.0.0.1:9/v1\"\ninput_cost = \"1\"\noutput_cost = \"1\"\n\
         [backends.dear]\nprovider = \"anthropic\"\nmodel = \"big\"\ninput_cost = \"10\"\noutput_cost = \"10\"\ncapability = 5\n\
         [backends.off]\nprovider = \"anthropic\"\nmodel = \"x\"\nenabled = false\n{extra}"
    );
    ConfigFile::parse(&text, "c").unwrap()
}

fn runners(runner: &str, backend: Option<&str>, candidates: u32) -> RunOptions {
    RunOptions {
        runner: Some(runner.into()),
        backend: backend.map(str::to_string),
        candidates: Some(candidates),
        ..Default::default()
    }
}

fn agent(spec: &RunnerSpec) -> &AgentCliSpec {
    match &spec.kind {
        RunnerKind::Agent(a) => a,
        other => panic!("not an agent CLI: {other:?}"),
    }
}

#[test]
fn a_bare_agent_cli_name_needs_no_table() {
    for cli in AGENT_CLIS {
        let s = RunSettings::resolve(&ConfigFile::default(), &[&runners(cli, None, 1)]).unwrap();
        let spec = s.runner_for(0);
        assert_eq!(spec.name, *cli);
        assert_eq!(agent(spec), &AgentCliSpec { cli: cli.to_string(), ..Default::default() });
        assert_eq!(s.label_for(0), *cli, "no backend, no model: the bare name");
        assert_eq!(s.slot(0).price(), None, "a CLI on its own provider is unpriced");
    }
}

#[test]
fn runner_tables_configure_agent_clis() {
    let cfg = backends_config(
        "[runners.claude-code]\nkind = \"claude-code\"\nbinary = \"/opt/claude\"\nmodel = \"sonnet\"\n\
         permission_mode = \"bypassPermissions\"\nmax_turns = 7\nextra_args = [\"--verbose\"]\nenv_passthrough = [\"HTTPS_PROXY\"]\n\
         [runners.local]\nkind = \"claude-code\"\nbackend = \"dear\"\n",
    );
    let s = RunSettings::resolve(&cfg, &[&runners("claude-code,local", None, 2)]).unwrap();
    let a = agent(s.runner_for(0));
    assert_eq!(a.binary.as_deref(), Some("/opt/claude"));
    assert_eq!((a.model.as_deref(), a.max_turns), (Some("sonnet"), Some(7)));
    assert_eq!(a.permission_mode.as_deref(), Some("bypassPermissions"));
    assert_eq!(a.extra_args, ["--verbose"]);
    assert_eq!(s.runner_for(0).env_passthrough, ["HTTPS_PROXY"]);
    assert_eq!(s.label_for(0), "claude-code/sonnet");
    assert_eq!(s.label_for(1), "local/dear");
    assert_eq!(s.backend_chain_for(1), ["dear"]);
    assert_eq!(s.slot(1).price(), Usd::parse("20"), "priced by its backend");
}

#[test]
fn mixed_tournaments_label_every_candidate_with_runner_and_model() {
    let cfg = backends_config("[roles]\ncoding = [\"cheap\"]\n");
    let s = RunSettings::resolve(&cfg, &[&runners("claude-code,codex,builtin", None, 6)]).unwrap();
    let labels: Vec<String> = (0..6).map(|i| s.label_for(i)).collect();
    assert_eq!(labels, ["claude-code", "codex", "builtin/cheap", "claude-code", "codex", "builtin/cheap"]);

    // --backend applies round-robin to every model-driven runner without a backend of its own.
    let s = RunSettings::resolve(&cfg, &[&runners("claude-code,builtin", Some("dear,cheap"), 4)]).unwrap();
    let labels: Vec<String> = (0..4).map(|i| s.label_for(i)).collect();
    assert_eq!(labels, ["claude-code/dear", "builtin/dear", "claude-code/cheap", "builtin/cheap"]);
}

#[test]
fn escalation_orders_agent_clis_by_their_backend_price() {
    let cfg = backends_config("[runners.cc]\nkind = \"claude-code\"\nbackend = \"dear\"\n");
    let flags = RunOptions { strategy: Some("escalate".into()), ..runners("cc,builtin,codex", Some("cheap"), 1) };
    let flags = RunOptions { candidates: None, ..flags };
    let s = RunSettings::resolve(&cfg, &[&flags]).unwrap();
    let labels: Vec<String> = (0..s.candidates.value as usize).map(|i| s.label_for(i)).collect();
    assert_eq!(labels, ["builtin/cheap", "codex/cheap", "cc/dear"], "cheapest first; the table's backend stays");
}

#[test]
fn bad_agent_runner_tables_name_the_fix() {
    let err = |extra: &str, runner: &str| {
        RunSettings::resolve(&backends_config(extra), &[&runners(runner, None, 1)]).unwrap_err().to_string()
    };
    let e = err("[runners.x]\nkind = \"cursor\"\n", "x");
    assert!(e.contains("kind 'cursor'") && e.contains("claude-code"), "{e}");
    let e = err("[runners.x]\nkind = \"command\"\ncommand = \"./a\"\nmodel = \"m\"\n", "x");
    assert!(e.contains("sets `model`"), "{e}");
    let e = err("[runners.x]\nkind = \"codex\"\ncommand = \"./a\"\n", "x");
    assert!(e.contains("sets `command`"), "{e}");
    let e = err("[runners.x]\nkind = \"codex\"\nbackend = \"nope\"\n", "x");
    assert!(e.contains("no backend named 'nope'"), "{e}");
    let e = err("[runners.x]\nkind = \"codex\"\nbackend = \"off\"\n", "x");
    assert!(e.contains("disabled"), "{e}");
    let e = err("[runners.x]\nkind = \"codex\"\nbackend = \"cheap,dear\"\n", "x");
    assert!(e.contains("exactly one"), "{e}");
    let e = err("[runners.x]\nkind = \"gemini\"\nmax_turns = 0\n", "x");
    assert!(e.contains("max_turns = 0"), "{e}");
    let e = RunSettings::resolve(&backends_config(""), &[&runners("aider", Some("ghost"), 1)]).unwrap_err();
    assert!(e.to_string().contains("no backend named 'ghost'"), "{e}");
    let e = RunSettings::resolve(&ConfigFile::default(), &[&runners("claude", None, 1)]).unwrap_err();
    assert!(e.to_string().contains("unknown runner 'claude'") && e.to_string().contains("claude-code"), "{e}");
}

#[test]
fn apply_modes_parse() {
    assert_eq!(ApplyMode::parse("branch:fix").unwrap(), ApplyMode::Branch("fix".into()));
    assert!(ApplyMode::parse("branch:").is_err());
    assert!(ApplyMode::parse("elsewhere").is_err());
}
