//! The sandbox from outside: real programs under real policies on this kernel, checked from
//! the host. Each test plays a hostile candidate (a shell script) and proves what it cannot
//! do: write outside its tree, read a hidden file, read the parent's environment, signal the
//! parent, or leave a process behind — also when the process that started the sandbox is
//! killed with SIGKILL.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arbiter_sandbox::{Jail, Policy, probe};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_sandbox-launcher");

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("temp dir");
        let root = tmp.path().canonicalize().expect("canonical");
        for d in ["tree", "home", "user-repo/.git/objects", "user-repo/.arbiter", "sibling"] {
            fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        fs::write(root.join("user-repo/.arbiter/secrets.toml"), "key = 'sk-hidden'\n").expect("write");
        fs::write(root.join("user-repo/.git/config"), "[core]\n").expect("write");
        fs::write(root.join("user-repo/.git/objects/blob"), "object\n").expect("write");
        fs::write(root.join("user-repo/README"), "readme\n").expect("write");
        fs::write(root.join("sibling/work.txt"), "rival\n").expect("write");
        Fixture { _tmp: tmp, root }
    }

    fn policy(&self, namespaces: bool) -> Policy {
        Policy {
            writable: vec![self.root.join("tree"), self.root.join("home")],
            hidden: vec![
                self.root.join("user-repo/.arbiter"),
                self.root.join("user-repo/.git"),
                self.root.join("sibling"),
            ],
            revealed: vec![self.root.join("user-repo/.git/objects")],
            landlock: true,
            namespaces,
            registry: Some(self.root.join("registry")),
        }
    }

    /// Runs `sh -c script` in the tree under the policy; returns (exit code, stdout, stderr).
    fn run(&self, policy: Policy, script: &str) -> (Option<i32>, String, String) {
        let jail = Jail { launcher: PathBuf::from(LAUNCHER), policy };
        let (program, args) = jail.wrap(Path::new("sh"), &["-c".into(), script.into()]);
        let out = Command::new(program)
            .args(args)
            .current_dir(self.root.join("tree"))
            .env("SECRET_OF_THE_PARENT", "parent-secret-value")
            .stdin(Stdio::null())
            .output()
            .expect("start the launcher");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }
}

fn kernel_has_everything() -> bool {
    let caps = probe(Path::new(LAUNCHER)).expect("probe");
    let full = caps.landlock_abi.is_some() && caps.namespaces;
    if !full {
        assert!(std::env::var_os("CI").is_none(), "CI machines must offer Landlock and namespaces: {caps:?}");
        eprintln!("skipped: this kernel lacks Landlock or namespaces ({caps:?})");
    }
    full
}

