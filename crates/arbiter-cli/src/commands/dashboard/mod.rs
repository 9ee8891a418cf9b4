//! `arbiter dashboard`: a plan watched live in the terminal (ratatui): its tasks by status
//! and depth, who runs what, the budget, the event tail, and a task's attempts; `c` cancels
//! the plan and `r` retries a task, each after a confirmation.
//!
//! Locally it reads the store (`.arbiter/`) and looks for new events twice a second (another
//! process's writes to SQLite notify nobody in this one); against a control plane
//! (`--server`) it follows the server's event stream (`/api/v1/events`) and reads the plan
//! again when an event comes, with a read every few seconds as the safety net. The terminal
//! is restored however the dashboard ends: `q`, Ctrl-C, SIGTERM, an error or a panic.

mod model;
mod run;
mod view;

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arbiter_runner::plan_admin::PlanAdmin;
use futures_util::StreamExt;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use crate::cli::PlanServerArgs;
use crate::error::CliError;
use model::{Action, Command, Dashboard, Key};

/// Events read per request.
const EVENT_PAGE: u32 = 500;

/// What `arbiter dashboard` was given.
pub struct DashboardArgs<'a> {
    pub plan: Option<&'a str>,
    /// Watch this run (an id, or `latest`) instead of a plan.
    pub run: Option<&'a str>,
    pub repo: Option<&'a Path>,
    pub remote: &'a PlanServerArgs,
}

pub async fn dashboard(args: DashboardArgs<'_>) -> Result<u8, CliError> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "arbiter dashboard draws on a terminal and reads its keys: run it in one (over SSH, `ssh -t`); for a table on stdout, `arbiter plan status ID`",
        ));
    }
    if let Some(run) = args.run {
        return watch_run(&args, run).await;
    }
    let opened = crate::commands::plan::open_admin(args.repo, args.remote).await?;
    let plan = match args.plan {
        Some(p) => p.to_string(),
        None => default_plan(&*opened.admin).await?,
    };
    let mut d = Dashboard::new(&plan, &opened.source);
    // The plan is read before the terminal is taken: a wrong id is an error on a normal screen.
    d.set_details(opened.admin.view(&plan).await?);
    d.add_events(latest_events(&*opened.admin, &plan).await?);
    read_names(&*opened.admin, &mut d).await;
    let stream = match args.remote.server() {
        Some(server) => Some(follow_events(crate::commands::worker::client(&server)?, &plan, d.last_event())?),
        None => None,
    };
    let mut terminal = ratatui::try_init()?;
    let result = run(&mut terminal, &*opened.admin, stream, d).await;
    ratatui::restore();
    result
}

