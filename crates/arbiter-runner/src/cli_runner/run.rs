//! Running an agent CLI for one candidate: its agent home, its environment, its output
//! tailed, parsed and costed as it goes, and the transcript and runner summary it leaves.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arbiter_agents::{
    AgentEnding, AgentEvent, AgentSummary, CliAgent, Invocation, PromptInput, StreamParser, ending, invocation, parser,
    validate,
};
use arbiter_core::artifact::{AgentOutcome, paths};
use arbiter_core::cost::CallRecord;
use arbiter_core::money::Usd;
use arbiter_core::redact::Redactor;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{CliRunner, install_hint};
use crate::agent::{AgentContext, AgentReport, AgentRunner, RunnerError};
use crate::process::{self, ProgramCommand, Stdin};
use crate::rundir::JsonLines;

/// How often `stdout.log` is read while the agent runs.
const TAIL_INTERVAL: Duration = Duration::from_millis(100);

/// How much of stderr the transcript's last entry quotes when a run did not succeed.
const STDERR_EXCERPT: u64 = 2000;

/// Removes a directory when dropped, however the run ended.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Creates `home` empty (mode 0700) and the invocation's files in it.
fn prepare_home(home: &Path, inv: &Invocation) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if home.exists() {
        std::fs::remove_dir_all(home)?;
    }
    std::fs::create_dir_all(home)?;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))?;
    for (rel, content) in &inv.files {
        let path = home.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content)?;
    }
    Ok(())
}

/// A redactor that also masks the keys this runner hands to the CLI.
#[derive(Clone)]
struct Masks(Redactor);

impl Masks {
    fn redact(&self, text: &str) -> String {
        self.0.redact(text)
    }

    /// Every string in `value`, redacted in place.
    fn redact_value(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.redact(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_value(v)),
            _ => {}
        }
    }
}

/// Where the run's cost stands: tokens and the CLI's own figure so far, and what was
/// charged to the budget.
#[derive(Default)]
struct Accounting {
    prices: Option<(Usd, Usd)>,
    input: u64,
    output: u64,
    cached: u64,
    usage_seen: bool,
    cli_cost: Option<Usd>,
    charged: Usd,
}

/// Where the cost of record comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum CostSource {
    /// The CLI's own figure.
    Cli,
    /// Tokens × the backend's price.
    Tokens,
    /// Neither is known.
    Unpriced,
}

impl Accounting {
    fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Usage { input_tokens, output_tokens, cached_tokens, .. } => {
                self.usage_seen = true;
                self.input = self.input.saturating_add(*input_tokens);
                self.output = self.output.saturating_add(*output_tokens);
                self.cached = self.cached.saturating_add(*cached_tokens);
            }
            AgentEvent::Cost { usd } => self.cli_cost = Some(self.cli_cost.unwrap_or_default() + *usd),
            _ => {}
        }
    }

    /// Tokens × the backend's price.
    fn computed(&self) -> Option<Usd> {
        let (input, output) = self.prices?;
        self.usage_seen
            .then(|| Usd::per_million_tokens(input, self.input) + Usd::per_million_tokens(output, self.output))
    }

    /// The CLI's own figure when it means something: a CLI that reports $0 for tokens it
    /// used has no price for its model (a custom endpoint), which is not "free".
    fn reported(&self) -> Option<Usd> {
        self.cli_cost.filter(|c| *c > Usd::ZERO || self.input.saturating_add(self.output) == 0)
    }

    fn of_record(&self) -> (Option<Usd>, CostSource) {
        match (self.reported(), self.computed()) {
            (Some(c), _) => (Some(c), CostSource::Cli),
            (None, Some(c)) => (Some(c), CostSource::Tokens),
            (None, None) => (None, CostSource::Unpriced),
        }
    }
}

/// Reads `stdout.log` as it grows, a complete line at a time, through the CLI's parser.
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    parser: Box<dyn StreamParser>,
}

