//! A run directory read whole for the people who watch it (the web and terminal
//! dashboards): its state, baseline, every candidate's evidence, runner summary, patch and
//! transcript, the comparisons, the selection, the costs, the final report and a failure
//! analysis, each when it exists — a run still going has only some of them.
//!
//! Reading never trusts the directory: a file that is missing or does not parse is left out
//! (and named in [`RunRecord::unreadable`]); every file is opened without following a
//! symbolic link and without blocking, read only when it is a regular file, and only so far
//! ([`TEXT_CAP`] for text, [`JSON_CAP`] for JSON), so a hostile candidate's link to a secret,
//! its FIFO or its megabytes of patch or transcript can neither leak, hang nor swell a page;
//! and only the candidates `state.json` names are read, by ids that are ids (`c01`).

use std::path::{Path, PathBuf};

use arbiter_core::artifact::{
    AgreementArtifact, Baseline, Evidence, RankingArtifact, RunState, RunnerSummary, SelectionArtifact, paths,
};
use arbiter_core::cost::CostSummary;
use arbiter_core::crosstest::CrossTestMatrix;
use arbiter_core::ids::CandidateId;
use arbiter_core::pairwise::PairRecord;
use arbiter_core::review::ReviewArtifact;
use serde::de::DeserializeOwned;

/// The most bytes of one text file (a patch, a transcript, a report) a record holds.
pub const TEXT_CAP: usize = 256 * 1024;
/// The most bytes of one JSON artifact read (a larger one is left out as unreadable).
pub const JSON_CAP: usize = 4 * 1024 * 1024;
/// The most transcript lines a record holds per candidate.
pub const TRANSCRIPT_LINES: usize = 2000;

/// A text file's first [`TEXT_CAP`] bytes, and whether there was more.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capped {
    pub text: String,
    pub truncated: bool,
    /// The file's whole size in bytes.
    pub bytes: u64,
}

/// One candidate as its directory tells it.
#[derive(Clone, Debug, Default)]
pub struct CandidateFiles {
    pub evidence: Option<Evidence>,
    pub summary: Option<RunnerSummary>,
    pub patch: Option<Capped>,
    /// The agent's transcript, one JSON event per line (at most [`TRANSCRIPT_LINES`]).
    pub transcript: Vec<String>,
    pub transcript_truncated: bool,
}

/// Everything a run directory holds that a person reads.
#[derive(Clone, Debug)]
pub struct RunRecord {
    pub dir: PathBuf,
    pub state: RunState,
    pub baseline: Option<Baseline>,
    /// By candidate, in the order of `state.json`.
    pub candidates: Vec<(CandidateId, CandidateFiles)>,
    pub ranking: Option<RankingArtifact>,
    pub agreement: Option<AgreementArtifact>,
    pub pairs: Vec<PairRecord>,
    pub cross_tests: Option<CrossTestMatrix>,
    pub reviews: Vec<ReviewArtifact>,
    pub selection: Option<SelectionArtifact>,
    pub cost: Option<CostSummary>,
    pub report: Option<Capped>,
    /// `analysis.md`: what a failure analysis made of a failed attempt, when one ran.
    pub analysis: Option<Capped>,
    /// Files that exist but could not be read or parsed (relative paths).
    pub unreadable: Vec<String>,
}

/// Why a directory is not a run that can be shown.
#[derive(Debug, thiserror::Error)]
pub enum RunRecordError {
    #[error("{0} holds no run (no state.json)")]
    NotARun(PathBuf),
    #[error("the state of the run in {dir} cannot be read: {reason}")]
    Unreadable { dir: PathBuf, reason: String },
}

