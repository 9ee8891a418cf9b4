//! The `[intake]`, `[forge]` and `[analysis]` tables of `.arbiter/config.toml`: how issues
//! are labelled and planned, which forge repository a remote is, and the failure analysis's
//! limits. Every key is optional; [`IntakeSection::labels`] and the `*_or_default` methods
//! give what applies.

use serde::{Deserialize, Serialize};

use super::issue::Labels;
use crate::money::Usd;

/// `[intake]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IntakeSection {
    pub label_pending: Option<String>,
    pub label_in_progress: Option<String>,
    pub label_done: Option<String>,
    pub label_failed: Option<String>,
    /// Plans from issues push their integration branch and open a pull request when they
    /// complete (default true).
    pub push: Option<bool>,
    /// Where PRDs and plan files are written, relative to the repository (default `docs`).
    pub docs_dir: Option<String>,
}

impl IntakeSection {
    /// The label of each stage.
    pub fn labels(&self) -> Labels {
        let d = Labels::default();
        Labels {
            pending: self.label_pending.clone().unwrap_or(d.pending),
            in_progress: self.label_in_progress.clone().unwrap_or(d.in_progress),
            done: self.label_done.clone().unwrap_or(d.done),
            failed: self.label_failed.clone().unwrap_or(d.failed),
        }
    }

    pub fn push_or_default(&self) -> bool {
        self.push.unwrap_or(true)
    }

    /// The directory of PRDs and plan files: a relative path inside the repository.
    pub fn docs_dir(&self) -> Result<String, String> {
        let dir = self.docs_dir.clone().unwrap_or_else(|| "docs".to_string());
        let inside = !dir.is_empty()
            && !dir.starts_with('/')
            && dir.split('/').all(|part| !part.is_empty() && part != ".." && part != "." && !part.starts_with('-'));
        if inside {
            Ok(dir)
        } else {
            Err(format!(
                "[intake] docs_dir = '{}' must be a relative path inside the repository (like `docs`), without `..`",
                super::text::one_line(&dir, 80)
            ))
        }
    }
}

/// `[forge]`: the forge repository pull requests go to, when the remote's URL does not say
/// (a local or mirrored remote).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeSection {
    /// `github` or `gitlab` (default: from the host).
    pub kind: Option<super::issue::Forge>,
    /// The forge's host (`github.com`, `gitlab.example.com`).
    pub host: Option<String>,
    /// `OWNER/REPO`.
    pub repository: Option<String>,
    /// The remote pushed to (default `origin`).
    pub remote: Option<String>,
}

/// `[analysis]`: the failure analysis of failed attempts (when a backend has the `analysis`
/// role).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSection {
    /// Analyse failed attempts (default true when the `analysis` role has a backend).
    pub enabled: Option<bool>,
    /// Put the analysis into the next attempt's prompt (default true; a plan's
    /// `analysis_feedback` wins).
    pub feedback: Option<bool>,
    /// The longest one analysis may take (default 120).
    pub timeout_seconds: Option<u64>,
    /// The most one analysis may cost (default 0.10): a call that could cost more is not made.
    #[serde(default, deserialize_with = "crate::money::deserialize_budget")]
    pub max_cost_usd: Option<Usd>,
}

impl AnalysisSection {
    pub fn timeout_seconds_or_default(&self) -> u64 {
        self.timeout_seconds.unwrap_or(120).max(1)
    }

    pub fn max_cost_or_default(&self) -> Usd {
        self.max_cost_usd.or_else(|| Usd::parse("0.10")).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use crate::settings::ConfigFile;

    #[test]
    fn the_tables_read_with_their_defaults() {
        let cfg = ConfigFile::parse(
            "[intake]\nlabel_pending = \"todo\"\nlabel_done = \"shipped\"\npush = false\n[forge]\nrepository = \"acme/web\"\n[analysis]\nmax_cost_usd = \"0.5\"\nfeedback = false\n",
            "config.toml",
        )
        .unwrap();
        let labels = cfg.intake.labels();
        assert_eq!((labels.pending.as_str(), labels.in_progress.as_str()), ("todo", "arbiter:in-progress"));
        assert_eq!(labels.done, "shipped");
        assert!(!cfg.intake.push_or_default());
        assert_eq!(cfg.forge.repository.as_deref(), Some("acme/web"));
        assert_eq!(cfg.analysis.max_cost_or_default().decimal(), "0.5");
        assert_eq!(cfg.analysis.timeout_seconds_or_default(), 120);
        let defaults = ConfigFile::default();
        assert!(defaults.intake.push_or_default());
        assert_eq!(defaults.analysis.max_cost_or_default().decimal(), "0.1");
        assert!(ConfigFile::parse("[intake]\nlabel = \"x\"\n", "c").is_err(), "unknown keys are errors");
    }

    #[test]
    fn the_docs_directory_stays_inside_the_repository() {
        let with = |dir: &str| super::IntakeSection { docs_dir: Some(dir.into()), ..Default::default() }.docs_dir();
        assert_eq!(with("docs/plans").unwrap(), "docs/plans");
        assert_eq!(super::IntakeSection::default().docs_dir().unwrap(), "docs");
        for bad in ["../out", "/etc", "docs/../..", "", "./x", "-x"] {
            assert!(with(bad).unwrap_err().contains("inside the repository"), "{bad}");
        }
    }
}
