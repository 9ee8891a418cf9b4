//! Run settings: the `.arbiter/config.toml` schema, the flags that override it, and their
//! layering (flags over config over built-in defaults) with the origin of every value.
//!
//! Reading the file is the caller's business; this module parses text and resolves values.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::crosstest::CrossTestRule;
use crate::limits::CandidateLimits;
use crate::money::Usd;
use crate::sandbox::SandboxMode;
use crate::strategy::{CandidateOption, Strategy, capable, cheapest_first, strongest_first};

/// Built-in defaults.
pub mod defaults {
    pub const CANDIDATES: u32 = 3;
    /// The most candidates one run may have: each is a workspace and an agent of its own,
    /// and the evidence between them grows with the square of their number.
    pub const MAX_CANDIDATES: u32 = 64;
    pub const TIMEOUT_SECONDS: u64 = 1800;
    pub const VERIFY_TIMEOUT_SECONDS: u64 = 600;
    pub const SETUP_TIMEOUT_SECONDS: u64 = 600;
    pub const RUNNER: &str = "command";
    pub const MAX_STEPS: u32 = 40;
    pub const MAX_TOKENS: u64 = 400_000;
    /// The most repair rounds a candidate may have.
    pub const MAX_REPAIR_ROUNDS: u32 = 20;
}

/// The text `arbiter init` writes: every setting, commented, at its default.
pub const DEFAULT_CONFIG_TOML: &str = r#"# arbiter configuration. Command-line flags override these values; these values override
# the built-in defaults. `arbiter config show` prints the resolved settings and their origin.

[run]
# Independent candidates per run.
# candidates = 3
# Candidates running at once (a sliding pool). Defaults to `candidates`.
# parallel = 3
# Wall-clock limit of one candidate's agent, in seconds (its whole process group is killed).
# timeout_seconds = 1800
# Commands arbiter runs itself on the base and on every candidate. A candidate passes when
# every command that passed on the base still passes and every one that failed now passes.
# verify = ["python3 -m unittest -q"]
# verify_timeout_seconds = 600
# Ignored files copied from the repository into each worktree (paths or globs).
# include = [".env"]
# Command run in each fresh worktree before the agent starts (e.g. installing dependencies).
# setup = "npm ci"
# setup_timeout_seconds = 600
# Runner (or comma-separated runners, assigned round-robin) used when --runner is not given.
# runner = "command"
# Command of the `command` runner when --command is not given.
# command = "./agent.sh"
# Backend(s) of the `builtin` runner (comma-separated: one per candidate, round-robin);
# without it the [roles] coding chain is used.
# backend = "local-qwen"
# The built-in agent's limits per candidate: model steps and input+output tokens.
# max_steps = 40
# max_tokens = 400000
# What to do with the winner: "worktree" (apply to the working tree), "none", or
# "branch:NAME" (a new branch with one commit; the working tree is untouched).
# apply = "worktree"
# Keep candidate workspaces after the run (they go back to the workspace pool by default).
# keep_worktrees = false
# The sandbox every process a candidate starts runs in: "auto" (what the kernel offers:
# Landlock, user and PID namespaces; the report says what was enforced), "require" (refuse to
# run without Landlock) or "off" (candidates run with your full rights). See docs/security.md.
# sandbox = "auto"
# Limits on a candidate's patch; a patch over one is rejected, never applied.
# max_patch_bytes = 10485760
# max_patch_files = 1000
# max_file_bytes = 5242880
# Extra environment variables passed to agents, setup and verify commands. Agents get an
# allowlist (PATH, HOME, locale, proxies) and never arbiter's own secrets.
# env_passthrough = []
# Files a candidate must not modify or delete to pass its gates (tests and CI configuration;
# globs). Changed ones are restored to the base version when arbiter runs the verify
# commands, and the candidate is flagged and not eligible unless test changes are allowed.
# New test files a candidate adds are taken out of its gates; new CI files count against it.
# What decides how the tests run (conftest.py, pytest.ini, [tool.pytest], jest.config.*,
# .cargo/config, ...) is derived per framework and put back as the base has it, whatever
# this list says. Default: tests/**, **/test_*.py, **/*_test.go, **/*.spec.ts, .github/**,
# ... (see docs/configuration.md).
# protected_paths = ["tests/**", "**/test_*.py"]
# Build and cache output a candidate's run leaves behind (globs): files it added there never
# enter its patch or its size, even in a repository without a .gitignore. Default:
# **/__pycache__/**, **/*.pyc, **/.pytest_cache/**, **/node_modules/**, **/target/**, ...
# (see docs/configuration.md); [] captures everything.
# build_outputs = ["**/__pycache__/**", "**/*.pyc"]
# JUnit XML reports the verify commands write (globs, relative to the tree): a report a gate's
# run wrote is read for the tests that failed, ahead of the runner's printed output. Paths a
# command names itself (pytest --junitxml=PATH, ...) are read without being listed here.
# test_reports = ["target/surefire-reports/*.xml"]
# allow_test_changes = false
# How candidates are spent: "tournament" (all at once), "escalate" (one at a time, cheapest
# capable backend first, stopping at the first that passes its gates), or a preset:
# "cheap" (escalate over the two cheapest), "balanced" (escalate over all), "quality"
# (a tournament, strongest backends first).
# strategy = "tournament"
# Backends whose capability is below this are not used.
# min_capability = 0
# Stop candidates and judges once the run has spent this much (USD).
# budget_usd = "2.50"
# Run the rules engine (see [rules]) as a gate on the files each candidate changes.
# rules = false
# After a candidate's agent ends, run its gates in its tree and give the failures (rule
# violations as path:line message, failing tests with their output) back to the same agent,
# up to this many times. Each round is recorded under candidates/<id>/repair/.
# repair_rounds = 0

# The rules engine (`arbiter rules check`, the rules gate, `arbiter qa`). Rule files are
# orch.py's: <dir>/<lang>/core.json under each of `dirs` (replacing the shipped core set of
# that language), plus every .arbiter/rules/<lang>/*.json. See docs/slices.md.
# [rules]
# dirs = [".agents/rules"]
# shipped = true
# groups = ["standards", "structure", "constitution"]
# python = "python3"
# max_file_bytes = 1048576

# Feature slices (`arbiter feature`, `arbiter qa`; see docs/slices.md).
# [slices]
# test_command = "python3 -m pytest -q {tests}"
# test_timeout_seconds = 300
# tests_file = "Tests.py"
# repair_rounds = 3
# spec_qa_rounds = 3
# template = "python"
# default_branch = "main"
# remote = "origin"
# push = true

# The sandbox's paths, beyond the built-in ones (see docs/security.md). `writable`: paths
# every candidate process may also write (a shared build cache, say: candidates can then
# leave things there for each other); `hidden`: paths no candidate process may read.
# [sandbox]
# writable = ["~/.cache/my-build-cache"]
# hidden = ["~/work/other-client"]

# Cross-tests: test files candidates add or change are pooled and run against every
# surviving candidate and the base; tests that fail on the base and pass somewhere rank the
# candidates. Rules replace the built-in ones (Python, Rust, Go, JS/TS); placeholders:
# {path} {dir} {stem} {module} {verify}.
# [cross_tests]
# enabled = true
# [[cross_tests.rules]]
# pattern = "**/test_*.py"
# command = "python3 -m pytest -q {path}"

# Named runners: `--runner fast-agent` uses this command.
# [runners.fast-agent]
# kind = "command"
# command = "./agents/fast.sh"
# env_passthrough = ["MY_AGENT_TOKEN"]

# Agent CLIs (claude-code, codex, gemini, aider, opencode, villani-code) work as runner
# names without a table; a table sets their options (`arbiter runners` lists what is
# installed). See docs/runners.md.
# [runners.claude-code]
# kind = "claude-code"
# binary = "claude"
# model = "sonnet"
# permission_mode = "acceptEdits"
# max_turns = 30
# extra_args = ["--allowedTools", "Bash(git:*) Edit Read"]
# backend = "local-claude"       # point the CLI at a configured backend (default: its own provider)
# env_passthrough = []

# Model backends (managed with `arbiter backend add|list|show|remove|enable|disable|test`).
# Keys are never stored here: name an environment variable, or use --api-key-stdin to keep
# the key in the repository's secrets file (~/.config/arbiter/secrets/, mode 0600).
# [backends.local-qwen]
# provider = "openai-compatible"
# model = "qwen2.5-coder-7b-instruct"
# base_url = "http://127.0.0.1:8080/v1"
# input_cost = "0"
# output_cost = "0"
# roles = ["coding"]
# max_parallel = 2