impl RunRecord {
    /// Reads `dir` (blocking file reads: call it off the async runtime's threads).
    pub fn read(dir: &Path) -> Result<RunRecord, RunRecordError> {
        let state_path = dir.join(paths::STATE);
        let unreadable_state = |reason: String| RunRecordError::Unreadable { dir: dir.to_path_buf(), reason };
        let bytes = match read_regular(&state_path, JSON_CAP) {
            Ok((bytes, false)) => bytes,
            Ok((_, true)) => return Err(unreadable_state(format!("state.json is larger than {JSON_CAP} bytes"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(RunRecordError::NotARun(dir.to_path_buf()));
            }
            Err(e) => return Err(unreadable_state(e.to_string())),
        };
        let state: RunState = serde_json::from_slice(&bytes).map_err(|e| unreadable_state(e.to_string()))?;
        if let Some(bad) = state.candidates.iter().find(|c| CandidateId::parse(c.id.as_str()).is_none()) {
            return Err(unreadable_state(format!(
                "its state names a candidate '{}', which is not a candidate id",
                bad.id.as_str().escape_default()
            )));
        }
        let mut unreadable = Vec::new();
        let mut json = |rel: &str| -> Option<serde_json::Value> { read_json(dir, rel, &mut unreadable) };
        let baseline = json(paths::BASELINE).and_then(|v| serde_json::from_value(v).ok());
        let ranking = json(paths::RANKING).and_then(|v| serde_json::from_value(v).ok());
        let agreement = json(paths::AGREEMENT).and_then(|v| serde_json::from_value(v).ok());
        let pairs = json(paths::PAIRWISE).and_then(pairs_of).unwrap_or_default();
        let cross_tests = json(paths::CROSS_TESTS).and_then(|v| serde_json::from_value(v).ok());
        let selection = json(paths::SELECTION).and_then(|v| serde_json::from_value(v).ok());
        let cost = json(paths::COST).and_then(|v| serde_json::from_value(v).ok());
        let mut candidates = Vec::new();
        for c in &state.candidates {
            let rel = |file: &str| format!("{}/{}/{file}", paths::CANDIDATES, c.id);
            let (transcript, transcript_truncated) = read_lines(&dir.join(rel(paths::TRANSCRIPT)));
            candidates.push((
                c.id.clone(),
                CandidateFiles {
                    evidence: typed(dir, &rel(paths::EVIDENCE), &mut unreadable),
                    summary: typed(dir, &rel(paths::RUNNER_SUMMARY), &mut unreadable),
                    patch: read_capped(&dir.join(rel(paths::PATCH))),
                    transcript,
                    transcript_truncated,
                },
            ));
        }
        let reviews = state
            .candidates
            .iter()
            .filter_map(|c| typed(dir, &format!("{}/{}.json", paths::REVIEWS, c.id), &mut unreadable))
            .collect();
        Ok(RunRecord {
            dir: dir.to_path_buf(),
            baseline,
            candidates,
            ranking,
            agreement,
            pairs,
            cross_tests,
            reviews,
            selection,
            cost,
            report: read_capped(&dir.join(paths::REPORT)),
            analysis: read_capped(&dir.join(ANALYSIS)),
            unreadable,
            state,
        })
    }

    /// The files of one candidate.
    pub fn candidate(&self, id: &CandidateId) -> Option<&CandidateFiles> {
        self.candidates.iter().find(|(c, _)| c == id).map(|(_, f)| f)
    }
}

/// A run at a glance, for a dashboard: its state and each candidate's (what the terminal
/// dashboard's run view shows, and what a control plane answers for one of its runs).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RunOverview {
    pub run_id: String,
    /// `running`, `succeeded`, …
    pub status: String,
    pub phase: String,
    pub task: String,
    pub started_at: arbiter_core::time::Timestamp,
    pub finished_at: Option<arbiter_core::time::Timestamp>,
    pub winner: Option<String>,
    /// The decision in words, once there is one.
    pub decision: Option<String>,
    /// What the run's calls cost (`$0.12`, `unknown (3 calls)`), once it is known.
    pub cost: Option<String>,
    pub candidates: Vec<CandidateOverview>,
}

/// One candidate at a glance.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct CandidateOverview {
    pub id: String,
    pub runner: String,
    pub status: String,
    pub started_at: Option<arbiter_core::time::Timestamp>,
    pub finished_at: Option<arbiter_core::time::Timestamp>,
    /// How long its agent ran, once it ended (when its start and end were not recorded).
    pub agent_ms: Option<u64>,
    pub cost: Option<String>,
    /// `2/3 passed`, once its gates ran.
    pub gates: Option<String>,
    /// Each verify command and what became of it (`kept passing`, `fixed`, …).
    pub gate_results: Vec<(String, String)>,
    /// Why it won or lost, once ranked.
    pub reason: Option<String>,
}

impl RunRecord {
    /// The run at a glance.
    pub fn overview(&self) -> RunOverview {
        let s = &self.state;
        let winner = self.selection.as_ref().and_then(|x| x.winner.clone()).or_else(|| s.winner.clone());
        let candidates = s
            .candidates
            .iter()
            .map(|c| {
                let files = self.candidate(&c.id);
                let evidence = files.and_then(|f| f.evidence.as_ref());
                let ranked = self.ranking.as_ref().and_then(|r| r.candidates.iter().find(|x| x.candidate_id == c.id));
                let cost = evidence.and_then(|e| e.cost).map(|u| u.to_string()).or_else(|| {
                    self.cost.as_ref().and_then(|k| k.by_candidate.get(c.id.as_str())).map(|b| b.describe_cost())
                });
                let gates = c.gates.clone().or_else(|| {
                    evidence.and_then(|e| e.gate_summary.as_ref()).map(|_| {
                        let passed = evidence.map_or(0, |e| e.gates.iter().filter(|g| g.passed).count());
                        format!("{passed}/{} passed", evidence.map_or(0, |e| e.gates.len()))
                    })
                });
                // A candidate run as a unit of a plan has its times in its runner summary.
                let summary = files.and_then(|f| f.summary.as_ref());
                CandidateOverview {
                    id: c.id.to_string(),
                    runner: c.runner.clone(),
                    status: evidence.map_or(c.status, |e| e.status).as_str().to_string(),
                    started_at: c.started_at.or_else(|| summary.and_then(|s| s.started_at)),
                    finished_at: c.finished_at.or_else(|| summary.and_then(|s| s.finished_at)),
                    agent_ms: evidence.map(|e| e.agent.duration_ms),
                    cost,
                    gates,
                    gate_results: evidence
                        .map(|e| {
                            e.gates
                                .iter()
                                .map(|g| (g.outcome.command.clone(), g.verdict.describe().to_string()))
                                .collect()
                        })
                        .unwrap_or_default(),
                    reason: ranked.map(|r| r.reason.to_string()),
                }
            })
            .collect();
        RunOverview {
            run_id: s.run_id.to_string(),
            status: s.status.as_str().to_string(),
            phase: s.phase.clone(),
            task: s.task.title(),
            started_at: s.started_at,
            finished_at: s.finished_at,
            winner: winner.map(|w| w.to_string()),
            decision: self.selection.as_ref().map(|x| x.summary.to_string()),
            cost: self.cost.as_ref().map(|c| c.total.describe_cost()),
            candidates,
        }
    }
}