/// The plan to show when none is named: the only one, else the one plan with work left.
async fn default_plan(admin: &dyn PlanAdmin) -> Result<String, CliError> {
    let plans = admin.list().await?;
    let open: Vec<&str> = plans.iter().filter(|p| p.has_work_left()).map(|p| p.id.as_str()).collect();
    match (plans.as_slice(), open.as_slice()) {
        ([], _) => Err(CliError::usage("there is no plan to show: import one (`arbiter plan import FILE`)")),
        ([only], _) => Ok(only.id.clone()),
        (_, [only]) => Ok(only.to_string()),
        _ => Err(CliError::usage(format!(
            "name the plan to show: arbiter dashboard --plan ID (plans: {})",
            plans.iter().map(|p| p.id.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The plan's latest events (the tail the dashboard keeps).
async fn latest_events(admin: &dyn PlanAdmin, plan: &str) -> Result<Vec<arbiter_store::plans::PlanEvent>, CliError> {
    let mut tail = std::collections::VecDeque::new();
    let mut after = 0;
    loop {
        let page = admin.events(plan, after, EVENT_PAGE).await?;
        let full = page.len() == EVENT_PAGE as usize;
        for e in page {
            after = e.id;
            tail.push_back(e);
            if tail.len() > model::EVENT_TAIL {
                tail.pop_front();
            }
        }
        if !full {
            return Ok(tail.into());
        }
    }
}

/// Follows the plan's event stream on the control plane from `after`: a message for every
/// event line (reconnecting after a second when the stream ends or fails).
fn follow_events(
    client: arbiter_server::client::Client,
    plan: &str,
    after: i64,
) -> Result<mpsc::UnboundedReceiver<()>, CliError> {
    let token = crate::commands::worker::admin_token()?;
    let mut url = client.url("api/v1/events").map_err(|e| CliError::usage(e.to_string()))?;
    url.query_pairs_mut().append_pair("plan", plan);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut last = after;
        while !tx.is_closed() {
            let request =
                client.http().get(url.clone()).bearer_auth(token.expose()).header("Last-Event-ID", last.to_string());
            if let Ok(response) = request.send().await
                && response.status().is_success()
            {
                let mut stream = response.bytes_stream();
                let mut pending = String::new();
                while let Some(Ok(chunk)) = stream.next().await {
                    pending.push_str(&String::from_utf8_lossy(&chunk));
                    while let Some(end) = pending.find('\n') {
                        let line: String = pending.drain(..=end).collect();
                        if let Some(id) = line.strip_prefix("id:").and_then(|v| v.trim().parse::<i64>().ok()) {
                            last = id;
                            if tx.send(()).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    Ok(rx)
}

/// A key as the dashboard understands it (`None`: not one of its keys).
fn key_of(k: &KeyEvent) -> Option<Key> {
    Some(match k.code {
        KeyCode::Up | KeyCode::Char('k') => Key::Up,
        KeyCode::Down | KeyCode::Char('j') => Key::Down,
        KeyCode::Home | KeyCode::Char('g') => Key::Top,
        KeyCode::End | KeyCode::Char('G') => Key::Bottom,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc | KeyCode::Backspace | KeyCode::Left | KeyCode::Char('h') => Key::Back,
        KeyCode::Char('c') => Key::Cancel,
        KeyCode::Char('r') => Key::Retry,
        KeyCode::Char('y') => Key::Yes,
        KeyCode::Char('n') => Key::No,
        KeyCode::Char('q') => Key::Quit,
        _ => return None,
    })
}

async fn run(
    terminal: &mut ratatui::DefaultTerminal,
    admin: &dyn PlanAdmin,
    mut stream: Option<mpsc::UnboundedReceiver<()>>,
    mut d: Dashboard,
) -> Result<u8, CliError> {
    let palette = view::Palette::from_env();
    let mut key_rx = terminal_events();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    // Locally new events are looked for twice a second; a control plane's stream says when.
    let (every, read_every) =
        if stream.is_some() { (Duration::from_secs(5), 1) } else { (Duration::from_millis(500), 6) };
    let mut tick = tokio::time::interval(every);
    let mut ticks: u64 = 0;
    loop {
        terminal.draw(|frame| view::draw(frame, &d, palette))?;
        let streamed = async {
            match stream.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = key_rx.recv() => match event {
                Some(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
                        return Ok(0);
                    }
                    let Some(key) = key_of(&k) else { continue };
                    match d.on_key(key) {
                        Command::Quit => return Ok(0),
                        Command::Run(action) => {
                            d.message = Some(perform(admin, &d.plan_id, &action).await);
                            refresh(admin, &mut d, true).await;
                        }
                        Command::Nothing => {}
                    }
                }
                // A resize is drawn at the top of the loop.
                Some(_) => {}
                None => return Ok(0),
            },
            _ = streamed => {
                // Events come in bursts: read the plan once the burst is in.
                tokio::time::sleep(Duration::from_millis(50)).await;
                if let Some(rx) = stream.as_mut() {
                    while rx.try_recv().is_ok() {}
                }
                refresh(admin, &mut d, true).await;
            }
            // What changes without an event (a lease renewed, money charged) is read every
            // few seconds.
            _ = tick.tick() => {
                ticks += 1;
                refresh(admin, &mut d, ticks.is_multiple_of(read_every)).await;
            }
            _ = terminate.recv() => return Ok(0),
            _ = hangup.recv() => return Ok(0),
        }
    }
}

/// The terminal's events (keys, resizes), read on a thread of their own: crossterm's read
/// blocks.
fn terminal_events() -> mpsc::UnboundedReceiver<Event> {
    let (keys, key_rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(event) = ratatui::crossterm::event::read() {
            if keys.send(event).is_err() {
                return;
            }
        }
    });
    key_rx
}

/// Where a watched run is read: its directory here, or a control plane's overview of it.
enum RunSource {
    Local(std::path::PathBuf),
    Remote { client: arbiter_server::client::Client, token: arbiter_store::workers::Secret, path: String },
}

impl RunSource {
    async fn read(&self) -> Result<arbiter_runner::run_record::RunOverview, String> {
        match self {
            RunSource::Local(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || arbiter_runner::run_record::RunRecord::read(&dir))
                    .await
                    .map_err(|e| e.to_string())?
                    .map(|r| r.overview())
                    .map_err(|e| e.to_string())
            }
            RunSource::Remote { client, token, path } => client.get(path, token).await.map_err(|e| e.to_string()),
        }
    }
}

/// `arbiter dashboard --run ID`: the run view until `q`, Ctrl-C, SIGTERM or SIGHUP.
async fn watch_run(args: &DashboardArgs<'_>, given: &str) -> Result<u8, CliError> {
    let (source, label, stream) = match args.remote.server() {
        Some(server) => {
            let Some(plan) = args.plan else {
                return Err(CliError::usage(
                    "a control plane's run belongs to a plan: arbiter dashboard --plan ID --run RUN --server URL",
                ));
            };
            let client = crate::commands::worker::client(&server)?;
            let token = crate::commands::worker::admin_token()?;
            let path = format!(
                "api/v1/plans/{}/runs/{}",
                arbiter_server::client::segment(plan),
                arbiter_server::client::segment(given)
            );
            let stream = follow_events(client.clone(), plan, 0)?;
            (RunSource::Remote { client, token, path }, server.server, Some(stream))
        }
        None => {
            let ctx = crate::context::RepoContext::locate(args.repo).await?;
            let (id, dir) = ctx.resolve_run(given)?;
            (RunSource::Local(dir), format!("run {id} of {}", ctx.workspace.repo_root().display()), None)
        }
    };
    let mut w = run::RunWatch::new(label);
    // A run that cannot be read is an error on a normal screen, before the terminal is taken.
    w.set(source.read().await.map_err(CliError::usage)?);
    let mut terminal = ratatui::try_init()?;
    let result = run_loop(&mut terminal, &source, stream, w).await;
    ratatui::restore();
    result
}

async fn run_loop(
    terminal: &mut ratatui::DefaultTerminal,
    source: &RunSource,
    mut stream: Option<mpsc::UnboundedReceiver<()>>,
    mut w: run::RunWatch,
) -> Result<u8, CliError> {
    use arbiter_core::Clock;
    let palette = view::Palette::from_env();
    let mut key_rx = terminal_events();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut tick = tokio::time::interval(run::poll_every(stream.is_some()));
    loop {
        let now = arbiter_runner::SystemClock.now();
        terminal.draw(|frame| run::draw(frame, &w, now, palette))?;
        let streamed = async {
            match stream.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let read = tokio::select! {
            event = key_rx.recv() => match event {
                Some(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
                        return Ok(0);
                    }
                    if let Some(key) = key_of(&k) && w.on_key(key) {
                        return Ok(0);
                    }
                    false
                }
                Some(_) => false,
                None => return Ok(0),
            },
            _ = streamed => true,
            _ = tick.tick() => true,
            _ = terminate.recv() => return Ok(0),
            _ = hangup.recv() => return Ok(0),
        };
        if read {
            match source.read().await {
                Ok(run) => w.set(run),
                Err(e) => w.message = Some(format!("cannot read the run: {e}")),
            }
        }
    }
}

/// Reads the events since the last ones and, when there are any (or `always`), the plan; a
/// failure is shown, and the dashboard goes on.
async fn refresh(admin: &dyn PlanAdmin, d: &mut Dashboard, always: bool) {
    let plan = d.plan_id.clone();
    let before = d.last_event();
    match admin.events(&plan, before, EVENT_PAGE).await {
        Ok(events) => d.add_events(events),
        Err(e) => d.message = Some(format!("cannot read the plan's events: {e}")),
    }
    if !always && d.last_event() == before {
        return;
    }
    match admin.view(&plan).await {
        Ok(details) => d.set_details(details),
        Err(e) => d.message = Some(format!("cannot read the plan: {e}")),
    }
    read_names(admin, d).await;
}

/// The registered workers' names, read again with the plan (a worker that registered since
/// is named too); when they cannot be read, lease holders are shown by id.
async fn read_names(admin: &dyn PlanAdmin, d: &mut Dashboard) {
    if let Ok(names) = admin.worker_names().await {
        d.names = names;
    }
}

/// Runs a confirmed action: what it did, in words.
async fn perform(admin: &dyn PlanAdmin, plan: &str, action: &Action) -> String {
    match action {
        Action::CancelPlan => match admin.cancel(plan, &crate::commands::plan::local_actor()).await {
            Ok(n) => format!("plan {plan} cancelled: {n} task(s) will not run"),
            Err(e) => format!("the plan was not cancelled: {e}"),
        },
        Action::RetryTask(task) => match admin.retry(plan, task, &crate::commands::plan::local_actor()).await {
            Ok(status) => format!("task {task} is {} again", status.as_str()),
            Err(e) => format!("task {task} was not retried: {e}"),
        },
    }
}

/// A plan being watched: what the dashboard reads it through, and what to call that.
pub struct Opened {
    pub admin: Arc<dyn PlanAdmin>,
    pub source: String,
}