# Ordered backend chains per role; on an error the next backend is tried.
# [roles]
# coding = ["local-qwen", "gpt"]

# Issues into plans, pull requests, and the analysis of failed plan attempts
# (docs/intake.md).
# [intake]
# label_pending = "arbiter:pending"
# label_in_progress = "arbiter:in-progress"
# label_done = "arbiter:done"
# label_failed = "arbiter:failed"
# push = true
# docs_dir = "docs"
# [forge]
# repository = "OWNER/REPO"
# [analysis]
# timeout_seconds = 120
# max_cost_usd = "0.10"
"#;

/// `.arbiter/config.toml` as written by users.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub run: RunSection,
    #[serde(default)]
    pub runners: BTreeMap<String, RunnerSection>,
    #[serde(default)]
    pub backends: BTreeMap<String, crate::backends::BackendSection>,
    /// Ordered backend chains per role: `coding = ["local-qwen", "gpt"]`.
    #[serde(default)]
    pub roles: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub cross_tests: CrossTestSection,
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// Where the rules engine's rule files come from and how it reads files.
    #[serde(default)]
    pub rules: crate::rules::RulesSection,
    /// The feature-slice workflow (`arbiter feature`, `arbiter qa`).
    #[serde(default)]
    pub slices: SlicesSection,
    #[serde(default)]
    pub intake: crate::intake::config::IntakeSection,
    #[serde(default)]
    pub forge: crate::intake::config::ForgeSection,
    #[serde(default)]
    pub analysis: crate::intake::config::AnalysisSection,
}

/// The `[slices]` table: how `arbiter feature` and `arbiter qa` work on feature slices.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlicesSection {
    /// The command that runs one slice's tests, in the repository root: `{tests}` is the
    /// slice's test file and `{dir}` its directory, both relative to the root (default
    /// `python3 -m pytest -q {tests}`).
    pub test_command: Option<String>,
    /// Seconds the test command may take (default 300).
    pub test_timeout_seconds: Option<u64>,
    /// The file of a slice that holds its tests (default `Tests.py`).
    pub tests_file: Option<String>,
    /// Repair rounds of each `feature do` candidate (default 3).
    pub repair_rounds: Option<u32>,
    /// Spec QA rounds of `feature new` and `feature modify` (default 3).
    pub spec_qa_rounds: Option<u32>,
    /// The template set `feature new` scaffolds (default `python`, orch.py's slice).
    pub template: Option<String>,
    /// The integration branch (default: `main`, else `master`, else git's `init.defaultBranch`).
    pub default_branch: Option<String>,
    /// The remote `do`, `merge`, `undo` and `delete` push to and fetch from (default `origin`).
    pub remote: Option<String>,
    /// Push after `do` and `merge` when the remote exists (default true).
    pub push: Option<bool>,
}

/// The `[sandbox]` table: paths beyond the built-in ones (`~/` is the home directory).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// Paths every candidate process may also write.
    #[serde(default)]
    pub writable: Vec<String>,
    /// Paths no candidate process may read.
    #[serde(default)]
    pub hidden: Vec<String>,
}

/// The `[cross_tests]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CrossTestSection {
    pub enabled: Option<bool>,
    /// Replace the built-in rules.
    pub rules: Option<Vec<CrossTestRule>>,
}

/// The `[run]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    pub candidates: Option<u32>,
    pub parallel: Option<u32>,
    pub timeout_seconds: Option<u64>,
    pub verify: Option<Vec<String>>,
    pub verify_timeout_seconds: Option<u64>,
    pub include: Option<Vec<String>>,
    pub setup: Option<String>,
    pub setup_timeout_seconds: Option<u64>,
    pub runner: Option<String>,
    pub command: Option<String>,
    /// Backend(s) of the `builtin` runner; several are assigned round-robin.
    pub backend: Option<String>,
    /// The built-in agent's limits per candidate: model steps, and input+output tokens.
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u64>,
    pub apply: Option<String>,
    pub keep_worktrees: Option<bool>,
    /// `auto`, `require` or `off`.
    pub sandbox: Option<String>,
    pub max_patch_bytes: Option<u64>,
    pub max_patch_files: Option<u64>,
    pub max_file_bytes: Option<u64>,
    pub env_passthrough: Option<Vec<String>>,
    /// Globs of files a candidate must not modify or delete to pass (tests, CI, test
    /// configuration); adding configuration of how the tests run counts too.
    pub protected_paths: Option<Vec<String>>,
    /// Globs of build and cache output (`__pycache__`, `node_modules`, `target`, ...) a
    /// candidate's run leaves behind: files it added there never enter its patch.
    pub build_outputs: Option<Vec<String>>,
    /// Globs of the JUnit XML reports the verify commands write.
    pub test_reports: Option<Vec<String>>,
    /// Let candidates change protected files (their gates then run on their versions).
    pub allow_test_changes: Option<bool>,
    /// Ask the `selection` role's backends to compare candidates the evidence cannot separate.
    pub judge: Option<bool>,
    /// `tournament`, `escalate`, `cheap`, `balanced` or `quality`.
    pub strategy: Option<String>,
    /// Backends below this capability are not used.
    pub min_capability: Option<u32>,
    /// Stop candidates and judges once the run has spent this much.
    #[serde(default, deserialize_with = "crate::money::deserialize_budget")]
    pub budget_usd: Option<Usd>,
    /// Run the rules engine as a gate on the files each candidate changes.
    pub rules: Option<bool>,
    /// Feed a candidate's gate failures back to its agent up to this many times.
    pub repair_rounds: Option<u32>,
}

/// A `[runners.NAME]` table: a `command` runner, or an agent CLI with its settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSection {
    /// `command`, or one of [`AGENT_CLIS`].
    pub kind: String,
    /// The `command` runner's command line.
    pub command: Option<String>,
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// Agent CLIs: the program (a path, or a name looked up on `PATH`); default the CLI's
    /// usual binary (`claude`, `codex`, ...).
    pub binary: Option<String>,
    /// Agent CLIs: the model to ask for (default: the backend's model, else the CLI's own).
    pub model: Option<String>,
    /// Agent CLIs: arguments appended to arbiter's (never a secret: argv is visible to
    /// every process on the machine).
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Agent CLIs: Claude Code's permission mode, Codex's sandbox, Gemini CLI's approval
    /// mode (defaults `acceptEdits`, `workspace-write`, `yolo`).
    pub permission_mode: Option<String>,
    /// Agent CLIs: Claude Code `--max-turns`, Gemini CLI `maxSessionTurns`.
    pub max_turns: Option<u32>,
    /// Agent CLIs: a configured backend the CLI is pointed at (base URL, model, key and the
    /// price its tokens are charged at). Without it the run's `--backend` list applies, and
    /// without that the CLI uses its own provider and login.
    pub backend: Option<String>,
    /// Agent CLIs on their own provider: `true` gives the CLI a clean home, without the
    /// user's login and configuration (by default they are copied in, without MCP servers,
    /// hooks and plugins).
    pub isolate: Option<bool>,
    /// Agent CLIs on their own provider: what of the user's configuration comes along
    /// besides the login and providers: `mcp`, `hooks`, `plugins`.
    #[serde(default)]
    pub inherit: Vec<String>,
}

/// What of the user's own agent configuration a runner table can ask for (`inherit`).
pub const INHERITABLE: &[&str] = &["mcp", "hooks", "plugins"];

/// Values given on the command line; `None` means "not given".
#[derive(Clone, Debug, Default)]
pub struct FlagOverrides {
    pub candidates: Option<u32>,
    pub parallel: Option<u32>,
    pub timeout_seconds: Option<u64>,
    pub verify: Vec<String>,
    pub verify_timeout_seconds: Option<u64>,
    pub include: Vec<String>,
    pub setup: Option<String>,
    pub runner: Option<String>,
    pub command: Option<String>,
    pub backend: Option<String>,
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u64>,
    pub apply: Option<String>,
    pub keep_worktrees: bool,
    pub sandbox: Option<String>,
    pub allow_test_changes: bool,
    pub no_judge: bool,
    pub strategy: Option<String>,
    pub min_capability: Option<u32>,
    pub budget_usd: Option<Usd>,
    pub no_cross_tests: bool,
    /// `--no-verify`: no verify command, none detected, and a winner applied unverified.
    pub no_verify: bool,
    /// `--rules`: the rules engine is a gate.
    pub rules: bool,
    pub repair_rounds: Option<u32>,
}