/// A failure analysis in a run directory.
pub const ANALYSIS: &str = "analysis.md";

fn read_json(dir: &Path, rel: &str, unreadable: &mut Vec<String>) -> Option<serde_json::Value> {
    match read_regular(&dir.join(rel), JSON_CAP) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Ok((bytes, false)) => match serde_json::from_slice(&bytes) {
            Ok(v) => Some(v),
            Err(_) => {
                unreadable.push(rel.to_string());
                None
            }
        },
        _ => {
            unreadable.push(rel.to_string());
            None
        }
    }
}

/// The first `cap` bytes of a regular file, and whether there was more. The file is opened
/// without following a symbolic link and without blocking (a FIFO), and its type is checked
/// on the opened file itself, so nothing can be swapped in between.
pub fn read_regular(path: &Path, cap: usize) -> std::io::Result<(Vec<u8>, bool)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags.bits()).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(cap as u64) as usize);
    file.take(cap as u64 + 1).read_to_end(&mut bytes)?;
    let more = bytes.len() > cap;
    bytes.truncate(cap);
    Ok((bytes, more))
}

fn typed<T: DeserializeOwned>(dir: &Path, rel: &str, unreadable: &mut Vec<String>) -> Option<T> {
    let value = read_json(dir, rel, unreadable)?;
    match serde_json::from_value(value) {
        Ok(t) => Some(t),
        Err(_) => {
            unreadable.push(rel.to_string());
            None
        }
    }
}

/// `comparisons/pairwise.json` holds the pairs under `pairs` (or is the list itself).
fn pairs_of(v: serde_json::Value) -> Option<Vec<PairRecord>> {
    let list = match v {
        serde_json::Value::Object(mut m) => m.remove("pairs")?,
        other => other,
    };
    serde_json::from_value(list).ok()
}

/// The first [`TEXT_CAP`] bytes of a regular file (see [`read_regular`]), as text.
pub fn read_capped(path: &Path) -> Option<Capped> {
    let size = std::fs::symlink_metadata(path).ok()?.len();
    let (bytes, more) = read_regular(path, TEXT_CAP).ok()?;
    Some(Capped {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        truncated: more,
        bytes: size.max(bytes.len() as u64),
    })
}

/// The first [`TRANSCRIPT_LINES`] lines of a capped file, and whether any were left out.
fn read_lines(path: &Path) -> (Vec<String>, bool) {
    let Some(c) = read_capped(path) else { return (Vec::new(), false) };
    let mut lines: Vec<String> = c.text.lines().map(str::to_string).collect();
    let cut = lines.len() > TRANSCRIPT_LINES;
    lines.truncate(TRANSCRIPT_LINES);
    (lines, cut || c.truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_state_is_not_a_run_and_hostile_files_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(RunRecord::read(dir.path()), Err(RunRecordError::NotARun(_))));
        std::fs::write(dir.path().join(paths::STATE), "{not json").unwrap();
        assert!(matches!(RunRecord::read(dir.path()), Err(RunRecordError::Unreadable { .. })));

        let big = dir.path().join("big.diff");
        std::fs::write(&big, "x".repeat(TEXT_CAP + 10)).unwrap();
        let c = read_capped(&big).unwrap();
        assert_eq!((c.text.len(), c.truncated, c.bytes), (TEXT_CAP, true, TEXT_CAP as u64 + 10));
        let outside = dir.path().join("secret");
        std::fs::write(&outside, "s3cret").unwrap();
        let link = dir.path().join("link.diff");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(read_capped(&link).is_none(), "a symlink planted in a run directory is never followed");
        let fifo = dir.path().join("fifo.diff");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_capped(&fifo).is_none(), "a FIFO is not read (nor waited on)");
        std::fs::write(dir.path().join(paths::STATE), r#"{"candidates": [{"id": "../../x"}]}"#).unwrap();
        assert!(matches!(RunRecord::read(dir.path()), Err(RunRecordError::Unreadable { .. })));
    }
}