impl Tail {
    /// The events of the lines completed since the last read.
    fn read(&mut self) -> Vec<AgentEvent> {
        let mut events = Vec::new();
        let Ok(mut file) = std::fs::File::open(&self.path) else { return events };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return events;
        }
        let mut fresh = Vec::new();
        let Ok(n) = file.read_to_end(&mut fresh) else { return events };
        self.offset += n as u64;
        self.partial.extend_from_slice(&fresh);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            events.extend(self.parser.line(text.trim_end_matches('\r')));
        }
        events
    }

    /// The events of the last, unterminated line (a truncated stream) and of the end.
    fn finish(&mut self) -> Vec<AgentEvent> {
        let mut events = self.read();
        if !self.partial.is_empty() {
            let text = String::from_utf8_lossy(&self.partial).into_owned();
            self.partial.clear();
            events.extend(self.parser.line(&text));
        }
        events.extend(self.parser.finish());
        events
    }
}

/// What the run produced as it went: every event, the accounting, the transcript.
struct Watch<'a> {
    ctx: &'a AgentContext,
    runner: &'a CliRunner,
    masks: &'a Masks,
    tail: Tail,
    transcript: JsonLines,
    events: Vec<AgentEvent>,
    accounting: Accounting,
    error: Option<std::io::Error>,
}

impl Watch<'_> {
    /// Records a batch of events and charges what they added to the cost of record.
    async fn take(&mut self, batch: Vec<AgentEvent>) {
        if batch.is_empty() {
            return;
        }
        for event in &batch {
            self.accounting.observe(event);
            let mut entry = serde_json::to_value(event).unwrap_or(Value::Null);
            self.masks.redact_value(&mut entry);
            if let Err(e) = self.transcript.append(&entry) {
                self.error.get_or_insert(e);
            }
        }
        self.events.extend(batch);
        if let (Some(cost), _) = self.accounting.of_record()
            && cost > self.accounting.charged
        {
            let delta = Usd::from_pico(cost.pico() - self.accounting.charged.pico());
            self.accounting.charged = cost;
            self.ctx.budget.charge(&self.runner.charge_record(self.ctx, delta)).await;
        }
    }

    /// Tails the output until `done`, then reads what is left.
    async fn follow(&mut self, done: &CancellationToken) {
        loop {
            let finished = done.is_cancelled();
            let batch = if finished { self.tail.finish() } else { self.tail.read() };
            self.take(batch).await;
            if finished {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(TAIL_INTERVAL) => {}
                _ = done.cancelled() => {}
            }
        }
    }
}

/// One command the agent ran, for the runner summary.
#[derive(Serialize)]
struct CommandEntry {
    command: String,
    exit_code: Option<i32>,
}

/// Token totals, for the runner summary.
#[derive(Serialize)]
struct UsageEntry {
    input_tokens: u64,
    output_tokens: u64,
    cached_tokens: u64,
}

/// The cost of one run, for the runner summary.
#[derive(Serialize)]
struct CostEntry {
    /// The cost of record.
    usd: Option<Usd>,
    source: CostSource,
    /// What the CLI itself reported (any amount, $0 included).
    cli_reported: Option<Usd>,
    /// Tokens × the backend's price (the cross-check).
    computed: Option<Usd>,
    flags: Vec<String>,
}

/// `agent_cli` in `runner_summary.json`.
#[derive(Serialize)]
struct CliRunRecord {
    cli: CliAgent,
    program: String,
    /// The command line, redacted (it never holds a key).
    invocation: String,
    backend: Option<String>,
    /// The model asked for, and the one the CLI said it used.
    requested_model: Option<String>,
    model: Option<String>,
    session_id: Option<String>,
    usage: Option<UsageEntry>,
    cost: CostEntry,
    commands: Vec<CommandEntry>,
    files_touched: Vec<String>,
    tool_calls: usize,
    messages: usize,
    unparsed_lines: usize,
    /// `success`, `failed`, `max_turns`, `budget_exceeded`, `timed_out` or `cancelled`.
    final_status: &'static str,
    /// Why it did not succeed.
    reason: Option<String>,
    final_text: Option<String>,
    exit_code: Option<i32>,
}

