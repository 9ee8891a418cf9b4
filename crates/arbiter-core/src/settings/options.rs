//! [`RunOptions`]: one layer of run settings, every value optional, and [`Layers`]: the
//! layers a run's settings are resolved from, highest first.

use super::*;

/// One layer of run settings, every value optional (`None`: this layer says nothing). The
/// configuration file's `[run]` table is one; so are a plan's defaults, a plan task's own
/// values, what `plan run` says for every task, and the command line's flags. Layered by
/// [`RunSettings::resolve`] over the built-in defaults ([`defaults`]), field by field: the
/// first layer that gives a value decides it, and says where it came from.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunOptions {
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
    /// `--no-verify`: no verify command, none detected, and a winner applied unverified
    /// (not a key of the file: a repository's configuration cannot waive its checks).
    #[serde(skip)]
    pub unverified: Option<bool>,
    /// Cross-tests on or off (`--no-cross-tests`); the file says it in `[cross_tests]`.
    #[serde(skip)]
    pub cross_tests: Option<bool>,
}

impl RunOptions {
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

/// The layers of a resolution, highest first, each with its origin; the configuration
/// file's `[run]` table (with its `[cross_tests]` switch) is the last.
pub(super) struct Layers<'a> {
    layers: Vec<(Origin, &'a RunOptions)>,
}

impl<'a> Layers<'a> {
    pub(super) fn new(above: &[&'a RunOptions], config: &'a RunOptions) -> Self {
        let mut layers: Vec<(Origin, &'a RunOptions)> = above.iter().map(|o| (Origin::Flag, *o)).collect();
        layers.push((Origin::Config, config));
        Layers { layers }
    }

    /// The value of the first layer that gives one (`pick` reads it), else `default`.
    pub(super) fn pick<T>(&self, pick: impl Fn(&RunOptions) -> Option<T>, default: T) -> Sourced<T> {
        self.layers
            .iter()
            .find_map(|(origin, layer)| pick(layer).map(|value| Sourced { value, origin: *origin }))
            .unwrap_or(Sourced { value: default, origin: Origin::Default })
    }

    /// Whether any layer gives both `--no-verify` and verify commands.
    pub(super) fn unverified_and_verified(&self) -> bool {
        self.layers.iter().any(|(_, l)| l.unverified == Some(true) && l.verify.as_ref().is_some_and(|v| !v.is_empty()))
    }
}
