//! Running verify commands: arbiter runs them itself, in a tree it controls (the baseline's
//! workspace or a candidate's), in that tree's sandbox (a candidate's code runs when its
//! tests do), each with a time limit and its whole process group killed on timeout or
//! interrupt. Full output goes to a log file; the outcome keeps a redacted tail.
//!
//! A command with a canary ([`Gate::canary`]) runs with the canary's files planted beside
//! the base's tests (and its own command line, e.g. `cargo test --no-fail-fast`); its whole
//! log is read for the canary's fate (`arbiter_core::canary`), and the files are taken out
//! again before anything else happens in the tree.
//!
//! Before a candidate's gates, the test machinery it changed (`arbiter_core::test_machinery`
//! decides what that is) is put back as the base has it: [`BaseFacts`] learns the base's
//! files and the interpreter's standard library once per run, [`machinery_changes`] reads
//! the candidate's tree, and [`seal`] writes the result into it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use arbiter_core::canary::{self, CanaryCheck, CanaryPlan, Framework, RepoView, StaticRepo};
use arbiter_core::gate::{CommandOutcome, tail};
use arbiter_core::protect::Touch;
use arbiter_core::redact::Redactor;
use arbiter_core::test_machinery::{self, Family, PythonFacts, Restore};
use tokio_util::sync::CancellationToken;

use crate::canary::CheckoutView;
use crate::git::Git;
use crate::process::{self, ShellCommand};
use crate::test_reports::ReportWatch;

/// What the gates know of the base, learnt once per run: its files (read from the
/// repository at the base commit, never from a candidate's tree) and what the Python the
/// gates run says about itself.
#[derive(Clone, Debug)]
pub struct BaseFacts {
    pub view: StaticRepo,
    pub python: PythonFacts,
}

impl BaseFacts {
    /// Reads the base commit; asks `python3` (on the gates' `PATH`, from `env`) for its
    /// standard library's module names when Python is in play.
    pub async fn learn(repo: &Git, base: &str, commands: &[String], env: &[(String, String)]) -> Result<Self, String> {
        let view = crate::canary::base_view(repo, base).await?;
        let python = if test_machinery::families(&view, commands).contains(&Family::Python) {
            python_facts(env).await
        } else {
            PythonFacts::default()
        };
        Ok(BaseFacts { view, python })
    }
}

/// `sys.stdlib_module_names` of the gates' `python3`; none when there is no such
/// interpreter (or it predates 3.10): a module shadowing the standard library is then not
/// recognised by its name.
async fn python_facts(env: &[(String, String)]) -> PythonFacts {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args(["-I", "-c", "import sys; print('\\n'.join(sorted(sys.stdlib_module_names)))"])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output()).await;
    let stdlib_modules = match out {
        Ok(Ok(o)) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
        _ => Default::default(),
    };
    PythonFacts { stdlib_modules }
}

/// The test machinery a candidate changed, read from its tree `tree` (the base's paths less
/// those it deleted, plus those it added).
pub fn machinery_changes(
    tree: &Path,
    base: &BaseFacts,
    touched: &[(String, Touch)],
    commands: &[String],
) -> Vec<test_machinery::Change> {
    let deleted: std::collections::HashSet<&String> =
        touched.iter().filter(|(_, how)| *how == Touch::Deleted).map(|(p, _)| p).collect();
    let known: std::collections::HashSet<&String> = base.view.files.iter().collect();
    let mut files: Vec<String> = base.view.files.iter().filter(|f| !deleted.contains(f)).cloned().collect();
    files.extend(touched.iter().filter(|(p, how)| *how == Touch::Added && !known.contains(p)).map(|(p, _)| p.clone()));
    let candidate = CheckoutView::new(tree.to_path_buf(), files);
    let sources =
        test_machinery::Sources { base: &base.view, candidate: &candidate, touched, commands, python: &base.python };
    test_machinery::derive(&sources)
}

/// What the gate tree gets back from the base: whole files restored (or taken out, where the
/// base has none), and files rewritten with their settings put back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seal {
    pub restore: Vec<String>,
    pub remove: Vec<String>,
    pub rewrite: Vec<(String, String)>,
}

impl Seal {
    /// Adds the machinery `changes` (those that can be put back).
    pub fn add_machinery(&mut self, base: &dyn RepoView, changes: &[test_machinery::Change]) {
        for c in changes {
            match &c.restore {
                Restore::BaseFile if base.files().contains(&c.path) => self.restore.push(c.path.clone()),
                Restore::BaseFile => self.remove.push(c.path.clone()),
                Restore::Settings { content } => self.rewrite.push((c.path.clone(), content.clone())),
                Restore::Reject { .. } => {}
            }
        }
    }
}

