//! `arbiter dashboard` driven in a real terminal: tmux runs it against a plan in a real
//! repository while another process runs the plan; the test sends keys and reads the pane.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::tmux::Tmux;
use common::*;
use serde_json::json;

/// A child process killed when the test ends, however it ends (a plan run waiting for the
/// test's signal would otherwise outlive a failed test).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The dashboard of a plan another process runs: the rows change live, Enter opens a task,
/// `c` asks before cancelling and `n` changes nothing, `q` leaves the terminal as it was.
#[test]
fn the_dashboard_follows_a_running_plan_in_a_terminal() {
    let repo = initialized_repo("# dashboard\n", TASK_FILE_AGENT);
    // B waits for a file the test writes (outside the repository, which candidates cannot see, and outside /tmp: see holds_dir), so the plan is seen running.
    let signal = holds_dir();
    let go = signal.path().join("go");
    repo.write_agent(
        "agent.sh",
        &format!(
            "{TASK_FILE_AGENT}if [ \"$task\" = B ]; then while [ ! -f \"{}\" ]; do sleep 0.1; done; fi\n",
            go.display()
        ),
    );
    repo.commit_all("an agent that waits");
    let plan = json!({"id": "p", "name": "Watched plan", "defaults": {"verify": ["true"], "candidates": 1,
    "runners": "command", "command": "./agent.sh"},
    "tasks": [
        {"id": "A", "title": "Write A", "description": "Write A.txt holding A.", "acceptance_criteria": ["A.txt exists"]},
        {"id": "B", "title": "Write B", "description": "Write B.txt holding B.", "dependencies": ["A"],
         "acceptance_criteria": ["B.txt exists"]},
        {"id": "C", "title": "Write \u{1b}]0;pwned\u{7} C", "description": "Write C.txt.", "dependencies": ["B"],
         "acceptance_criteria": ["C.txt exists"]}
    ]});
    repo.write("plan.json", plan.to_string());
    repo.arbiter(&["plan", "import", "plan.json"]).assert_code(0);

    let bin = std::path::Path::new(ARBITER).display().to_string();
    let script = format!(
        "{bin} dashboard --plan p; echo \"EXIT=$?\"; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; echo STTY-CHECKED; sleep 60"
    );
    let Some(tmux) = Tmux::start("the dashboard in tmux", repo.path(), &script) else { return };
    // The footer is drawn last: once it shows, the whole first frame is on the pane.
    let first = tmux.wait_for("↑/k ↓/j move");
    assert!(first.contains("Watched plan") && first.contains("3 task(s)"), "{first}");
    assert!(first.contains("ready 1") && first.contains("blocked 2"), "{first}");
    assert!(first.contains("↑/k ↓/j move"), "the keys are in the footer:\n{first}");
    // A → B → C, none finished: the whole chain is the critical path, marked in DEPTH.
    assert!(first.contains("* the critical path") && first.contains("2*"), "{first}");
    assert!(first.contains("\\u{1b}]0;pwned"), "a title's control characters are shown escaped:\n{first}");

    // The plan runs in another process: A finishes, B is running, the rows change.
    let mut run = Killed(repo.arbiter_cmd(&["plan", "run", "p"]).spawn().unwrap());
    // (A runs first: the pane shows "running 1" before A is done.) The workers pane names
    // who runs B.
    tmux.wait_for_all(&["running 1", "done 1", "→ B"]);

    // Enter opens the task under the cursor: at the top (`g`), B (running tasks come first).
    tmux.keys(&["g", "Enter"]);
    let task = tmux.wait_for("task B");
    assert!(task.contains("attempts") && task.contains("depends on A"), "{task}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("TASK");

    // `c` asks first; `n` changes nothing.
    tmux.keys(&["c"]);
    tmux.wait_for("Cancel plan p?");
    tmux.keys(&["n"]);
    tmux.wait_for("nothing was changed");

    std::fs::write(&go, "").unwrap();
    assert!(run.0.wait().unwrap().success());
    let done = tmux.wait_for("done 3");
    assert!(!done.contains("CANCELLED"), "{done}");

    // `q` quits and gives the terminal back as it was (canonical mode, the shell's screen).
    tmux.keys(&["q"]);
    // The mode is read after the exit: wait for its line, not only for the exit code.
    let after = tmux.wait_for("STTY-CHECKED");
    assert!(after.contains("EXIT=0"), "{after}");
    assert!(after.lines().any(|l| l.trim() == "icanon"), "the terminal is in canonical mode again:\n{after}");
    assert!(!after.contains("TASK"), "the alternate screen is gone:\n{after}");
}

/// The dashboard of a plan on a control plane, in a real terminal: it follows the server,
/// and names the worker holding a task by the name it registered with (as the web does),
/// never by its id — in the workers pane, the task's lease and the events.
#[test]
fn the_dashboard_of_a_plan_on_a_control_plane_names_its_workers() {
    let serve = Serve::start(&[], None);
    let repo = TestRepo::new();
    repo.write("README.md", "# remote dashboard\n");
    // The agent waits while the test holds its task, so the worker is seen holding it.
    repo.write_agent(
        "agent.sh",
        "task=$(sed -n 's/^(Task \\([^ ]*\\) of plan.*/\\1/p' \"$ARBITER_PROMPT_FILE\")\nwhile [ -e \"$1/$task\" ]; do sleep 0.1; done\necho \"$task\" > \"$task.txt\"\n",
    );
    repo.commit_all("agent");
    let holds = holds_dir();
    std::fs::write(holds.path().join("A"), "").unwrap();
    let plan = json!({"id": "far", "name": "Plan far away", "repository": repo.path().display().to_string(),
        "defaults": {"runners": "command", "command": format!("./agent.sh {}", holds.path().display()), "candidates": 1},
        "tasks": [{"id": "A", "title": "Write A", "description": "Write A.txt holding A.",
                   "acceptance_criteria": ["A.txt holds A"], "verify": ["grep -qx A A.txt"]}]});
    repo.write("plan.json", plan.to_string());
    serve.cli(repo.path(), &["plan", "import", "plan.json"], &[("ARBITER_TOKEN", ADMIN)]).assert_code(0);
    let mut worker = Worker::register(&serve, "tui-box", &["command"]);
    let listed = serve.worker(&["list"], &[("ARBITER_TOKEN", ADMIN)]);
    listed.assert_code(0);
    let id = listed
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("tui-box").and_then(|rest| rest.split_whitespace().next()))
        .unwrap_or_else(|| panic!("tui-box is not listed:\n{}", listed.stdout))
        .to_string();
    assert!(id.starts_with("w-"), "{id}");
    worker.start(&serve.url, &[]);

    let bin = std::path::Path::new(ARBITER).display().to_string();
    let script = format!("{bin} dashboard --plan far; echo \"EXIT=$?\"; sleep 60");
    let env = [("ARBITER_TOKEN", ADMIN), ("ARBITER_SERVER", serve.url.as_str())];
    let Some(tmux) = Tmux::start_with("the remote dashboard in tmux", repo.path(), &script, &env) else { return };
    let running = tmux.wait_for_all(&["Plan far away", "running 1", "tui-box:", "→ A", "A: by tui-box:"]);
    assert!(!running.contains(&id), "the worker is shown by its id:\n{running}");
    assert!(running.contains(&serve.url), "the pane names the control plane it reads:\n{running}");
    // Enter opens A: its lease is held by tui-box.
    tmux.keys(&["g", "Enter"]);
    let task = tmux.wait_for("lease tui-box:");
    assert!(!task.contains(&id), "{task}");
    tmux.keys(&["Escape"]);
    // The test lets A finish: the dashboard follows the server to the end of the plan.
    std::fs::remove_file(holds.path().join("A")).unwrap();
    tmux.wait_for_all(&["done 1", "A: done (fence 1)"]);
    tmux.keys(&["q"]);
    tmux.wait_for("EXIT=0");
    worker.stop();
}