/// Where a resolved value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Default,
    Config,
    Flag,
    /// Found in the repository's files (its test command, when none was given).
    Detected,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Default => "default",
            Origin::Config => "config",
            Origin::Flag => "flag",
            Origin::Detected => "detected",
        })
    }
}

/// A value and its origin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

/// The default value (settings recorded before the setting existed read as its default).
impl<T: Default> Default for Sourced<T> {
    fn default() -> Self {
        Sourced { value: T::default(), origin: Origin::Default }
    }
}

fn layer<T>(flag: Option<T>, config: Option<T>, default: T) -> Sourced<T> {
    match (flag, config) {
        (Some(value), _) => Sourced { value, origin: Origin::Flag },
        (None, Some(value)) => Sourced { value, origin: Origin::Config },
        (None, None) => Sourced { value: default, origin: Origin::Default },
    }
}

fn non_empty(v: Vec<String>) -> Option<Vec<String>> {
    (!v.is_empty()).then_some(v)
}

/// Where the winning patch goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "mode", content = "branch", rename_all = "snake_case")]
pub enum ApplyMode {
    /// Apply to the repository's working tree.
    Worktree,
    /// Create a new branch holding one commit; the working tree is untouched.
    Branch(String),
    /// Leave the repository alone.
    None,
}

impl ApplyMode {
    pub fn parse(s: &str) -> Result<Self, SettingsError> {
        match s {
            "worktree" => Ok(ApplyMode::Worktree),
            "none" => Ok(ApplyMode::None),
            other => match other.strip_prefix("branch:") {
                Some(name) if !name.trim().is_empty() => Ok(ApplyMode::Branch(name.trim().to_string())),
                _ => Err(SettingsError::Invalid {
                    key: "apply",
                    problem: format!("'{s}' is not an apply mode"),
                    fix: "use `worktree`, `none` or `branch:NAME`".into(),
                }),
            },
        }
    }
}

impl fmt::Display for ApplyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyMode::Worktree => f.write_str("worktree"),
            ApplyMode::None => f.write_str("none"),
            ApplyMode::Branch(b) => write!(f, "branch:{b}"),
        }
    }
}

/// How a runner produces a candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunnerKind {
    /// Any program: `sh -c COMMAND` in the worktree.
    Command { command: String },
    /// arbiter's own agent loop over model backends. With `round_robin`, candidate `i`
    /// uses only `backends[i % n]`; otherwise every candidate uses the whole chain, in order,
    /// falling through on errors.
    Builtin { backends: Vec<String>, round_robin: bool },
    /// An agent CLI ([`AGENT_CLIS`]) run unattended in the worktree.
    Agent(AgentCliSpec),
}

/// How an agent CLI runs: what `[runners.NAME]` says, defaults otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct AgentCliSpec {
    /// One of [`AGENT_CLIS`].
    pub cli: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The backends the CLI is pointed at, one per candidate, round-robin (a CLI talks to
    /// one endpoint: there is no fallback chain). Empty: the CLI's own provider.
    #[serde(default)]
    pub backends: Vec<String>,
    /// On its own provider, a clean home: none of the user's login or configuration.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub isolate: bool,
    /// On its own provider, the user's configuration of these kinds comes along too
    /// (see [`INHERITABLE`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit: Vec<String>,
}

/// A runner ready to be assigned to candidates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunnerSpec {
    /// The name candidates are labelled with (`command` or a `[runners.NAME]` key).
    pub name: String,
    #[serde(flatten)]
    pub kind: RunnerKind,
    /// Variables passed to this runner beyond the allowlist.
    pub env_passthrough: Vec<String>,
}

/// Every setting of a run, resolved, with its origin (recorded as `settings.json` in the
/// run directory, which is what `arbiter runs resume` continues with).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunSettings {
    pub candidates: Sourced<u32>,
    pub parallel: Sourced<u32>,
    pub timeout_seconds: Sourced<u64>,
    pub verify: Sourced<Vec<String>>,
    /// The file the verify command was detected from (`verify`'s origin is `detected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_detected_from: Option<String>,
    /// `--no-verify`: the user accepts a winner that no verify command checked.
    #[serde(default)]
    pub unverified: Sourced<bool>,
    pub verify_timeout_seconds: Sourced<u64>,
    pub include: Sourced<Vec<String>>,
    pub setup: Sourced<Option<String>>,
    pub setup_timeout_seconds: Sourced<u64>,
    pub runner: Sourced<String>,
    pub command: Sourced<Option<String>>,
    pub backend: Sourced<Option<String>>,
    pub max_steps: Sourced<u32>,
    pub max_tokens: Sourced<u64>,
    pub apply: Sourced<ApplyMode>,
    pub keep_worktrees: Sourced<bool>,
    #[serde(default)]
    pub sandbox: Sourced<SandboxMode>,
    /// `[sandbox] writable` and `hidden`.
    #[serde(default)]
    pub sandbox_paths: Sourced<SandboxSection>,
    #[serde(default)]
    pub limits: Sourced<CandidateLimits>,
    pub env_passthrough: Sourced<Vec<String>>,
    pub protected_paths: Sourced<Vec<String>>,
    /// Build and cache output left out of patches (files added there; tracked ones count).
    #[serde(default)]
    pub build_outputs: Sourced<Vec<String>>,
    /// JUnit XML reports the gates write (globs), read for the tests that failed.
    #[serde(default)]
    pub test_reports: Sourced<Vec<String>>,
    pub allow_test_changes: Sourced<bool>,
    pub judge: Sourced<bool>,
    pub strategy: Sourced<Strategy>,
    pub min_capability: Sourced<u32>,
    pub budget_usd: Sourced<Option<Usd>>,
    pub cross_tests: Sourced<bool>,
    pub cross_test_rules: Sourced<Vec<CrossTestRule>>,
    /// The rules engine is a gate: on the files each candidate changes.
    #[serde(default)]
    pub rules: Sourced<bool>,
    /// Where the rules gate reads its rules from (the `[rules]` table).
    #[serde(default)]
    pub rule_options: crate::rules::RuleOptions,
    /// Rounds of gate feedback each candidate's agent gets after it ends (0: none).
    #[serde(default)]
    pub repair_rounds: Sourced<u32>,
    /// Programs of the user's working tree that the base lacks, run from copies outside
    /// every workspace (their paths in the working tree are not counted as uncommitted work).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_programs: Vec<OutsideProgram>,
    /// The runners named by `runner`, resolved against `[runners]`.
    pub runners: Vec<RunnerSpec>,
    /// What each candidate runs, by index (see [`crate::strategy`]).
    pub slots: Vec<CandidateOption>,
}

impl RunSettings {
    /// What a candidate's run may leave in its tree that never enters its patch: the build
    /// outputs, and the test reports the verify commands write (the `test_reports` globs and
    /// the paths the commands name), so an agent that ran the tests itself leaves no report in
    /// its patch.
    pub fn left_out_of_patches(&self) -> Vec<String> {
        let named = self.verify.value.iter().flat_map(|c| crate::test_report::reports_named_in(c));
        self.build_outputs.value.iter().chain(&self.test_reports.value).cloned().chain(named).collect()
    }
}

/// A program of the working tree (`path`, relative to the repository root) run from a copy
/// outside every workspace (`copy`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct OutsideProgram {
    pub path: String,
    pub copy: String,
}

/// The first of `globs` that is not a glob, with why.
fn first_invalid_glob<'a>(globs: impl IntoIterator<Item = &'a String>) -> Option<(&'a String, String)> {
    globs.into_iter().find_map(|g| crate::protect::invalid_glob(g).map(|why| (g, why)))
}

/// How to write a glob, for a setting that holds one that is not.
const GLOB_FIX: &str = "write globs like \"tests/**\" or \"**/test_*.py\" (`*` within a name, `**` across directories, `[ab]`, `{a,b}`; escape a literal character with a backslash)";

/// Whether an include entry names `.git` or `.arbiter` (or something inside them).
pub fn names_private_dir(entry: &str) -> bool {
    let first = entry.trim().trim_start_matches("./").split('/').next().unwrap_or("");
    first == ".git" || first == ".arbiter"
}