/// Writes `seal` into the candidate's worktree `wt` (its captured patch is unaffected).
pub async fn seal(wt: &Git, base_commit: &str, seal: &Seal) -> Result<(), String> {
    crate::capture::restore_from_base(wt, base_commit, &seal.restore)
        .await
        .map_err(|e| format!("cannot restore the base's files: {e}"))?;
    crate::capture::remove_added(wt, &seal.remove)
        .await
        .map_err(|e| format!("cannot take out the files it added: {e}"))?;
    for (path, content) in &seal.rewrite {
        let full = wt.dir().join(path);
        // Written afresh: a link left in its place is replaced, not followed.
        let _ = std::fs::remove_file(&full);
        std::fs::write(&full, content).map_err(|e| format!("cannot put back the settings of {path}: {e}"))?;
    }
    Ok(())
}

/// Bytes of output kept in an outcome.
const TAIL_BYTES: u64 = 4000;

/// Bytes of a log read for the canary and the failing tests (the end of a longer one: the
/// summaries are there).
const CANARY_LOG_BYTES: u64 = 16 << 20;

/// One verify command as a gate run runs it.
#[derive(Clone, Copy, Debug)]
pub struct Gate<'a> {
    /// The command as configured (what the outcome is recorded under).
    pub command: &'a str,
    /// The canary planted for it, when the base showed it failing (or this is the base).
    pub canary: Option<&'a CanaryPlan>,
    /// The test runner it is, when arbiter recognised one: its log is read for the names of
    /// the tests that failed.
    pub framework: Option<Framework>,
}

impl<'a> Gate<'a> {
    /// Commands without canaries, and without reading their tests.
    pub fn plain(commands: &'a [String]) -> Vec<Gate<'a>> {
        commands.iter().map(|c| Gate { command: c, canary: None, framework: None }).collect()
    }
}

/// Where and how a gate run happens.
pub struct GateRun<'a> {
    pub cwd: &'a Path,
    pub jail: Option<&'a arbiter_sandbox::Jail>,
    pub env: &'a [(String, String)],
    pub timeout: Duration,
    pub log_dir: &'a Path,
    pub cancel: &'a CancellationToken,
    pub redactor: &'a Redactor,
    /// The `test_reports` globs: JUnit XML reports the commands write in `cwd`.
    pub test_reports: &'a [String],
}