#[test]
fn the_probe_reports_this_kernel_and_can_be_made_to_report_less() {
    let caps = probe(Path::new(LAUNCHER)).expect("probe");
    if kernel_has_everything() {
        assert!(caps.landlock_abi.is_some_and(|abi| abi >= 1), "{caps:?}");
        assert!(caps.namespaces, "{caps:?}");
    }
    let out = Command::new(LAUNCHER)
        .args(["__sandbox", "probe"])
        .env("ARBITER_SANDBOX_PROBE", "nothing")
        .output()
        .expect("probe");
    let faked: arbiter_sandbox::Capabilities = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(faked.landlock_abi, None);
    assert!(!faked.namespaces);
    assert!(faked.detail.unwrap_or_default().contains("hidden by ARBITER_SANDBOX_PROBE"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reporting less than the kernel offers"));
}

#[test]
fn writes_stay_in_the_tree_and_home_and_hidden_paths_cannot_be_read() {
    if !kernel_has_everything() {
        return;
    }
    let f = Fixture::new();
    let r = f.root.display();
    let script = format!(
        r#"
        echo ok > {r}/tree/mine.txt && echo wrote-tree
        echo ok > {r}/home/mine.txt && echo wrote-home
        echo x > {r}/user-repo/planted.txt 2>/dev/null && echo WROTE-REPO
        echo x >> {r}/user-repo/.git/config 2>/dev/null && echo WROTE-GIT-CONFIG
        echo x > {r}/sibling/work.txt 2>/dev/null && echo WROTE-SIBLING
        cat {r}/user-repo/.arbiter/secrets.toml 2>/dev/null && echo READ-SECRETS
        cat {r}/user-repo/.git/config 2>/dev/null && echo READ-GIT-CONFIG
        cat {r}/sibling/work.txt 2>/dev/null && echo READ-SIBLING
        ls {r}/user-repo/.arbiter 2>/dev/null && echo LISTED-ARBITER
        cat {r}/user-repo/.git/objects/blob
        cat {r}/user-repo/README
        mkdir {r}/user-repo/.git/objects/new 2>/dev/null && echo WROTE-OBJECTS
        cat /etc/hostname >/dev/null && echo read-etc
        echo data > /dev/null && echo wrote-dev-null
        echo x > /tmp/arbiter-sandbox-test-$$ 2>/dev/null && echo WROTE-TMP
        exit 0
        "#
    );
    let (code, out, err) = f.run(f.policy(true), &script);
    assert_eq!(code, Some(0), "stdout: {out}\nstderr: {err}");
    for expected in ["wrote-tree", "wrote-home", "object", "readme", "read-etc", "wrote-dev-null"] {
        assert!(out.contains(expected), "missing {expected}: {out}\n{err}");
    }
    for forbidden in [
        "WROTE-REPO",
        "WROTE-GIT-CONFIG",
        "WROTE-SIBLING",
        "READ-SECRETS",
        "READ-GIT-CONFIG",
        "READ-SIBLING",
        "LISTED-ARBITER",
        "WROTE-OBJECTS",
        "WROTE-TMP",
    ] {
        assert!(!out.contains(forbidden), "{forbidden}: {out}");
    }
    assert_eq!(fs::read_to_string(f.root.join("user-repo/.git/config")).unwrap(), "[core]\n");
    assert_eq!(fs::read_to_string(f.root.join("sibling/work.txt")).unwrap(), "rival\n");
    assert!(!f.root.join("user-repo/planted.txt").exists());
}

#[test]
fn the_parents_environment_and_the_parent_itself_are_out_of_reach() {
    if !kernel_has_everything() {
        return;
    }
    let f = Fixture::new();
    let me = std::process::id();
    for namespaces in [true, false] {
        let script = format!(
            "cat /proc/{me}/environ 2>/dev/null | tr '\\0' '\\n' | grep SECRET_OF_THE_PARENT && echo READ-ENVIRON
             kill -0 {me} 2>/dev/null && echo SIGNALLED
             ls -l /proc/{me}/cwd 2>/dev/null | grep -q tree && echo FOLLOWED-CWD
             echo done"
        );
        let (code, out, err) = f.run(f.policy(namespaces), &script);
        assert_eq!(code, Some(0), "{out}\n{err}");
        assert!(out.contains("done"), "{out}\n{err}");
        assert!(!out.contains("READ-ENVIRON"), "namespaces={namespaces}: {out}");
        assert!(!out.contains("parent-secret-value"), "namespaces={namespaces}: {out}");
        assert!(!out.contains("SIGNALLED"), "namespaces={namespaces}: {out}");
        assert!(!out.contains("FOLLOWED-CWD"), "namespaces={namespaces}: {out}");
    }
}

#[test]
fn exit_codes_and_signals_come_back() {
    if !kernel_has_everything() {
        return;
    }
    let f = Fixture::new();
    assert_eq!(f.run(f.policy(true), "exit 7").0, Some(7));
    assert_eq!(f.run(f.policy(false), "exit 9").0, Some(9));
    assert_eq!(f.run(f.policy(true), "kill -SEGV $$").0, Some(128 + 11));
    let (code, _, err) = f.run(f.policy(true), "exec /no/such/program");
    assert_eq!(code, Some(127), "{err}");
}

/// Processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

#[test]
fn a_daemonized_process_dies_with_its_candidate_with_and_without_namespaces() {
    if !kernel_has_everything() {
        return;
    }
    let f = Fixture::new();
    for (namespaces, marker) in [(true, "1234.5"), (false, "1234.6")] {
        // Double fork into a new session: the daemon is neither a child nor in the group.
        let script = format!(
            "setsid sh -c 'sleep {marker} & sleep {marker}' </dev/null >/dev/null 2>&1 & sleep 0.3; echo started"
        );
        let (code, out, err) = f.run(f.policy(namespaces), &script);
        assert_eq!(code, Some(0), "{out}\n{err}");
        assert!(
            wait_until(Duration::from_secs(5), || processes_with(&format!("sleep {marker}")).is_empty()),
            "namespaces={namespaces}: daemons outlived their candidate: {:?}",
            processes_with(&format!("sleep {marker}"))
        );
    }
}

#[test]
fn killing_the_process_that_started_the_sandbox_ends_everything_inside() {
    if !kernel_has_everything() {
        return;
    }
    let f = Fixture::new();
    let jail = Jail { launcher: PathBuf::from(LAUNCHER), policy: f.policy(true) };
    let policy = serde_json::to_string(&jail.policy).unwrap();
    // A stand-in for arbiter: it starts the supervisor and waits; it is then killed -9.
    let starter = format!(
        "import os, subprocess, sys\n\
         p = subprocess.Popen([{LAUNCHER:?}, '__sandbox', 'run', '--policy', sys.argv[1], '--parent', str(os.getpid()), '--', 'sh', '-c', \
         \"setsid sh -c 'sleep 4321.5' </dev/null >/dev/null 2>&1 & sleep 4321.5\"])\n\
         p.wait()\n"
    );
    let mut arbiter = Command::new("python3").args(["-c", &starter, &policy]).spawn().expect("python3");
    assert!(
        wait_until(Duration::from_secs(10), || processes_with("sleep 4321.5").len() >= 2),
        "the candidate's processes never started"
    );
    arbiter.kill().expect("kill -9 the starter");
    let _ = arbiter.wait();
    assert!(
        wait_until(Duration::from_secs(5), || processes_with("sleep 4321.5").is_empty()),
        "processes outlived a SIGKILLed arbiter: {:?}",
        processes_with("sleep 4321.5")
    );
    // The supervisor was killed before it could remove its record: the next run's sweep
    // forgets it (and would end its init, were it still running).
    arbiter_sandbox::registry::end_orphans(&f.root.join("registry"));
    assert_eq!(fs::read_dir(f.root.join("registry")).map(|d| d.count()).unwrap_or(0), 0);
}

/// The instant between the supervisor starting the init and the init tying itself to the
/// supervisor: a supervisor killed then leaves an init re-parented elsewhere, which no
/// parent-death signal would ever reach. The init sees that its parent is not the one that
/// started it and ends before the program runs.
#[test]
fn an_init_whose_supervisor_is_already_gone_never_starts_the_program() {
    let f = Fixture::new();
    let policy = serde_json::to_string(&f.policy(false)).unwrap();
    let start_init = |parent: String| {
        Command::new(LAUNCHER)
            .args(["__sandbox", "init", "--policy", &policy, "--parent", &parent, "--", "sh", "-c", "touch ran"])
            .current_dir(f.root.join("tree"))
            .stdin(Stdio::null())
            .output()
            .expect("start the launcher")
    };
    // The supervisor it names is not its parent any more (a pid that cannot exist).
    let orphan = start_init(i32::MAX.to_string());
    assert_eq!(orphan.status.code(), Some(arbiter_sandbox::SETUP_FAILED), "{orphan:?}");
    assert!(String::from_utf8_lossy(&orphan.stderr).contains("is gone"), "{orphan:?}");
    assert!(!f.root.join("tree/ran").exists(), "the program ran under a vanished supervisor");
    // Its parent is the one it names: the program runs.
    let started = start_init(std::process::id().to_string());
    assert_eq!(started.status.code(), Some(0), "{started:?}");
    assert!(f.root.join("tree/ran").exists());
}