/// Not a terminal: the dashboard says where to run it and what to use instead, and changes
/// nothing.
#[test]
fn the_dashboard_outside_a_terminal_says_what_to_use() {
    let repo = initialized_repo("# dashboard\n", TASK_FILE_AGENT);
    let out = repo.arbiter(&["dashboard", "--plan", "p"]);
    out.assert_code(2);
    assert!(out.stderr.contains("draws on a terminal") && out.stderr.contains("arbiter plan status"), "{}", out.stderr);
}

/// The run view in a real terminal: a run id that is none is refused on the normal screen
/// (exit 2, naming the form of an id and `latest`); `--run latest` lists the tournament's
/// candidates, `j` and Enter open the second one's gates and the reason it lost, Esc goes
/// back, `q` leaves the terminal as it was.
#[test]
fn the_run_dashboard_opens_a_candidate_and_refuses_a_run_that_is_none() {
    let repo = python_repo(AGENT_FIX_BREAK_NOTHING);
    let task = "Fix the failing test in calc.py";
    repo.arbiter(&[
        "run",
        "--task",
        task,
        "--runner",
        "command",
        "--command",
        "./agent.sh",
        "--verify",
        VERIFY_PY,
        "--candidates",
        "3",
        "--timeout-seconds",
        "60",
    ])
    .assert_code(0);
    // The hint's `arbiter runs list` names the run `latest` finds.
    let listed = repo.arbiter(&["runs", "list"]);
    listed.assert_code(0);
    let run_id = repo.run_dir().file_name().unwrap().to_string_lossy().into_owned();
    assert!(listed.stdout.contains(&run_id), "{}", listed.stdout);

    let bin = std::path::Path::new(ARBITER).display().to_string();
    let script = format!(
        "{bin} dashboard --run nope; echo \"NOPE=$?\"; {bin} dashboard --run latest; echo \"EXIT=$?\"; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; echo STTY-CHECKED; sleep 60"
    );
    let Some(tmux) = Tmux::start("the dashboard in tmux", repo.path(), &script) else { return };
    // The footer is drawn last: once it shows, the whole first frame is on the pane.
    let first = tmux.wait_for("Enter candidate · q quit");
    assert!(first.contains(&format!("run {run_id} succeeded")), "{first}");
    assert!(first.contains(task), "{first}");
    assert!(first.contains("candidates (3)"), "{first}");
    for row in ["c01★", "c02", "c03"] {
        assert!(first.contains(row), "{row} is listed:\n{first}");
    }
    assert!(first.contains("command") && first.contains("finished"), "{first}");

    // `j` moves to c02, Enter opens it: its gates and why it lost.
    tmux.keys(&["j", "Enter"]);
    let detail = tmux.wait_for("Esc back");
    assert!(detail.contains("c02 (command)"), "{detail}");
    assert!(detail.contains("gates failed"), "the reason it lost:\n{detail}");
    assert!(detail.contains(VERIFY_PY), "its gate:\n{detail}");
    tmux.keys(&["Escape"]);
    let back = tmux.wait_for("Enter candidate · q quit");
    assert!(back.contains("candidates (3)"), "{back}");

    tmux.keys(&["q"]);
    let after = tmux.wait_for("STTY-CHECKED");
    assert!(after.contains("EXIT=0"), "{after}");
    assert!(after.lines().any(|l| l.trim() == "icanon"), "the terminal is in canonical mode again:\n{after}");
    assert!(!after.contains("candidates (3)"), "the alternate screen is gone:\n{after}");
    // The wrong id was refused before the dashboard took the terminal: its message is on
    // the shell's screen, above the run view's exit.
    assert!(after.contains("NOPE=2"), "{after}");
    assert!(
        after.contains("'nope' is not a run id") && after.contains("arbiter runs list") && after.contains("latest"),
        "{after}"
    );
}