/// Runs each gate in order, writing `log_dir/verify-<n>.log` (`first_index` numbers them).
pub async fn run_verify(gates: &[Gate<'_>], run: &GateRun<'_>) -> std::io::Result<Vec<CommandOutcome>> {
    let mut outcomes = Vec::with_capacity(gates.len());
    for (i, gate) in gates.iter().enumerate() {
        if run.cancel.is_cancelled() {
            break;
        }
        outcomes.push(run_gate(gate, i + 1, run).await?);
    }
    Ok(outcomes)
}

/// The environment of a gate: the run's, with Python's bytecode cache moved out of the tree
/// (into the workspace's own temporary directory, beside the tree). Bytecode a candidate
/// left in its tree — build output, never part of its patch — is then never what the
/// gates import: a crafted `.pyc` cannot pass a gate that its patch would fail.
fn gate_env(run: &GateRun<'_>) -> Vec<(String, String)> {
    let mut env = run.env.to_vec();
    let beside = run.cwd.parent().map(|p| p.join("tmp")).filter(|t| t.is_dir());
    if let Some(tmp) = beside
        && !env.iter().any(|(k, _)| k == "PYTHONPYCACHEPREFIX")
    {
        env.push(("PYTHONPYCACHEPREFIX".into(), tmp.join("pycache").display().to_string()));
    }
    env
}

/// Runs one gate, its log `verify-<number>.log`.
pub async fn run_gate(gate: &Gate<'_>, number: usize, run: &GateRun<'_>) -> std::io::Result<CommandOutcome> {
    std::fs::create_dir_all(run.log_dir)?;
    let log: PathBuf = run.log_dir.join(format!("verify-{number}.log"));
    let planted = match gate.canary {
        Some(plan) => Some(crate::canary::plant(run.cwd, plan)?),
        None => None,
    };
    let cmd = ShellCommand {
        command: gate.canary.map_or(gate.command, |plan| plan.command.as_str()).to_string(),
        cwd: run.cwd.to_path_buf(),
        env: gate_env(run),
        stdout: log.clone(),
        stderr: log.clone(),
        timeout: run.timeout,
        jail: run.jail.cloned(),
    };
    let reports = ReportWatch::start(run.cwd, gate.command, run.test_reports);
    let exit = process::run_shell(&cmd, run.cancel).await;
    // Out again before anything else sees the tree, whatever happened.
    if let Some(planted) = planted {
        planted.remove()?;
    }
    let exit = exit?;
    let code = if exit.cancelled { None } else { exit.code };
    process::redact_file(&log, run.redactor)?;
    // The end of the log, read once for the canary and the failing tests, when either asks.
    let output = std::cell::OnceCell::new();
    let output = || output.get_or_init(|| process::read_tail(&log, CANARY_LOG_BYTES)).as_str();
    let canary = gate.canary.map(|plan| {
        let reading = canary::read(plan.framework, plan, output(), code);
        // Planted in a candidate's tree only for a command the base calibrated; on the base
        // its own reading says whether it is calibrated.
        let verdict = canary::verdict(&reading, true);
        CanaryCheck {
            framework: Some(plan.framework),
            files: plan.files.iter().map(|f| f.path.clone()).collect(),
            not_planted: None,
            reading: Some(reading),
            verdict,
        }
    });
    // A report the run wrote is complete where the log's tail may not be: it goes first.
    let report = if code.is_some() { reports.read(run.cwd) } else { None };
    for (file, why) in report.iter().flat_map(|r| &r.unread) {
        tracing::warn!("{file}: not read as a JUnit XML report: {why}");
    }
    let test_reports = report.as_ref().map(|r| r.files.clone()).unwrap_or_default();
    let failed = report.filter(|r| !r.files.is_empty()).map(|r| r.failed).or_else(|| {
        let framework = gate.framework?;
        arbiter_core::test_output::failed_tests(framework, output())
    });
    // The canary's own failure is the test machinery working, not a test of the task's.
    let canary_test = gate.canary.map(|plan| plan.test.as_str());
    let failed_tests =
        failed.map(|failed| failed.into_iter().filter(|name| canary_test.is_none_or(|c| !name.contains(c))).collect());
    let text = process::read_tail(&log, TAIL_BYTES * 2);
    Ok(CommandOutcome {
        command: gate.command.to_string(),
        exit_code: code,
        timed_out: exit.timed_out,
        duration_ms: exit.duration.as_millis() as u64,
        output_tail: run.redactor.redact(&tail(&text, 40, TAIL_BYTES as usize)),
        canary,
        failed_tests,
        test_reports,
    })
}

/// The rules gate: the rule book on `changed` (the files a candidate's patch adds or
/// changes, relative to `tree`), judged in the candidate's tree; project checks are left out
/// where they fail on the base commit too (the candidate did not cause them). A changed file
/// the gate cannot read (a link, a file over `max_file_bytes`, not UTF-8) fails it: a
/// candidate cannot hide a file from its rules. The rules come from the user's repository,
/// read when the run started, never from the candidate's tree.
pub async fn run_rules(
    book: &arbiter_core::rules::RuleBook,
    options: &arbiter_core::rules::RuleOptions,
    tree: &Path,
    changed: &[String],
    base: (&crate::git::Git, &str),
    redactor: &Redactor,
) -> CommandOutcome {
    use arbiter_core::repair::RULES_GATE;
    let started = std::time::Instant::now();
    let run = crate::rules::CheckRun { root: tree, book, options, groups: None, project: true };
    let (code, text) = match crate::rules::check_files(&run, changed).await {
        Ok(mut report) => {
            let on_base = base_project_violations(book, options, changed, base).await;
            report.violations.retain(|v| !on_base.contains(&(v.rule.clone(), v.path.clone())));
            let mut text = report.lines();
            for s in &report.skipped {
                text.push_str(&format!("{}: not checked by the rules: {}\n", s.path, s.why));
            }
            let passed = report.violations.is_empty() && report.skipped.is_empty();
            if passed && text.is_empty() {
                text = format!("{} changed file(s) checked, no violation\n", report.files_checked);
            }
            (Some(if passed { 0 } else { 1 }), text)
        }
        Err(e) => (None, format!("the rules could not be checked: {e}\n")),
    };
    CommandOutcome {
        command: RULES_GATE.to_string(),
        exit_code: code,
        timed_out: false,
        duration_ms: started.elapsed().as_millis() as u64,
        output_tail: redactor.redact(&tail(&text, 200, TAIL_BYTES as usize)),
        canary: None,
        failed_tests: None,
        test_reports: Vec::new(),
    }
}

/// `(rule, path)` of the project checks that fail on the base commit, for the languages of
/// `changed`.
async fn base_project_violations(
    book: &arbiter_core::rules::RuleBook,
    options: &arbiter_core::rules::RuleOptions,
    changed: &[String],
    (git, commit): (&crate::git::Git, &str),
) -> Vec<(String, String)> {
    use arbiter_core::rules::{Language, ProjectView};
    let groups = options.groups.as_deref();
    let langs: std::collections::BTreeSet<Language> = changed.iter().filter_map(|p| Language::of_path(p)).collect();
    let mut out = Vec::new();
    for lang in langs {
        if !book.has_project_checks(lang, groups) {
            continue;
        }
        let mut view = ProjectView::default();
        for file in book.project_files(lang, groups) {
            let Ok(shown) = git.run(["cat-file", "-p", &format!("{commit}:{file}")]).await else { continue };
            view.present.insert(file.clone());
            view.texts.insert(file, String::from_utf8_lossy(&shown.stdout).into_owned());
        }
        out.extend(book.check_project(lang, &view, groups).into_iter().map(|v| (v.rule, v.path)));
    }
    out
}