/// A setting that cannot be used, with the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("invalid {key}: {problem}; {fix}")]
    Invalid { key: &'static str, problem: String, fix: String },
    #[error(
        "unknown runner '{name}': known runners are {known}; add a [runners.{name}] table to .arbiter/config.toml to define it"
    )]
    UnknownRunner { name: String, known: String },
    #[error("the {runner} runner needs a command: pass --command 'PROGRAM ARGS' or set `command` in {where_}")]
    MissingCommand { runner: String, where_: String },
    #[error("cannot parse {path}: {message}")]
    Parse { path: String, message: String },
    #[error(
        "the builtin runner needs a model backend: add one with `arbiter backend add NAME --provider ... --model ...` (role coding), or pass --backend NAME"
    )]
    NoBackend,
}

/// Runner kinds this build knows, in the order `arbiter` lists them.
pub const RUNNER_KINDS: &[&str] =
    &["command", "builtin", "claude-code", "codex", "gemini", "aider", "opencode", "villani-code"];

/// The agent CLIs among the runner kinds (each also usable as a runner name without a
/// `[runners]` table).
pub const AGENT_CLIS: &[&str] = &["claude-code", "codex", "gemini", "aider", "opencode", "villani-code"];

impl RunSection {
    /// The limits on a candidate's patch this section sets (defaults for what it leaves out):
    /// what a run enforces while capturing, and what `arbiter apply` and `arbiter pr` check a
    /// run's patch against again.
    pub fn limits(&self) -> Result<Sourced<CandidateLimits>, SettingsError> {
        let d = CandidateLimits::default();
        let given = self.max_patch_bytes.is_some() || self.max_patch_files.is_some() || self.max_file_bytes.is_some();
        let value = CandidateLimits {
            max_patch_bytes: self.max_patch_bytes.unwrap_or(d.max_patch_bytes),
            max_patch_files: self.max_patch_files.unwrap_or(d.max_patch_files),
            max_file_bytes: self.max_file_bytes.unwrap_or(d.max_file_bytes),
        };
        if value.max_patch_bytes == 0 || value.max_patch_files == 0 || value.max_file_bytes == 0 {
            return Err(SettingsError::Invalid {
                key: "max_patch_bytes/max_patch_files/max_file_bytes",
                problem: "0".into(),
                fix: "give each limit a positive number, or leave it out for the default".into(),
            });
        }
        Ok(Sourced { value, origin: if given { Origin::Config } else { Origin::Default } })
    }
}

impl ConfigFile {
    /// Parses the text of a configuration file; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self, SettingsError> {
        toml::from_str(text)
            .map_err(|e| SettingsError::Parse { path: path.to_string(), message: e.to_string().trim().to_string() })
    }
}

impl RunSettings {
    /// Layers `flags` over `config` over the built-in defaults, validates the result and
    /// resolves the runners it names.
    pub fn resolve(config: &ConfigFile, flags: FlagOverrides) -> Result<Self, SettingsError> {
        let mut settings = Self::resolve_values(config, flags)?;
        settings.runners = settings.resolve_runners(config)?;
        settings.assign_slots(config)?;
        Ok(settings)
    }

    /// Every distinct way to produce a candidate: each runner, and for the built-in agent
    /// with one backend per candidate, each of its backends; priced from the backends.
    fn options(&self, config: &ConfigFile) -> Vec<CandidateOption> {
        let mut options = Vec::new();
        for (i, spec) in self.runners.iter().enumerate() {
            options.extend(backend_choices(&spec.kind).into_iter().map(|backends| option_for(config, i, backends)));
        }
        options
    }

    /// Decides what each candidate runs: round-robin over runners and backends for a
    /// tournament; the options in cost or strength order for the other strategies, whose
    /// presets also choose the number of candidates when none was configured.
    fn assign_slots(&mut self, config: &ConfigFile) -> Result<(), SettingsError> {
        let strategy = self.strategy.value;
        let min = self.min_capability.value;
        let options = self.options(config);
        let ordered = match strategy {
            Strategy::Tournament => capable(&options, min),
            s if s.escalates() => cheapest_first(&options, min),
            _ => strongest_first(&options, min),
        };
        if ordered.is_empty() {
            return Err(SettingsError::Invalid {
                key: "min_capability",
                problem: format!("no runner or backend has capability {min} or more"),
                fix: "lower --min-capability or add a more capable backend (`arbiter backend add ... --capability N`)"
                    .into(),
            });
        }
        if self.candidates.origin == Origin::Default {
            self.candidates.value = strategy.default_candidates(ordered.len(), self.candidates.value);
        }
        if strategy.escalates() {
            self.parallel = Sourced { value: 1, origin: self.strategy.origin };
        } else if self.parallel.origin == Origin::Default {
            self.parallel.value = self.candidates.value;
        }
        let n = self.candidates.value as usize;
        self.slots = if strategy == Strategy::Tournament && min == 0 {
            (0..n).map(|i| self.round_robin(config, i)).collect()
        } else {
            (0..n).map(|i| ordered[i % ordered.len()].clone()).collect()
        };
        Ok(())
    }

    /// The tournament assignment: candidate `i` uses runner `i mod r` and, for a built-in
    /// agent with one backend per candidate or an agent CLI, backend `(i / r) mod b`.
    fn round_robin(&self, config: &ConfigFile, index: usize) -> CandidateOption {
        let r = index % self.runners.len();
        let mut choices = backend_choices(&self.runners[r].kind);
        let backends = choices.swap_remove((index / self.runners.len()) % choices.len());
        option_for(config, r, backends)
    }

    /// The runners `runner` names, resolved against `[runners]` and `command`.
    pub fn resolve_runners(&self, config: &ConfigFile) -> Result<Vec<RunnerSpec>, SettingsError> {
        resolve_runners(
            config,
            &self.runner.value,
            self.command.value.as_deref(),
            self.command.origin,
            self.backend.value.as_deref(),
        )
    }

