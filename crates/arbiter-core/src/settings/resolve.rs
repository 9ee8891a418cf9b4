//! Run settings resolved: the layers of [`RunOptions`] (the command line's, a plan task's,
//! the plan's defaults', the configuration file's `[run]` table) over the built-in
//! defaults, each value with the layer it came from, validated once.

use super::*;

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

impl RunSettings {
    /// Layers `above` (highest first, each a layer of flags) over `config` over the
    /// built-in defaults, validates the result and
    /// resolves the runners it names.
    pub fn resolve(config: &ConfigFile, above: &[&RunOptions]) -> Result<Self, SettingsError> {
        let mut settings = Self::resolve_values(config, above)?;
        settings.runners = settings.resolve_runners(config)?;
        settings.assign_slots(config)?;
        Ok(settings)
    }

    /// Like [`RunSettings::resolve`] but leaves `runners` empty (for showing settings).
    pub fn resolve_values(config: &ConfigFile, above: &[&RunOptions]) -> Result<Self, SettingsError> {
        let file = RunOptions { cross_tests: config.cross_tests.enabled, ..config.run.clone() };
        let layers = Layers::new(above, &file);
        let candidates = layers.pick(|o| o.candidates, defaults::CANDIDATES);
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
        let parallel = layers.pick(|o| o.parallel, candidates.value);
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
            positive("timeout_seconds", layers.pick(|o| o.timeout_seconds, defaults::TIMEOUT_SECONDS))?;
        let verify_timeout_seconds = positive(
            "verify_timeout_seconds",
            layers.pick(|o| o.verify_timeout_seconds, defaults::VERIFY_TIMEOUT_SECONDS),
        )?;
        let setup_timeout_seconds = positive(
            "setup_timeout_seconds",
            layers.pick(|o| o.setup_timeout_seconds, defaults::SETUP_TIMEOUT_SECONDS),
        )?;
        if layers.unverified_and_verified() {
            return Err(SettingsError::Invalid {
                key: "verify",
                problem: "--no-verify and --verify were both given".into(),
                fix: "keep --verify to check the candidates, or --no-verify to accept an unverified winner".into(),
            });
        }
        let unverified = layers.pick(|o| o.unverified, false);
        let verify = if unverified.value {
            Sourced { value: Vec::new(), origin: unverified.origin }
        } else {
            layers.pick(|o| o.verify.clone(), Vec::new())
        };
        if let Some(blank) = verify.value.iter().position(|v| v.trim().is_empty()) {
            return Err(SettingsError::Invalid {
                key: "verify",
                problem: format!("command #{} is empty", blank + 1),
                fix: "give each --verify a command to run".into(),
            });
        }
        let include = layers.pick(|o| o.include.clone(), Vec::new());
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
        let setup = layers.pick(|o| o.setup.clone().map(Some), None);
        let runner = layers.pick(|o| o.runner.clone(), defaults::RUNNER.to_string());
        let command = layers.pick(|o| o.command.clone().map(Some), None);
        let backend = layers.pick(|o| o.backend.clone().map(Some), None);
        let max_steps = layers.pick(|o| o.max_steps, defaults::MAX_STEPS);
        let max_tokens = layers.pick(|o| o.max_tokens, defaults::MAX_TOKENS);
        if max_steps.value == 0 || max_tokens.value == 0 {
            return Err(SettingsError::Invalid {
                key: "max_steps/max_tokens",
                problem: "0".into(),
                fix: "the built-in agent needs at least 1 step and 1 token".into(),
            });
        }
        let apply_text = layers.pick(|o| o.apply.clone(), "worktree".to_string());
        let apply = Sourced { value: ApplyMode::parse(&apply_text.value)?, origin: apply_text.origin };
        let keep_worktrees = layers.pick(|o| o.keep_worktrees, false);
        let sandbox_text = layers.pick(|o| o.sandbox.clone(), SandboxMode::Auto.as_str().to_string());
        let sandbox = Sourced {
            value: SandboxMode::parse(&sandbox_text.value).ok_or_else(|| SettingsError::Invalid {
                key: "sandbox",
                problem: format!("'{}' (from {}) is not a sandbox mode", sandbox_text.value, sandbox_text.origin),
                fix: format!("use one of {}", SandboxMode::NAMES.join(", ")),
            })?,
            origin: sandbox_text.origin,
        };
        let sandbox_paths = Sourced::from_file(
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
        let limits = config.run.limits()?;
        let env_passthrough = layers.pick(|o| o.env_passthrough.clone(), Vec::new());
        let protected_paths = layers.pick(
            |o| o.protected_paths.clone(),
            crate::protect::DEFAULT_PROTECTED.iter().map(|s| s.to_string()).collect(),
        );
        let build_outputs = layers.pick(
            |o| o.build_outputs.clone(),
            crate::protect::DEFAULT_BUILD_OUTPUTS.iter().map(|s| s.to_string()).collect(),
        );
        let test_reports = layers.pick(|o| o.test_reports.clone(), Vec::new());
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
        let allow_test_changes = layers.pick(|o| o.allow_test_changes, false);
        let judge = layers.pick(|o| o.judge, true);
        let strategy_text = layers.pick(|o| o.strategy.clone(), Strategy::Tournament.as_str().to_string());
        let strategy = Sourced {
            value: Strategy::parse(&strategy_text.value).ok_or_else(|| SettingsError::Invalid {
                key: "strategy",
                problem: format!("'{}' (from {}) is not a strategy", strategy_text.value, strategy_text.origin),
                fix: format!("use one of {}", Strategy::NAMES.join(", ")),
            })?,
            origin: strategy_text.origin,
        };
        let min_capability = layers.pick(|o| o.min_capability, 0);
        let budget_usd = layers.pick(|o| o.budget_usd.map(Some), None);
        if budget_usd.value == Some(Usd::ZERO) {
            return Err(SettingsError::Invalid {
                key: "budget_usd",
                problem: format!("0 (from {})", budget_usd.origin),
                fix: "give a positive amount, e.g. --budget-usd 2.50, or leave it out for no limit".into(),
            });
        }
        let cross_tests = layers.pick(|o| o.cross_tests, true);
        let cross_test_rules =
            Sourced::from_file(config.cross_tests.rules.clone(), crate::crosstest::default_rules(&verify.value));
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
        let rules = layers.pick(|o| o.rules, false);
        let rule_options = crate::rules::RuleOptions::from_section(&config.rules);
        if let Some(bad) = rule_options.outside_dir() {
            return Err(SettingsError::Invalid {
                key: "rules.dirs",
                problem: format!("'{bad}' is not a directory inside the repository"),
                fix: "name rule directories relative to the repository root, without '..'".into(),
            });
        }
        let repair_rounds = layers.pick(|o| o.repair_rounds, 0);
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
}
