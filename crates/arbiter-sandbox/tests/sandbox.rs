//! The sandbox from outside: real programs under real policies on this kernel, checked from
//! the host. Each test plays a hostile candidate (a shell script) and proves what it cannot
//! do: write outside its tree, read a hidden file, read the parent's environment, signal the
//! parent, see another process, leave a file in the machine's `/tmp`, redirect the sandbox's
//! mounts with a symbolic link, or leave a process behind — also when the process that
//! started the sandbox is killed with SIGKILL. The fixture lives in the machine's `/tmp`, so
//! the view's mounts under it (hidden, writable and revealed paths) are exercised too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

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
        for d in ["tree", "home", "tmp", "user-repo/.git/objects", "user-repo/.arbiter", "sibling"] {
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
            mounts: false,
            tmp: None,
            registry: Some(self.root.join("registry")),
        }
    }

    /// The policy with the candidate's own view: a fresh `/proc`, a private `/tmp`.
    fn viewed(&self) -> Policy {
        Policy { mounts: true, tmp: Some(self.root.join("tmp")), ..self.policy(true) }
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

/// Whether the kernel lets the sandbox build the candidate's view (CI machines must).
fn kernel_has_mounts() -> bool {
    if !kernel_has_everything() {
        return false;
    }
    let caps = probe(Path::new(LAUNCHER)).expect("probe");
    if !caps.mounts {
        assert!(std::env::var_os("CI").is_none(), "CI machines must let the sandbox mount /proc and /tmp: {caps:?}");
        eprintln!("skipped: this kernel refuses mounts in a user namespace ({caps:?})");
    }
    caps.mounts
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
    for policy in [f.policy(true), f.policy(false), f.viewed()] {
        let namespaces = policy.namespaces;
        let script = format!(
            "cat /proc/{me}/environ 2>/dev/null | tr '\\0' '\\n' | grep SECRET_OF_THE_PARENT && echo READ-ENVIRON
             kill -0 {me} 2>/dev/null && echo SIGNALLED
             ls -l /proc/{me}/cwd 2>/dev/null | grep -q tree && echo FOLLOWED-CWD
             echo done"
        );
        let (code, out, err) = f.run(policy, &script);
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
    assert_eq!(f.run(f.viewed(), "exit 8").0, Some(8));
    assert_eq!(f.run(f.viewed(), "kill -SEGV $$").0, Some(128 + 11));
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
    for (policy, marker) in [(f.policy(true), "1234.5"), (f.policy(false), "1234.6"), (f.viewed(), "1234.7")] {
        let namespaces = policy.namespaces;
        // Double fork into a new session: the daemon is neither a child nor in the group.
        let script = format!(
            "setsid sh -c 'sleep {marker} & sleep {marker}' </dev/null >/dev/null 2>&1 & sleep 0.3; echo started"
        );
        let (code, out, err) = f.run(policy, &script);
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
    // With the candidate's view too: the init's ids change once the view is built, and its
    // tie to the supervisor must survive that.
    for (policy, marker) in [(f.policy(true), "4321.5"), (f.viewed(), "4321.6")] {
        let policy = serde_json::to_string(&policy).unwrap();
        // A stand-in for arbiter: it starts the supervisor and waits; it is then killed -9.
        let starter = format!(
            "import os, subprocess, sys\n\
             p = subprocess.Popen([{LAUNCHER:?}, '__sandbox', 'run', '--policy', sys.argv[1], '--parent', str(os.getpid()), '--', 'sh', '-c', \
             \"setsid sh -c 'sleep {marker}' </dev/null >/dev/null 2>&1 & sleep {marker}\"])\n\
             p.wait()\n"
        );
        let sleeping = format!("sleep {marker}");
        let mut arbiter = Command::new("python3").args(["-c", &starter, &policy]).spawn().expect("python3");
        assert!(
            wait_until(Duration::from_secs(10), || processes_with(&sleeping).len() >= 2),
            "the candidate's processes never started"
        );
        arbiter.kill().expect("kill -9 the starter");
        let _ = arbiter.wait();
        assert!(
            wait_until(Duration::from_secs(5), || processes_with(&sleeping).is_empty()),
            "processes outlived a SIGKILLed arbiter: {:?}",
            processes_with(&sleeping)
        );
        // The supervisor was killed before it could remove its record: the next run's sweep
        // forgets it (and would end its init, were it still running).
        arbiter_sandbox::registry::end_orphans(&f.root.join("registry"));
        assert_eq!(fs::read_dir(f.root.join("registry")).map(|d| d.count()).unwrap_or(0), 0);
    }
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

/// Every process `/proc` lists inside: `pid command line` lines, printed by the script.
const LIST_PROC: &str =
    r#"for p in /proc/[0-9]*; do printf '%s %s\n' "${p#/proc/}" "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)"; done"#;

/// A fresh `/proc`: the candidate lists only the processes of its PID namespace — its init as
/// PID 1, itself and its children — never arbiter, nor a process of the machine's. Without
/// the view the same listing shows the machine's processes: the defence is the mount.
#[test]
fn the_candidate_s_proc_lists_its_own_processes_only_and_its_init_is_pid_1() {
    if !kernel_has_mounts() {
        return;
    }
    let f = Fixture::new();
    let outsider = Outsider(Command::new("sleep").arg("4711.3").spawn().expect("sleep"));
    let me = std::process::id();
    let script = format!("{LIST_PROC}; test -e /proc/{me} && echo SAW-THE''-TEST; echo done");

    let (code, out, err) = f.run(f.viewed(), &script);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("done") && !out.contains("SAW-THE-TEST"), "{out}");
    let listed: Vec<(u32, String)> = out
        .lines()
        .filter_map(|l| {
            let (pid, cmd) = l.split_once(' ')?;
            Some((pid.parse().ok()?, cmd.to_string()))
        })
        .collect();
    let init = listed.iter().find(|(pid, _)| *pid == 1).map(|(_, cmd)| cmd.as_str()).unwrap_or_default();
    assert!(init.starts_with(&format!("{LAUNCHER} __sandbox init --policy")), "PID 1 is {init:?}:\n{out}");
    for (pid, cmd) in &listed {
        let ours = *pid == 1 || cmd.is_empty() || cmd.starts_with("sh -c ") || cmd.starts_with("tr ");
        assert!(ours, "a process that is not the candidate's is listed: {pid} {cmd:?}\n{out}");
    }
    assert!(listed.len() <= 8, "{out}");

    // Contrast: namespaces without the view list the machine's processes.
    let (_, open, _) = f.run(f.policy(true), &script);
    assert!(open.contains("sleep 4711.3") && open.contains("SAW-THE-TEST"), "{open}");
    drop(outsider);
}

/// A process of the machine's, ended with the test however it ends.
struct Outsider(std::process::Child);

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private `/tmp`: `TMPDIR` and its cousins name it, every program's temporary files go
/// there (`mktemp`, Python's `tempfile`), and none of them reaches the machine's `/tmp` or the
/// next process. The machine's `/tmp` reads as before, and what the candidate changes there is
/// its own copy. Under it, the policy still holds: the workspace writes through to the real
/// tree, hidden paths (the fixture lives in the machine's `/tmp`) are empty and read-only —
/// one that appears on the machine while the candidate runs included — and revealed ones are
/// readable, not writable. Its own temporary directory is left empty (no mount point in it).
#[test]
fn a_private_tmp_takes_the_candidate_s_temporary_files_and_keeps_the_policy_beneath_it() {
    if !kernel_has_mounts() {
        return;
    }
    let f = Fixture::new();
    let r = f.root.display();
    let marker = format!("arbiter-view-{}-{}", std::process::id(), f.root.file_name().unwrap().to_string_lossy());
    let mut policy = f.viewed();
    policy.hidden.push(f.root.join("later"));
    let script = format!(
        r#"
        echo "vars: $TMPDIR $TMP $TEMP $TEMPDIR"
        echo mine > /tmp/{marker} && echo wrote-tmp
        t=$(mktemp) && echo x > "$t" && echo "mktemp: $t"
        python3 -c 'import tempfile; print("python:", tempfile.mkdtemp())'
        echo changed > {r}/user-repo/README && echo "private-copy: $(cat {r}/user-repo/README)"
        echo ok > {r}/tree/mine.txt && echo rel > rel.txt && echo wrote-tree
        cat {r}/user-repo/.arbiter/secrets.toml 2>/dev/null && echo READ-SECRETS
        cat {r}/user-repo/.git/config 2>/dev/null && echo READ-GIT-CONFIG
        echo "sibling: [$(ls -A {r}/sibling 2>&1)]"
        echo x > {r}/sibling/planted 2>/dev/null && echo WROTE-SIBLING
        echo "objects: $(cat {r}/user-repo/.git/objects/blob)"
        mkdir {r}/user-repo/.git/objects/new 2>/dev/null && echo WROTE-OBJECTS
        echo "own-tmp: [$(ls -A {r}/tmp)]"
        touch {r}/tree/ready
        i=0; while [ ! -e {r}/tree/go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
        cat {r}/later/secret 2>/dev/null && echo READ-LATER
        echo "later: [$(ls -A {r}/later 2>&1)]"
        "#
    );
    let runner = {
        let (f_root, policy, script) = (f.root.clone(), policy.clone(), script.clone());
        std::thread::spawn(move || {
            let jail = Jail { launcher: PathBuf::from(LAUNCHER), policy };
            let (program, args) = jail.wrap(Path::new("sh"), &["-c".into(), script]);
            let out = Command::new(program).args(args).current_dir(f_root.join("tree")).output().expect("launcher");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
    };
    // The hidden path appears on the machine while the candidate runs.
    assert!(
        wait_until(Duration::from_secs(60), || f.root.join("tree/ready").exists()),
        "the candidate never got ready"
    );
    fs::create_dir_all(f.root.join("later")).unwrap();
    fs::write(f.root.join("later/secret"), "late-secret\n").unwrap();
    fs::write(f.root.join("tree/go"), "").unwrap();
    let (code, out, err) = runner.join().expect("the run");
    assert_eq!(code, Some(0), "{out}\n{err}");

    assert!(out.contains("vars: /tmp /tmp /tmp /tmp"), "{out}\n{err}");
    assert!(
        out.contains("wrote-tmp") && out.contains("mktemp: /tmp/") && out.contains("python: /tmp/"),
        "{out}\n{err}"
    );
    assert!(out.contains("private-copy: changed"), "{out}\n{err}");
    assert!(out.contains("wrote-tree") && out.contains("objects: object"), "{out}\n{err}");
    assert!(out.contains("sibling: []") && out.contains("later: []") && out.contains("own-tmp: []"), "{out}\n{err}");
    for forbidden in
        ["READ-SECRETS", "READ-GIT-CONFIG", "WROTE-SIBLING", "WROTE-OBJECTS", "READ-LATER", "rival", "late-secret"]
    {
        assert!(!out.contains(forbidden), "{forbidden}: {out}");
    }
    // On the machine: the candidate's temporary files are nowhere, the tree has its writes.
    assert!(!Path::new("/tmp").join(&marker).exists(), "the candidate's file reached the machine's /tmp");
    assert_eq!(fs::read_to_string(f.root.join("user-repo/README")).unwrap(), "readme\n");
    assert_eq!(fs::read_to_string(f.root.join("tree/rel.txt")).unwrap(), "rel\n");
    assert!(!f.root.join("sibling/planted").exists() && !f.root.join("user-repo/.git/objects/new").exists());
    assert_eq!(fs::read_dir(f.root.join("tmp")).unwrap().count(), 0, "mount points were left in the candidate's tmp");

    // The next process starts with a /tmp of its own: nothing of the last one's is there.
    let (code, out, _) = f.run(f.viewed(), &format!("test -e /tmp/{marker} && echo SAW-THE-LAST; echo done"));
    assert_eq!(code, Some(0));
    assert!(out.contains("done") && !out.contains("SAW-THE-LAST"), "{out}");
}

/// Without a mount namespace (a kernel that refuses one), `TMPDIR` and its cousins name the
/// candidate's own temporary directory, where temporary files then go; `/tmp` stays
/// unwritable.
#[test]
fn without_the_view_tmpdir_names_the_candidate_s_own_temporary_directory() {
    if !kernel_has_everything() {
        return;
    }
    let f = Fixture::new();
    let policy = Policy { tmp: Some(f.root.join("tmp")), ..f.policy(true) };
    let script = "echo \"vars: $TMPDIR $TMP $TEMP $TEMPDIR\"; t=$(mktemp) && echo \"mktemp: $t\"
                  echo x > /tmp/arbiter-sandbox-test-$$ 2>/dev/null && echo WROTE-TMP; exit 0";
    let (code, out, err) = f.run(policy, script);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let tmp = f.root.join("tmp").display().to_string();
    assert!(out.contains(&format!("vars: {tmp} {tmp} {tmp} {tmp}")), "{out}");
    assert!(out.contains(&format!("mktemp: {tmp}/")), "{out}");
    assert!(!out.contains("WROTE-TMP"), "{out}");
    assert_eq!(fs::read_dir(f.root.join("tmp")).unwrap().count(), 1);
}

/// A candidate swaps a directory of its tree for a symbolic link into a hidden place, hoping
/// that a path the next process's policy grants inside its tree (`[sandbox] writable`, say)
/// lands on the hidden place: mounted there by the view (beneath its writable tree, which
/// Landlock grants whole), or granted by Landlock itself. The sandbox follows no link inside
/// a writable directory: that process refuses to start, saying why, with and without the
/// view, and the hidden file is never read.
#[test]
fn a_symbolic_link_planted_in_the_tree_cannot_redirect_what_the_policy_grants() {
    if !kernel_has_mounts() {
        return;
    }
    let f = Fixture::new();
    fs::create_dir_all(f.root.join("tree/box")).unwrap();
    fs::write(f.root.join("sibling/secret"), "sibling-secret\n").unwrap();
    let r = f.root.display();
    let (code, out, err) = f.run(f.viewed(), &format!("rmdir box && ln -s {r}/sibling box && echo planted"));
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("planted"), "{out}\n{err}");

    for mut policy in [f.viewed(), f.policy(true)] {
        policy.writable.push(f.root.join("tree/box"));
        let (code, out, err) = f.run(policy, "cat box/secret; echo ran");
        assert_eq!(code, Some(arbiter_sandbox::SETUP_FAILED), "{out}\n{err}");
        assert!(err.contains("a candidate may have planted it there"), "{err}");
        assert!(!out.contains("ran") && !out.contains("sibling-secret"), "{out}");
    }
}

#[test]
fn the_probe_can_be_made_to_report_no_mounts() {
    let out = Command::new(LAUNCHER)
        .args(["__sandbox", "probe"])
        .env("ARBITER_SANDBOX_PROBE", "no-mounts")
        .output()
        .expect("probe");
    let faked: arbiter_sandbox::Capabilities = serde_json::from_slice(&out.stdout).expect("json");
    assert!(!faked.mounts, "{faked:?}");
    assert!(faked.detail.unwrap_or_default().contains("a private /tmp and /proc: hidden by ARBITER_SANDBOX_PROBE"));
    if kernel_has_everything() {
        assert!(faked.namespaces && faked.landlock_abi.is_some());
    }
}