    /// Like [`RunSettings::resolve`] but leaves `runners` empty (for showing settings).
    pub fn resolve_values(config: &ConfigFile, flags: FlagOverrides) -> Result<Self, SettingsError> {
        let run = &config.run;
        let candidates = layer(flags.candidates, run.candidates, defaults::CANDIDATES);
        if candidates.value == 0 {
            return Err(SettingsError::Invalid {
                key: "candidates",
                problem: format!("0 (from {})", candidates.origin),
                fix: "a run needs at least 1 candidate".into(),
            });
        }
        if candidates.value > defaults::MAX_CANDIDATES {
            return Err(SettingsError::Invalid {
                key: "candidates",
                problem: format!("{} (from {})", candidates.value, candidates.origin),
                fix: format!(
                    "a run has at most {} candidates (each is a workspace and an agent of its own); use fewer",
                    defaults::MAX_CANDIDATES
                ),
            });
        }
        let parallel = layer(flags.parallel, run.parallel, candidates.value);
        if parallel.value == 0 {
            return Err(SettingsError::Invalid {
                key: "parallel",
                problem: format!("0 (from {})", parallel.origin),
                fix: "use at least 1".into(),
            });
        }
        let positive = |key: &'static str, s: Sourced<u64>| {
            if s.value == 0 {
                Err(SettingsError::Invalid {
                    key,
                    problem: format!("0 seconds (from {})", s.origin),
                    fix: "use a positive number of seconds".into(),
                })
            } else {
                Ok(s)
            }
        };
        let timeout_seconds =
            positive("timeout_seconds", layer(flags.timeout_seconds, run.timeout_seconds, defaults::TIMEOUT_SECONDS))?;
        let verify_timeout_seconds = positive(
            "verify_timeout_seconds",
            layer(flags.verify_timeout_seconds, run.verify_timeout_seconds, defaults::VERIFY_TIMEOUT_SECONDS),
        )?;
        let setup_timeout_seconds =
            positive("setup_timeout_seconds", layer(None, run.setup_timeout_seconds, defaults::SETUP_TIMEOUT_SECONDS))?;
        if flags.no_verify && !flags.verify.is_empty() {
            return Err(SettingsError::Invalid {
                key: "verify",
                problem: "--no-verify and --verify were both given".into(),
                fix: "keep --verify to check the candidates, or --no-verify to accept an unverified winner".into(),
            });
        }
        let unverified = layer(flags.no_verify.then_some(true), None, false);
        let verify = if flags.no_verify {
            Sourced { value: Vec::new(), origin: Origin::Flag }
        } else {
            layer(non_empty(flags.verify), run.verify.clone(), Vec::new())
        };
        if let Some(blank) = verify.value.iter().position(|v| v.trim().is_empty()) {
            return Err(SettingsError::Invalid {
                key: "verify",
                problem: format!("command #{} is empty", blank + 1),
                fix: "give each --verify a command to run".into(),
            });
        }
        let include = layer(non_empty(flags.include), run.include.clone(), Vec::new());
        if let Some((bad, why)) = first_invalid_glob(&include.value) {
            return Err(SettingsError::Invalid {
                key: "include",
                problem: format!("'{bad}' is not a path or a glob ({why})"),
                fix: GLOB_FIX.into(),
            });
        }
        if let Some(bad) = include.value.iter().find(|i| names_private_dir(i)) {
            return Err(SettingsError::Invalid {
                key: "include",
                problem: format!("'{bad}' names arbiter's own directory or git's ({} of the repository)", if bad.trim_start_matches("./").starts_with(".git") { ".git/" } else { ".arbiter/" }),
                fix: "include copies ignored files such as .env into each workspace; .git/ and .arbiter/ are never copied (every workspace has a git of its own, and .arbiter/ holds the runs)".into(),
            });
        }
        let setup = layer(flags.setup.map(Some), run.setup.clone().map(Some), None);
        let runner = layer(flags.runner, run.runner.clone(), defaults::RUNNER.to_string());
        let command = layer(flags.command.map(Some), run.command.clone().map(Some), None);
        let backend = layer(flags.backend.map(Some), run.backend.clone().map(Some), None);
        let max_steps = layer(flags.max_steps, run.max_steps, defaults::MAX_STEPS);
        let max_tokens = layer(flags.max_tokens, run.max_tokens, defaults::MAX_TOKENS);
        if max_steps.value == 0 || max_tokens.value == 0 {
            return Err(SettingsError::Invalid {
                key: "max_steps/max_tokens",
                problem: "0".into(),
                fix: "the built-in agent needs at least 1 step and 1 token".into(),
            });
        }
        let apply_text = layer(flags.apply, run.apply.clone(), "worktree".to_string());
        let apply = Sourced { value: ApplyMode::parse(&apply_text.value)?, origin: apply_text.origin };
        let keep_worktrees = layer(flags.keep_worktrees.then_some(true), run.keep_worktrees, false);
        let sandbox_text = layer(flags.sandbox, run.sandbox.clone(), SandboxMode::Auto.as_str().to_string());
        let sandbox = Sourced {
            value: SandboxMode::parse(&sandbox_text.value).ok_or_else(|| SettingsError::Invalid {
                key: "sandbox",
                problem: format!("'{}' (from {}) is not a sandbox mode", sandbox_text.value, sandbox_text.origin),
                fix: format!("use one of {}", SandboxMode::NAMES.join(", ")),
            })?,
            origin: sandbox_text.origin,
        };
        let sandbox_paths = layer(
            None,
            (config.sandbox != SandboxSection::default()).then(|| config.sandbox.clone()),
            SandboxSection::default(),
        );
        if let Some(bad) = sandbox_paths.value.writable.iter().chain(&sandbox_paths.value.hidden).find(|p| {
            let p = p.trim();
            !(p.starts_with('/') || p.starts_with("~/"))
        }) {
            return Err(SettingsError::Invalid {
                key: "sandbox",
                problem: format!("'{bad}' is not an absolute path"),
                fix: "write [sandbox] writable and hidden paths as /absolute/paths or ~/paths".into(),
            });
        }
        let limits = run.limits()?;
        let env_passthrough = layer(None, run.env_passthrough.clone(), Vec::new());
        let protected_paths = layer(
            None,
            run.protected_paths.clone(),
            crate::protect::DEFAULT_PROTECTED.iter().map(|s| s.to_string()).collect(),
        );
        let build_outputs = layer(
            None,
            run.build_outputs.clone(),
            crate::protect::DEFAULT_BUILD_OUTPUTS.iter().map(|s| s.to_string()).collect(),
        );
        let test_reports = layer(None, run.test_reports.clone(), Vec::new());
        // The built-in lists are globs by construction (a test parses each): only what a
        // configuration wrote is checked (settings are built at every claim of a control
        // plane, and parsing the defaults was a tenth of its work).
        for (key, globs) in
            [("protected_paths", &protected_paths), ("build_outputs", &build_outputs), ("test_reports", &test_reports)]
        {
            if globs.origin == Origin::Default {
                continue;
            }
            let Some((bad, why)) = first_invalid_glob(&globs.value) else {
                continue;
            };
            return Err(SettingsError::Invalid {
                key,
                problem: format!("'{bad}' is not a glob ({why})"),
                fix: GLOB_FIX.into(),
            });
        }
        let allow_test_changes = layer(flags.allow_test_changes.then_some(true), run.allow_test_changes, false);
        let judge = layer(flags.no_judge.then_some(false), run.judge, true);
        let strategy_text = layer(flags.strategy, run.strategy.clone(), Strategy::Tournament.as_str().to_string());
        let strategy = Sourced {
            value: Strategy::parse(&strategy_text.value).ok_or_else(|| SettingsError::Invalid {
                key: "strategy",
                problem: format!("'{}' (from {}) is not a strategy", strategy_text.value, strategy_text.origin),
                fix: format!("use one of {}", Strategy::NAMES.join(", ")),
            })?,
            origin: strategy_text.origin,
        };
        let min_capability = layer(flags.min_capability, run.min_capability, 0);
        let budget_usd = layer(flags.budget_usd.map(Some), run.budget_usd.map(Some), None);
        if budget_usd.value == Some(Usd::ZERO) {
            return Err(SettingsError::Invalid {
                key: "budget_usd",
                problem: format!("0 (from {})", budget_usd.origin),
                fix: "give a positive amount, e.g. --budget-usd 2.50, or leave it out for no limit".into(),
            });
        }
        let cross_tests = layer(flags.no_cross_tests.then_some(false), config.cross_tests.enabled, true);
        let cross_test_rules =
            layer(None, config.cross_tests.rules.clone(), crate::crosstest::default_rules(&verify.value));
        if let Some(bad) =
            cross_test_rules.value.iter().find(|r| r.pattern.trim().is_empty() || r.command.trim().is_empty())
        {
            return Err(SettingsError::Invalid {
                key: "cross_tests.rules",
                problem: format!("a rule has an empty pattern or command ({:?} → {:?})", bad.pattern, bad.command),
                fix: "give every [[cross_tests.rules]] a pattern and a command".into(),
            });
        }
        // The built-in rules' patterns are globs by construction (a test parses each).
        if cross_test_rules.origin != Origin::Default
            && let Some((bad, why)) = first_invalid_glob(cross_test_rules.value.iter().map(|r| &r.pattern))
        {
            return Err(SettingsError::Invalid {
                key: "cross_tests.rules",
                problem: format!("pattern '{bad}' is not a glob ({why})"),
                fix: GLOB_FIX.into(),
            });
        }
        let rules = layer(flags.rules.then_some(true), run.rules, false);
        let rule_options = crate::rules::RuleOptions::from_section(&config.rules);
        if let Some(bad) = rule_options.outside_dir() {
            return Err(SettingsError::Invalid {
                key: "rules.dirs",
                problem: format!("'{bad}' is not a directory inside the repository"),
                fix: "name rule directories relative to the repository root, without '..'".into(),
            });
        }
        let repair_rounds = layer(flags.repair_rounds, run.repair_rounds, 0);
        if repair_rounds.value > defaults::MAX_REPAIR_ROUNDS {
            return Err(SettingsError::Invalid {
                key: "repair_rounds",
                problem: format!("{} (from {})", repair_rounds.value, repair_rounds.origin),
                fix: format!("use at most {} rounds (each runs the agent again)", defaults::MAX_REPAIR_ROUNDS),
            });
        }
        Ok(RunSettings {
            candidates,
            parallel,
            timeout_seconds,
            verify,
            verify_detected_from: None,
            unverified,
            verify_timeout_seconds,
            include,
            setup,
            setup_timeout_seconds,
            runner,
            command,
            backend,
            max_steps,
            max_tokens,
            apply,
            keep_worktrees,
            sandbox,
            sandbox_paths,
            limits,
            env_passthrough,
            protected_paths,
            build_outputs,
            test_reports,
            allow_test_changes,
            judge,
            strategy,
            min_capability,
            budget_usd,
            cross_tests,
            cross_test_rules,
            rules,
            rule_options,
            repair_rounds,
            outside_programs: Vec::new(),
            runners: Vec::new(),
            slots: Vec::new(),
        })
    }

    /// The runner of the candidate at `index`.
    pub fn runner_for(&self, index: usize) -> &RunnerSpec {
        &self.runners[self.slots[index % self.slots.len()].runner]
    }

    /// What the candidate at `index` runs: runner, backends, price and capability.
    pub fn slot(&self, index: usize) -> &CandidateOption {
        &self.slots[index % self.slots.len()]
    }

    /// How the candidate at `index` is labelled everywhere: its runner, and the backend it
    /// uses first (`builtin/local-qwen`, `claude-code/local-claude`), or for an agent CLI on
    /// its own provider the model it asks for (`claude-code/sonnet`).
    pub fn label_for(&self, index: usize) -> String {
        let spec = self.runner_for(index);
        match self.slot(index).backends.first() {
            Some(backend) => format!("{}/{backend}", spec.name),
            None => match &spec.kind {
                RunnerKind::Agent(AgentCliSpec { model: Some(model), .. }) => format!("{}/{model}", spec.name),
                _ => spec.name.clone(),
            },
        }
    }

    /// The backend chain the candidate at `index` uses: the built-in runner's chain, or
    /// the one backend an agent CLI is pointed at (empty: none).
    pub fn backend_chain_for(&self, index: usize) -> Vec<String> {
        self.slot(index).backends.clone()
    }

    /// What a worker must have to run the candidate at `index`: its runner
    /// (`runner:command`, `runner:builtin`, `runner:claude-code`, ...) and each backend it
    /// uses (`backend:NAME`). A worker advertises the same words.
    pub fn needs_of(&self, index: usize) -> Vec<String> {
        let runner = match &self.runner_for(index).kind {
            RunnerKind::Command { .. } => "command".to_string(),
            RunnerKind::Builtin { .. } => "builtin".to_string(),
            RunnerKind::Agent(agent) => agent.cli.clone(),
        };
        std::iter::once(format!("runner:{runner}"))
            .chain(self.backend_chain_for(index).into_iter().map(|b| format!("backend:{b}")))
            .collect()
    }

    /// `dirty` without the working tree's programs that run from outside copies.
    pub fn uncommitted_work(&self, dirty: Vec<String>) -> Vec<String> {
        dirty.into_iter().filter(|d| !self.outside_programs.iter().any(|p| &p.path == d)).collect()
    }

    /// Whether the verify commands are still to be found in the repository: none was given
    /// (by a flag or the configuration) and `--no-verify` was not.
    pub fn wants_detection(&self) -> bool {
        self.verify.value.is_empty() && self.verify.origin == Origin::Default && !self.unverified.value
    }

    /// Uses the repository's own test command, found in `from`, as the verify command;
    /// cross-test rules that were the defaults follow it.
    pub fn use_detected_verify(&mut self, command: String, from: String) {
        self.verify = Sourced { value: vec![command], origin: Origin::Detected };
        self.verify_detected_from = Some(from);
        if self.cross_test_rules.origin == Origin::Default {
            self.cross_test_rules.value = crate::crosstest::default_rules(&self.verify.value);
        }
    }

    /// Whether a winner may be applied: a verify command checked it, or the user accepted an
    /// unverified one (`--no-verify`).
    pub fn may_apply_unchecked(&self) -> bool {
        !self.verify.value.is_empty() || self.unverified.value
    }

    /// How the candidates are checked, in words (the first line of a report).
    pub fn verification(&self) -> String {
        let commands = self.verify.value.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
        let mut said = self.verified_by(&commands);
        if self.rules.value {
            said.push_str("; the rules gate checks the files each candidate changes");
        }
        if self.repair_rounds.value > 0 {
            said.push_str(&format!("; gate failures go back to each agent up to {} time(s)", self.repair_rounds.value));
        }
        said
    }

    fn verified_by(&self, commands: &str) -> String {
        match (&self.verify_detected_from, self.verify.value.is_empty(), self.unverified.value) {
            (_, true, true) => "Unverified: no verify command ran (--no-verify); the winner was chosen on its patch, votes and any judge alone".into(),
            (_, true, false) => "Not verified: no verify command was given and none was found in the repository".into(),
            (Some(from), false, _) => format!("Verified by {commands} (detected from {from})"),
            (None, false, _) => format!("Verified by {commands}"),
        }
    }

    /// Whether the tournament can spread over several workers: several candidates, all at
    /// once (an escalating strategy runs them one after another, each deciding the next).
    pub fn spreads(&self) -> bool {
        self.candidates.value > 1 && !self.strategy.value.escalates()
    }

    /// `(key, value, origin)` rows for `arbiter config show`.
    pub fn rows(&self) -> Vec<(&'static str, String, Origin)> {
        fn list(v: &[String]) -> String {
            if v.is_empty() { "[]".into() } else { format!("{v:?}") }
        }
        fn opt(v: &Option<String>) -> String {
            v.clone().unwrap_or_else(|| "(none)".into())
        }
        vec![
            ("candidates", self.candidates.value.to_string(), self.candidates.origin),
            ("parallel", self.parallel.value.to_string(), self.parallel.origin),
            ("timeout_seconds", self.timeout_seconds.value.to_string(), self.timeout_seconds.origin),
            ("verify", list(&self.verify.value), self.verify.origin),
            (
                "verify_timeout_seconds",
                self.verify_timeout_seconds.value.to_string(),
                self.verify_timeout_seconds.origin,
            ),
            ("include", list(&self.include.value), self.include.origin),
            ("setup", opt(&self.setup.value), self.setup.origin),
            ("setup_timeout_seconds", self.setup_timeout_seconds.value.to_string(), self.setup_timeout_seconds.origin),
            ("runner", self.runner.value.clone(), self.runner.origin),
            ("command", opt(&self.command.value), self.command.origin),
            ("backend", opt(&self.backend.value), self.backend.origin),
            ("max_steps", self.max_steps.value.to_string(), self.max_steps.origin),
            ("max_tokens", self.max_tokens.value.to_string(), self.max_tokens.origin),
            ("apply", self.apply.value.to_string(), self.apply.origin),
            ("keep_worktrees", self.keep_worktrees.value.to_string(), self.keep_worktrees.origin),
            ("sandbox", self.sandbox.value.to_string(), self.sandbox.origin),
            (
                "sandbox_paths",
                format!(
                    "writable {}, hidden {}",
                    list(&self.sandbox_paths.value.writable),
                    list(&self.sandbox_paths.value.hidden)
                ),
                self.sandbox_paths.origin,
            ),
            (
                "limits",
                format!(
                    "patch ≤ {} bytes, ≤ {} files, each ≤ {} bytes",
                    self.limits.value.max_patch_bytes,
                    self.limits.value.max_patch_files,
                    self.limits.value.max_file_bytes
                ),
                self.limits.origin,
            ),
            ("env_passthrough", list(&self.env_passthrough.value), self.env_passthrough.origin),
            ("protected_paths", format!("{} globs", self.protected_paths.value.len()), self.protected_paths.origin),
            ("build_outputs", format!("{} globs", self.build_outputs.value.len()), self.build_outputs.origin),
            ("test_reports", list(&self.test_reports.value), self.test_reports.origin),
            ("allow_test_changes", self.allow_test_changes.value.to_string(), self.allow_test_changes.origin),
            ("judge", self.judge.value.to_string(), self.judge.origin),
            ("strategy", self.strategy.value.to_string(), self.strategy.origin),
            ("min_capability", self.min_capability.value.to_string(), self.min_capability.origin),
            (
                "budget_usd",
                self.budget_usd.value.map_or_else(|| "(none)".into(), |b| b.decimal()),
                self.budget_usd.origin,
            ),
            ("cross_tests", self.cross_tests.value.to_string(), self.cross_tests.origin),
            ("cross_test_rules", format!("{} rules", self.cross_test_rules.value.len()), self.cross_test_rules.origin),
            ("rules", self.rules.value.to_string(), self.rules.origin),
            ("repair_rounds", self.repair_rounds.value.to_string(), self.repair_rounds.origin),
        ]
    }
}

