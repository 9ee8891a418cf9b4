//! `arbiter dashboard` driven in a real terminal: tmux runs it against a plan in a real
//! repository while another process runs the plan; the test sends keys and reads the pane.

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
    // B waits for a file the test writes (outside the repository, which candidates cannot see), so the plan is seen running.
    let signal = tempfile::tempdir().unwrap();
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
    let running = tmux.wait_for("running 1");
    assert!(running.contains("done 1"), "{running}");
    assert!(running.contains("→ B"), "the workers pane names who runs B:\n{running}");

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

/// Not a terminal: the dashboard says where to run it and what to use instead, and changes
/// nothing.
#[test]
fn the_dashboard_outside_a_terminal_says_what_to_use() {
    let repo = initialized_repo("# dashboard\n", TASK_FILE_AGENT);
    let out = repo.arbiter(&["dashboard", "--plan", "p"]);
    out.assert_code(2);
    assert!(out.stderr.contains("draws on a terminal") && out.stderr.contains("arbiter plan status"), "{}", out.stderr);
}