impl CliRunner {
    /// A charge of `delta` to the budget while the agent runs (not a record of its own: the
    /// run's one record is made at the end).
    fn charge_record(&self, ctx: &AgentContext, delta: Usd) -> CallRecord {
        CallRecord {
            role: "coding".into(),
            backend: self.backend().map(str::to_string),
            model: self.model(),
            candidate: Some(ctx.candidate.clone()),
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            cost: Some(delta),
            flags: Vec::new(),
        }
    }

    /// The masks for this run: the run's redactor and the keys handed to the CLI.
    fn masks(&self, ctx: &AgentContext, env: &[(String, String)], inv: &Invocation) -> Masks {
        let targets: Vec<&str> = inv.key_env_aliases.iter().map(|(t, _)| t.as_str()).collect();
        let keys = env
            .iter()
            .filter(|(k, _)| targets.contains(&k.as_str()) || self.agent.key_env_vars().contains(&k.as_str()))
            .map(|(_, v)| v.clone())
            .chain(self.endpoint.as_ref().and_then(|e| e.api_key.clone()));
        Masks(ctx.redactor.with(keys))
    }
}

#[async_trait]
impl AgentRunner for CliRunner {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        self.agent.name()
    }

    fn invocation(&self) -> String {
        let spec = self.invocation_spec("<prompt>".into(), "<prompt file>".into(), "<agent home>".into(), None);
        let inv = invocation(self.agent, &spec);
        let mut line = inv.display_command();
        if let Some(backend) = self.backend() {
            line.push_str(&format!("  [backend {backend}]"));
        }
        line
    }

    async fn run(&self, ctx: &AgentContext) -> Result<AgentReport, RunnerError> {
        let started = Instant::now();
        let stdout = ctx.candidate_dir.join(paths::STDOUT);
        let stderr = ctx.candidate_dir.join(paths::STDERR);
        let home = ctx.home.clone();
        let _remove_home = RemoveOnDrop(home.clone());
        let prompt = std::fs::read_to_string(&ctx.prompt_file)?;
        let mut spec = self.invocation_spec(
            prompt,
            std::path::absolute(&ctx.prompt_file)?,
            home.clone(),
            ctx.resume_session.clone(),
        );
        spec.confined = ctx.jail.as_ref().is_some_and(|j| j.policy.landlock);
        validate(self.agent, &spec).map_err(|e| std::io::Error::other(self.explain(&e)))?;
        let inv = invocation(self.agent, &spec);
        prepare_home(&home, &inv)?;
        // On its own provider the CLI gets the user's login and configuration (MCP servers,
        // hooks and plugins left out unless inherited), gone with the agent home.
        let inherited = if self.endpoint.is_none() && !self.spec.isolate {
            crate::inherited_setup::copy_in(self.agent, &home, &inv, &self.spec.inherit, &|name| {
                std::env::var(name).ok()
            })?
        } else {
            Default::default()
        };
        let stdin = match &inv.stdin {
            PromptInput::Null => Stdin::Null,
            PromptInput::File(path) => Stdin::File(path.clone()),
            PromptInput::Text(text) => {
                let path = home.join(".arbiter-stdin");
                std::fs::write(&path, text)?;
                Stdin::File(path)
            }
        };
        let mut env = self.child_env(ctx, &inv);
        for (name, value) in &inherited.env {
            env.retain(|(k, _)| k != name);
            env.push((name.clone(), value.clone()));
        }
        // Temporary files too stay in the agent home and go with it (gemini writes error
        // reports to the temporary directory, for one) — unless the sandbox gives the agent a
        // temporary directory of its own, which then wins (see arbiter_sandbox::init).
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp)?;
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), tmp.display().to_string()));
        let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str()).unwrap_or_default();
        let program = process::find_program(&inv.program, path).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "`{}` ({}) is not installed or not executable; {}",
                    inv.program,
                    self.agent,
                    install_hint(self.agent)
                ),
            )
        })?;
        let masks = Masks(self.masks(ctx, &env, &inv).0.with(inherited.secrets.iter().cloned()));
        let command_line = masks.redact(&inv.display_command());

        let mut transcript = JsonLines::open(&ctx.candidate_dir.join(paths::TRANSCRIPT))?;
        transcript.append(&json!({
            "type": "process_started",
            "cli": self.agent,
            "program": program.display().to_string(),
            "command": command_line,
            "backend": self.backend(),
            "model": self.model(),
            "inherited": inherited.files,
            "not_inherited": inherited.skipped,
        }))?;
        let cmd = ProgramCommand {
            program: program.clone(),
            args: inv.args.clone(),
            stdin,
            cwd: ctx.worktree.clone(),
            env,
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            timeout: ctx.timeout,
            jail: ctx.jail.clone(),
        };
        let mut watch = Watch {
            ctx,
            runner: self,
            masks: &masks,
            tail: Tail { path: stdout.clone(), offset: 0, partial: Vec::new(), parser: parser(self.agent) },
            transcript,
            events: Vec::new(),
            accounting: Accounting { prices: self.prices(), ..Default::default() },
            error: None,
        };
        let done = CancellationToken::new();
        let running = async {
            let exit = process::run_program(&cmd, &ctx.cancel).await;
            done.cancel();
            exit
        };
        let (exit, ()) = tokio::join!(running, watch.follow(&done));
        let exit = exit?;
        // What the CLI recorded beyond its output (villani-code's debug trace), before its
        // home goes.
        watch.take(arbiter_agents::telemetry(self.agent, &home)).await;
        if let Some(e) = watch.error.take() {
            return Err(e.into());
        }

        let summary = AgentSummary::fold(&watch.events, &ctx.worktree);
        let verdict = ending(self.agent, exit.code, &summary);
        let mut outcome = AgentOutcome {
            exit_code: exit.code,
            signal: exit.signal,
            timed_out: exit.timed_out,
            cancelled: exit.cancelled,
            duration_ms: started.elapsed().as_millis() as u64,
            limit_reached: None,
            failure: None,
        };
        let (final_status, reason) = if exit.timed_out {
            ("timed_out", Some(format!("timed out after {}s and was killed", ctx.timeout.as_secs())))
        } else if exit.cancelled {
            ("cancelled", Some("stopped by arbiter (interrupted, or the run's budget was spent)".to_string()))
        } else {
            match verdict {
                AgentEnding::Success => ("success", None),
                AgentEnding::Failed { reason } => {
                    let reason = masks.redact(&reason);
                    if exit.code == Some(0) {
                        outcome.failure = Some(reason.clone());
                    }
                    ("failed", Some(reason))
                }
                AgentEnding::MaxTurns => {
                    let limit = match self.spec.max_turns {
                        Some(n) => format!("{} reached its turn limit (max_turns = {n})", self.agent),
                        None => format!("{} reached its turn limit", self.agent),
                    };
                    outcome.limit_reached = Some(limit.clone());
                    ("max_turns", Some(limit))
                }
                AgentEnding::BudgetExceeded => {
                    let limit = format!("{} reached its own spending limit", self.agent);
                    outcome.limit_reached = Some(limit.clone());
                    ("budget_exceeded", Some(limit))
                }
            }
        };

        // The run's one cost record, and the budget settled to it.
        let acc = &watch.accounting;
        let (cost, source) = acc.of_record();
        let mut flags = Vec::new();
        if !acc.usage_seen {
            flags.push(arbiter_llm::cost::USAGE_UNAVAILABLE.to_string());
        } else if self.agent.usage_from_trace() {
            flags.push(arbiter_llm::cost::USAGE_FROM_AGENT_TRACE.to_string());
        }
        if cost.is_none() {
            flags.push(arbiter_llm::cost::UNPRICED.to_string());
        }
        let call = CallRecord {
            role: "coding".into(),
            backend: self.backend().map(str::to_string),
            model: summary.model.clone().or_else(|| self.model()),
            candidate: Some(ctx.candidate.clone()),
            input_tokens: acc.usage_seen.then_some(acc.input),
            output_tokens: acc.usage_seen.then_some(acc.output),
            cached_tokens: acc.usage_seen.then_some(acc.cached),
            cost,
            flags: flags.clone(),
        };
        match cost {
            Some(total) if total != acc.charged => {
                let rest = Usd::from_pico(total.pico() - acc.charged.pico());
                ctx.budget.charge(&self.charge_record(ctx, rest)).await;
            }
            Some(_) => {}
            None => ctx.budget.charge(&call).await,
        }

        let record = CliRunRecord {
            cli: self.agent,
            program: program.display().to_string(),
            invocation: command_line,
            backend: self.backend().map(str::to_string),
            requested_model: self.model(),
            model: summary.model.clone(),
            session_id: summary.session_id.clone(),
            usage: acc.usage_seen.then_some(UsageEntry {
                input_tokens: acc.input,
                output_tokens: acc.output,
                cached_tokens: acc.cached,
            }),
            cost: CostEntry { usd: cost, source, cli_reported: acc.cli_cost, computed: acc.computed(), flags },
            commands: summary
                .commands
                .iter()
                .map(|c| CommandEntry { command: c.command.clone(), exit_code: c.exit_code })
                .collect(),
            files_touched: summary.files_touched.clone(),
            tool_calls: summary.tool_calls,
            messages: summary.messages,
            unparsed_lines: summary.unparsed_lines,
            final_status,
            reason: reason.clone(),
            final_text: summary.final_text.clone(),
            exit_code: exit.code,
        };
        let mut details = serde_json::to_value(&record).unwrap_or(Value::Null);
        masks.redact_value(&mut details);

        let stderr_excerpt =
            (final_status != "success").then(|| masks.redact(process::read_tail(&stderr, STDERR_EXCERPT).trim()));
        watch.transcript.append(&json!({
            "type": "end",
            "final_status": final_status,
            "reason": reason,
            "exit_code": exit.code,
            "signal": exit.signal,
            "duration_ms": outcome.duration_ms,
            "stderr_excerpt": stderr_excerpt.filter(|s| !s.is_empty()),
        }))?;
        for log in [&stdout, &stderr] {
            process::redact_file(log, &masks.0)?;
        }
        let secrets = inherited
            .secrets
            .into_iter()
            .map(|v| (format!("the {} login copied into its home", self.agent), v))
            .collect();
        Ok(AgentReport { outcome, calls: vec![call], details: Some(details), secrets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_of_record_is_the_clis_then_tokens_then_unpriced() {
        let usd = |s: &str| Usd::parse(s).unwrap();
        let usage =
            AgentEvent::Usage { input_tokens: 1_000_000, output_tokens: 100_000, cached_tokens: 0, model: None };
        let mut a = Accounting { prices: Some((usd("1"), usd("10"))), ..Default::default() };
        assert_eq!(a.of_record(), (None, CostSource::Unpriced), "no usage yet");
        a.observe(&usage);
        assert_eq!(a.of_record(), (Some(usd("2")), CostSource::Tokens));
        a.observe(&AgentEvent::Cost { usd: Usd::ZERO });
        assert_eq!(a.of_record(), (Some(usd("2")), CostSource::Tokens), "$0 for tokens used is no price");
        a.observe(&AgentEvent::Cost { usd: usd("0.5") });
        assert_eq!(a.of_record(), (Some(usd("0.5")), CostSource::Cli));
        assert_eq!(a.computed(), Some(usd("2")), "kept as the cross-check");

        let mut unpriced = Accounting::default();
        unpriced.observe(&usage);
        assert_eq!(unpriced.of_record(), (None, CostSource::Unpriced), "usage without a price is never $0");
        let mut idle = Accounting::default();
        idle.observe(&AgentEvent::Cost { usd: Usd::ZERO });
        assert_eq!(idle.of_record(), (Some(Usd::ZERO), CostSource::Cli), "no tokens, reported $0: free");
    }

    #[test]
    fn the_tail_reads_complete_lines_then_the_truncated_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        std::fs::write(&path, "{\"type\":\"thread.started\",\"thread_id\":\"t1\"}\n{\"type\":\"turn.comp").unwrap();
        let mut tail = Tail { path: path.clone(), offset: 0, partial: Vec::new(), parser: parser(CliAgent::Codex) };
        assert_eq!(tail.read(), [AgentEvent::Session { id: "t1".into() }]);
        assert!(tail.read().is_empty(), "nothing new, and the partial line waits");
        let rest = tail.finish();
        assert!(matches!(rest.as_slice(), [AgentEvent::Unparsed { line: 2, .. }]), "{rest:?}");
    }
}