impl ConfigFile {
    /// What is wrong with each `[runners.NAME]` table, whether or not a run uses it (a
    /// backend left to `--backend` is not wrong).
    pub fn runner_table_errors(&self) -> Vec<SettingsError> {
        self.runners
            .iter()
            .filter_map(|(name, section)| runner_from_section(self, name, section, None).err())
            .filter(|e| *e != SettingsError::NoBackend)
            .collect()
    }
}

/// An option priced and rated by the first backend of its chain.
fn option_for(config: &ConfigFile, runner: usize, backends: Vec<String>) -> CandidateOption {
    let first = backends.first().and_then(|b| config.backends.get(b));
    CandidateOption {
        runner,
        input_price: first.and_then(|b| b.input_cost),
        output_price: first.and_then(|b| b.output_cost),
        capability: first.map(|b| b.capability),
        backends,
    }
}

fn resolve_runners(
    config: &ConfigFile,
    names: &str,
    command: Option<&str>,
    command_origin: Origin,
    backend: Option<&str>,
) -> Result<Vec<RunnerSpec>, SettingsError> {
    let names: Vec<&str> = names.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return Err(SettingsError::Invalid {
            key: "runner",
            problem: "no runner named".into(),
            fix: "pass --runner NAME (e.g. --runner command)".into(),
        });
    }
    names
        .into_iter()
        .map(|name| {
            if let Some(section) = config.runners.get(name) {
                let mut spec = runner_from_section(config, name, section, backend)?;
                // `--command` is the `command` runner's command: it wins over the one a
                // [runners.command] table gives, as every flag wins over the configuration.
                if let (RunnerKind::Command { command: configured }, Origin::Flag, Some(flag)) =
                    (&mut spec.kind, command_origin, command.filter(|c| !c.trim().is_empty()))
                    && name == "command"
                {
                    *configured = flag.to_string();
                }
                return Ok(spec);
            }
            match name {
                "command" => {
                    let command =
                        command.filter(|c| !c.trim().is_empty()).ok_or_else(|| SettingsError::MissingCommand {
                            runner: "command".into(),
                            where_: match command_origin {
                                Origin::Flag => "--command (it is empty)".into(),
                                _ => "the [run] table of .arbiter/config.toml".into(),
                            },
                        })?;
                    Ok(RunnerSpec {
                        name: "command".into(),
                        kind: RunnerKind::Command { command: command.to_string() },
                        env_passthrough: Vec::new(),
                    })
                }
                "builtin" => Ok(RunnerSpec {
                    name: "builtin".into(),
                    kind: builtin_kind(config, backend)?,
                    env_passthrough: Vec::new(),
                }),
                cli if AGENT_CLIS.contains(&cli) => {
                    let section = RunnerSection { kind: cli.to_string(), ..Default::default() };
                    agent_runner(config, cli, &section, backend)
                }
                other => Err(SettingsError::UnknownRunner { name: other.to_string(), known: known_runners(config) }),
            }
        })
        .collect()
}

