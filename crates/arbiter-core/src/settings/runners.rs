//! The runners a run names, resolved: `[runners.NAME]` tables, agent CLIs by name, the
//! built-in agent over its backends, and what each candidate of a run runs (its slot).

use super::*;
use crate::strategy::{CandidateOption, Strategy, capable, cheapest_first, strongest_first};

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

/// Runner kinds this build knows, in the order `arbiter` lists them.
pub const RUNNER_KINDS: &[&str] =
    &["command", "builtin", "claude-code", "codex", "gemini", "aider", "opencode", "villani-code"];

/// The agent CLIs among the runner kinds (each also usable as a runner name without a
/// `[runners]` table).
pub const AGENT_CLIS: &[&str] = &["claude-code", "codex", "gemini", "aider", "opencode", "villani-code"];

impl RunSettings {
    /// Every distinct way to produce a candidate: each runner, and for the built-in agent
    /// with one backend per candidate, each of its backends; priced from the backends.
    pub(super) fn options(&self, config: &ConfigFile) -> Vec<CandidateOption> {
        let mut options = Vec::new();
        for (i, spec) in self.runners.iter().enumerate() {
            options.extend(backend_choices(&spec.kind).into_iter().map(|backends| option_for(config, i, backends)));
        }
        options
    }

    /// Decides what each candidate runs: round-robin over runners and backends for a
    /// tournament; the options in cost or strength order for the other strategies, whose
    /// presets also choose the number of candidates when none was configured.
    pub(super) fn assign_slots(&mut self, config: &ConfigFile) -> Result<(), SettingsError> {
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