/// The backends a comma-separated list names, each configured and enabled.
fn named_backends(config: &ConfigFile, list: Option<&str>, key: &'static str) -> Result<Vec<String>, SettingsError> {
    let named: Vec<String> =
        list.unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect();
    for name in &named {
        match config.backends.get(name) {
            None => {
                return Err(SettingsError::Invalid {
                    key,
                    problem: format!("no backend named '{name}'"),
                    fix: format!(
                        "add it with `arbiter backend add {name} --provider ... --model ...` or see `arbiter backend list`"
                    ),
                });
            }
            Some(b) if !b.enabled => {
                return Err(SettingsError::Invalid {
                    key,
                    problem: format!("backend '{name}' is disabled"),
                    fix: format!("enable it with `arbiter backend enable {name}`"),
                });
            }
            Some(_) => {}
        }
    }
    Ok(named)
}

/// The backend chains a runner can produce a candidate with (never none): each backend on
/// its own for a built-in agent with one backend per candidate or an agent CLI on
/// backends, else its one chain (empty for a CLI on its own provider, which is unpriced,
/// and for a command).
fn backend_choices(kind: &RunnerKind) -> Vec<Vec<String>> {
    match kind {
        RunnerKind::Builtin { backends, round_robin: true } if !backends.is_empty() => {
            backends.iter().map(|b| vec![b.clone()]).collect()
        }
        RunnerKind::Builtin { backends, .. } => vec![backends.clone()],
        RunnerKind::Agent(agent) if !agent.backends.is_empty() => {
            agent.backends.iter().map(|b| vec![b.clone()]).collect()
        }
        RunnerKind::Agent(_) | RunnerKind::Command { .. } => vec![Vec::new()],
    }
}

fn builtin_kind(config: &ConfigFile, backend: Option<&str>) -> Result<RunnerKind, SettingsError> {
    let named = named_backends(config, backend, "backend")?;
    if named.is_empty() {
        let chain = crate::backends::chain_for("coding", &config.roles, &config.backends).map_err(|e| {
            SettingsError::Invalid {
                key: "roles",
                problem: e.to_string(),
                fix: "fix [roles] in .arbiter/config.toml".into(),
            }
        })?;
        if chain.is_empty() {
            return Err(SettingsError::NoBackend);
        }
        return Ok(RunnerKind::Builtin { backends: chain, round_robin: false });
    }
    let round_robin = named.len() > 1;
    Ok(RunnerKind::Builtin { backends: named, round_robin })
}

/// An agent CLI runner named `name`, from its table (or the defaults of a bare
/// `--runner CLI`). Its backend is the table's, else the run's `--backend` list.
fn agent_runner(
    config: &ConfigFile,
    name: &str,
    section: &RunnerSection,
    run_backend: Option<&str>,
) -> Result<RunnerSpec, SettingsError> {
    let invalid = |problem: String, fix: &str| SettingsError::Invalid { key: "runners", problem, fix: fix.to_string() };
    let table = format!("[runners.{name}]");
    if section.command.is_some() {
        return Err(invalid(
            format!("{table} is a {} runner but sets `command`", section.kind),
            "agent CLIs take `binary`, `model` and `extra_args`; use kind = \"command\" to run a command line",
        ));
    }
    if section.binary.as_deref().is_some_and(|b| b.trim().is_empty()) {
        return Err(invalid(format!("{table} has an empty `binary`"), "name the program or leave `binary` out"));
    }
    if section.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(invalid(format!("{table} has an empty `model`"), "name a model or leave `model` out"));
    }
    if section.max_turns == Some(0) {
        return Err(invalid(format!("{table} has max_turns = 0"), "use at least 1, or leave it out for no limit"));
    }
    if let Some(bad) = section.inherit.iter().find(|i| !INHERITABLE.contains(&i.as_str())) {
        return Err(invalid(
            format!("{table} has inherit = [.., {bad:?}, ..]"),
            &format!("inherit takes {}", INHERITABLE.join(", ")),
        ));
    }
    if section.isolate == Some(true) && !section.inherit.is_empty() {
        return Err(invalid(
            format!("{table} sets both isolate = true and inherit"),
            "an isolated CLI inherits nothing: keep one of them",
        ));
    }
    let backends = match &section.backend {
        Some(b) => {
            let named = named_backends(config, Some(b), "runners.backend")?;
            if named.len() != 1 {
                return Err(invalid(
                    format!("{table} has backend = {b:?}"),
                    "name exactly one configured backend (a CLI talks to one endpoint)",
                ));
            }
            named
        }
        None => named_backends(config, run_backend, "backend")?,
    };
    Ok(RunnerSpec {
        name: name.to_string(),
        kind: RunnerKind::Agent(AgentCliSpec {
            cli: section.kind.clone(),
            binary: section.binary.clone(),
            model: section.model.clone(),
            extra_args: section.extra_args.clone(),
            permission_mode: section.permission_mode.clone(),
            max_turns: section.max_turns,
            backends,
            isolate: section.isolate.unwrap_or(false),
            inherit: section.inherit.clone(),
        }),
        env_passthrough: section.env_passthrough.clone(),
    })
}

fn runner_from_section(
    config: &ConfigFile,
    name: &str,
    section: &RunnerSection,
    run_backend: Option<&str>,
) -> Result<RunnerSpec, SettingsError> {
    match section.kind.as_str() {
        cli if AGENT_CLIS.contains(&cli) => agent_runner(config, name, section, run_backend),
        "command" => {
            let agent_only = [
                ("binary", section.binary.is_some()),
                ("model", section.model.is_some()),
                ("extra_args", !section.extra_args.is_empty()),
                ("permission_mode", section.permission_mode.is_some()),
                ("max_turns", section.max_turns.is_some()),
                ("backend", section.backend.is_some()),
                ("isolate", section.isolate.is_some()),
                ("inherit", !section.inherit.is_empty()),
            ];
            if let Some((key, _)) = agent_only.iter().find(|(_, set)| *set) {
                return Err(SettingsError::Invalid {
                    key: "runners",
                    problem: format!("[runners.{name}] is a command runner but sets `{key}`"),
                    fix: format!(
                        "`{key}` applies to agent CLIs (kind = one of {}); a command runner takes `command`",
                        AGENT_CLIS.join(", ")
                    ),
                });
            }
            let command = section.command.clone().filter(|c| !c.trim().is_empty()).ok_or_else(|| {
                SettingsError::MissingCommand {
                    runner: name.to_string(),
                    where_: format!("[runners.{name}] of .arbiter/config.toml"),
                }
            })?;
            Ok(RunnerSpec {
                name: name.to_string(),
                kind: RunnerKind::Command { command },
                env_passthrough: section.env_passthrough.clone(),
            })
        }
        other => Err(SettingsError::Invalid {
            key: "runners.kind",
            problem: format!("[runners.{name}] has kind '{other}'"),
            fix: format!(
                "use kind = \"command\" or one of the agent CLIs ({}); for the built-in agent use --runner builtin --backend NAME",
                AGENT_CLIS.join(", ")
            ),
        }),
    }
}

fn known_runners(config: &ConfigFile) -> String {
    let mut names: Vec<String> = RUNNER_KINDS.iter().map(|s| s.to_string()).collect();
    names.extend(config.runners.keys().cloned());
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags_with_command() -> FlagOverrides {
        FlagOverrides { command: Some("./agent.sh".into()), ..Default::default() }
    }

    #[test]
    fn the_command_flag_wins_over_a_runners_command_table() {
        let config =
            ConfigFile::parse("[runners.command]\nkind = \"command\"\ncommand = \"./from-config.sh\"\n", "c").unwrap();
        let flags = FlagOverrides {
            runner: Some("command".into()),
            command: Some("./from-flag.sh".into()),
            ..Default::default()
        };
        let s = RunSettings::resolve(&config, flags).unwrap();
        assert_eq!(s.runners[0].kind, RunnerKind::Command { command: "./from-flag.sh".into() });
        let s = RunSettings::resolve(&config, FlagOverrides { runner: Some("command".into()), ..Default::default() })
            .unwrap();
        assert_eq!(s.runners[0].kind, RunnerKind::Command { command: "./from-config.sh".into() });
    }

    #[test]
    fn default_config_text_parses_to_defaults() {
        let cfg = ConfigFile::parse(DEFAULT_CONFIG_TOML, "config.toml").unwrap();
        assert_eq!(cfg, ConfigFile::default());
    }

    #[test]
    fn flags_override_config_override_defaults() {
        let cfg =
            ConfigFile::parse("[run]\ncandidates = 5\ntimeout_seconds = 60\nverify = [\"make test\"]\n", "c").unwrap();
        let s = RunSettings::resolve(&cfg, FlagOverrides { candidates: Some(2), ..flags_with_command() }).unwrap();
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
        let s = RunSettings::resolve(&cfg, flags_with_command()).unwrap();
        assert_eq!(s.sandbox, Sourced { value: SandboxMode::Require, origin: Origin::Config });
        assert_eq!(s.limits.value.max_patch_files, 7);
        assert_eq!(s.limits.value.max_patch_bytes, CandidateLimits::default().max_patch_bytes);
        assert_eq!(s.limits.origin, Origin::Config);
        assert_eq!(s.sandbox_paths.value.writable, vec!["~/.cache/b".to_string()]);
        let flag = RunSettings::resolve(&cfg, FlagOverrides { sandbox: Some("off".into()), ..flags_with_command() });
        assert_eq!(flag.unwrap().sandbox, Sourced { value: SandboxMode::Off, origin: Origin::Flag });
        let defaults = RunSettings::resolve(&ConfigFile::default(), flags_with_command()).unwrap();
        assert_eq!(defaults.sandbox, Sourced { value: SandboxMode::Auto, origin: Origin::Default });

        let bad = RunSettings::resolve(
            &ConfigFile::default(),
            FlagOverrides { sandbox: Some("on".into()), ..flags_with_command() },
        );
        let err = bad.unwrap_err().to_string();
        assert!(err.contains("'on' (from flag) is not a sandbox mode") && err.contains("auto, require, off"), "{err}");
        let relative = ConfigFile::parse("[sandbox]\nwritable = [\"cache\"]\n", "c").unwrap();
        let err = RunSettings::resolve(&relative, flags_with_command()).unwrap_err().to_string();
        assert!(err.contains("'cache' is not an absolute path") && err.contains("~/paths"), "{err}");
        let zero = ConfigFile::parse("[run]\nmax_file_bytes = 0\n", "c").unwrap();
        assert!(RunSettings::resolve(&zero, flags_with_command()).unwrap_err().to_string().contains("positive number"));
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
            RunSettings::resolve(&ConfigFile::default(), FlagOverrides { candidates: Some(0), ..flags_with_command() })
                .unwrap_err();
        assert!(err.to_string().contains("at least 1 candidate"), "{err}");
    }

    #[test]
    fn unknown_runner_names_the_known_ones() {
        let err = RunSettings::resolve(
            &ConfigFile::default(),
            FlagOverrides { runner: Some("nope".into()), ..flags_with_command() },
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
            FlagOverrides { runner: Some("a,b".into()), candidates: Some(3), ..Default::default() },
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
            FlagOverrides { runner: Some("a".into()), candidates: Some(1), ..Default::default() },
        );
        assert!(!one.unwrap().spreads(), "one candidate is one unit");
    }

    #[test]
    fn command_runner_without_command_says_how() {
        let err = RunSettings::resolve(&ConfigFile::default(), FlagOverrides::default()).unwrap_err();
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

    fn runners(runner: &str, backend: Option<&str>, candidates: u32) -> FlagOverrides {
        FlagOverrides {
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
            let s = RunSettings::resolve(&ConfigFile::default(), runners(cli, None, 1)).unwrap();
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
        let s = RunSettings::resolve(&cfg, runners("claude-code,local", None, 2)).unwrap();
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
        let s = RunSettings::resolve(&cfg, runners("claude-code,codex,builtin", None, 6)).unwrap();
        let labels: Vec<String> = (0..6).map(|i| s.label_for(i)).collect();
        assert_eq!(labels, ["claude-code", "codex", "builtin/cheap", "claude-code", "codex", "builtin/cheap"]);

        // --backend applies round-robin to every model-driven runner without a backend of its own.
        let s = RunSettings::resolve(&cfg, runners("claude-code,builtin", Some("dear,cheap"), 4)).unwrap();
        let labels: Vec<String> = (0..4).map(|i| s.label_for(i)).collect();
        assert_eq!(labels, ["claude-code/dear", "builtin/dear", "claude-code/cheap", "builtin/cheap"]);
    }

    #[test]
    fn escalation_orders_agent_clis_by_their_backend_price() {
        let cfg = backends_config("[runners.cc]\nkind = \"claude-code\"\nbackend = \"dear\"\n");
        let flags =
            FlagOverrides { strategy: Some("escalate".into()), ..runners("cc,builtin,codex", Some("cheap"), 1) };
        let flags = FlagOverrides { candidates: None, ..flags };
        let s = RunSettings::resolve(&cfg, flags).unwrap();
        let labels: Vec<String> = (0..s.candidates.value as usize).map(|i| s.label_for(i)).collect();
        assert_eq!(labels, ["builtin/cheap", "codex/cheap", "cc/dear"], "cheapest first; the table's backend stays");
    }

    #[test]
    fn bad_agent_runner_tables_name_the_fix() {
        let err = |extra: &str, runner: &str| {
            RunSettings::resolve(&backends_config(extra), runners(runner, None, 1)).unwrap_err().to_string()
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
        let e = RunSettings::resolve(&backends_config(""), runners("aider", Some("ghost"), 1)).unwrap_err();
        assert!(e.to_string().contains("no backend named 'ghost'"), "{e}");
        let e = RunSettings::resolve(&ConfigFile::default(), runners("claude", None, 1)).unwrap_err();
        assert!(e.to_string().contains("unknown runner 'claude'") && e.to_string().contains("claude-code"), "{e}");
    }

    #[test]
    fn apply_modes_parse() {
        assert_eq!(ApplyMode::parse("branch:fix").unwrap(), ApplyMode::Branch("fix".into()));
        assert!(ApplyMode::parse("branch:").is_err());
        assert!(ApplyMode::parse("elsewhere").is_err());
    }
}
