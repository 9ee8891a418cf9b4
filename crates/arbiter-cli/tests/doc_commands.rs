//! What a document tells a user to type, run as written: every fenced `sh`, `bash` and
//! `console` block of docs/distributed.md and docs/security.md, and of the README's quick
//! start, is read from the file itself (an edit of a doc is tested without touching this
//! file) and run in order, in one shell, in a temporary directory, with the `arbiter` of this
//! build on PATH and real servers, workers, git, TLS and Postgres.
//!
//! Only what must differ on this machine is substituted, from a short list per document
//! (host names, ports, paths, placeholders); each entry must still match, so a stale one
//! fails. A command that serves until it is stopped (`arbiter serve`, `arbiter worker run`)
//! runs in the background, as its host would run it as a service, and the next block waits
//! for the port a server binds. A fenced block without a language fails: every block says
//! whether it is commands. What a test adds around a document (a repository the quick start
//! assumes, a check after the walkthrough) is shell of its own, marked as such in the script.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::json;

/// The languages whose blocks are commands.
const SHELL: &[&str] = &["sh", "bash", "shell", "console"];

/// The languages of blocks that are not commands (files, output, code): any other language
/// is refused, so no block of commands goes untested under a name this test does not know.
const NOT_COMMANDS: &[&str] =
    &["text", "toml", "json", "jsonc", "yaml", "ini", "markdown", "diff", "rust", "python", "javascript", "html"];

/// The commands that serve until stopped: run in the background.
const SERVICES: &[&[&str]] = &[&["arbiter", "serve"], &["arbiter", "worker", "run"]];

/// A fenced block of a markdown file.
#[derive(Debug)]
struct Block {
    /// Its opening fence's line (1-based).
    line: usize,
    lang: String,
    body: String,
}

fn read_doc(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every fenced block of `markdown`, in order (those of the section `heading` only, when
/// given: from that `## ` heading to the next).
fn fenced_blocks(doc: &str, markdown: &str, heading: Option<&str>) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    let mut inside = heading.is_none();
    for (i, line) in markdown.lines().enumerate() {
        if open.is_none()
            && let Some(h) = heading
            && line.starts_with("## ")
        {
            inside = line.trim_end() == h;
            continue;
        }
        let fence = line.trim_start().starts_with("```");
        match open.take() {
            Some(block) if fence && inside => blocks.push(block),
            Some(_) if fence => {}
            Some(mut block) => {
                block.body.push_str(line);
                block.body.push('\n');
                open = Some(block);
            }
            None if fence => {
                let lang = line.trim_start().trim_start_matches('`').trim().to_string();
                assert!(
                    !lang.is_empty() || !inside,
                    "{doc}:{}: a fenced block without a language; say what it is (```sh for commands, ```text, ```toml, …)",
                    i + 1
                );
                open = Some(Block { line: i + 1, lang, body: String::new() });
            }
            None => {}
        }
    }
    assert!(open.is_none(), "{doc}: a fenced block is never closed");
    blocks
}

/// The commands of a block: all of it, or in a `console` block the lines after `$ ` (and
/// their continuation lines).
fn commands_of(block: &Block) -> String {
    if block.lang != "console" {
        return block.body.clone();
    }
    let mut out = String::new();
    let mut continued = false;
    for line in block.body.lines() {
        let command = match line.strip_prefix("$ ") {
            Some(c) => Some(c),
            None if continued => Some(line),
            None => None,
        };
        if let Some(c) = command {
            out.push_str(c);
            out.push('\n');
            continued = c.trim_end().ends_with('\\');
        }
    }
    out
}

/// The words a logical command line starts with, past its `NAME=value` assignments.
fn command_words(logical: &str) -> Vec<&str> {
    logical
        .split_whitespace()
        .filter(|w| *w != "\\")
        .skip_while(|w| {
            w.split_once('=')
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        })
        .collect()
}

/// `text` with each service (see [`SERVICES`]) run in the background, its output in a log of
/// its own under `logs`, and a wait for the port a server binds. Heredoc bodies pass as they
/// are.
fn backgrounded(text: &str, logs: &Path, counter: &mut usize) -> String {
    let mut out = String::new();
    let mut logical = String::new();
    let mut heredoc_end: Option<String> = None;
    for line in text.lines() {
        if let Some(end) = &heredoc_end {
            out.push_str(line);
            out.push('\n');
            if line.trim() == end {
                heredoc_end = None;
            }
            continue;
        }
        logical.push_str(line);
        logical.push('\n');
        if line.trim_end().ends_with('\\') {
            continue;
        }
        let words = command_words(&logical);
        let service = SERVICES.iter().any(|s| words.len() >= s.len() && words[..s.len()] == **s);
        if service && !logical.trim_end().ends_with('&') {
            assert!(
                !logical.contains('#'),
                "a service's command line with a comment cannot be backgrounded: {logical}"
            );
            *counter += 1;
            let log = logs.join(format!("service-{counter}.log"));
            out.push_str(&format!("{} > {} 2>&1 &\n", logical.trim_end(), log.display()));
            if words[1] == "serve" {
                let bind = words.windows(2).find(|w| w[0] == "--bind").map(|w| w[1]).expect("a served address");
                let port = bind.rsplit(':').next().expect("a port");
                out.push_str(&format!("doc_wait_for_port {port} $! {}\n", log.display()));
            }
        } else {
            out.push_str(&logical);
        }
        if let Some(marker) = logical.split("<<").nth(1) {
            let end = marker.trim_start_matches('-').split_whitespace().next().unwrap_or_default();
            heredoc_end = Some(end.trim_matches(|c| c == '\'' || c == '"').to_string());
        }
        logical.clear();
    }
    out.push_str(&logical);
    out
}

/// One document's commands, as the test runs them.
struct DocRun {
    doc: &'static str,
    /// The section whose blocks run (the README's quick start), or the whole file.
    heading: Option<&'static str>,
    /// (as written, as run), applied in order; each must match.
    substitutions: Vec<(String, String)>,
    /// The test's own shell before the document's, and after.
    before: String,
    after: String,
    /// Variables of the shell.
    env: Vec<(String, String)>,
}

/// What the script printed.
struct Ran {
    stdout: String,
    stderr: String,
}

impl DocRun {
    fn new(doc: &'static str) -> Self {
        DocRun {
            doc,
            heading: None,
            substitutions: Vec::new(),
            before: String::new(),
            after: String::new(),
            env: Vec::new(),
        }
    }

    fn substitute(mut self, written: &str, run: impl Into<String>) -> Self {
        self.substitutions.push((written.to_string(), run.into()));
        self
    }

    /// The script: the test's prologue, each command block (marked with its place in the
    /// document), the test's epilogue.
    fn script(&self, logs: &Path) -> (String, usize) {
        let markdown = read_doc(self.doc);
        let blocks = fenced_blocks(self.doc, &markdown, self.heading);
        let mut body = String::new();
        let mut count = 0;
        for block in &blocks {
            assert!(
                SHELL.contains(&block.lang.as_str()) || NOT_COMMANDS.contains(&block.lang.as_str()),
                "{}:{}: a ```{} block is neither commands this test runs ({SHELL:?}) nor one of {NOT_COMMANDS:?}",
                self.doc,
                block.line,
                block.lang
            );
        }
        for block in blocks.iter().filter(|b| SHELL.contains(&b.lang.as_str())) {
            count += 1;
            body.push_str(&format!("\n#@ {}:{}\n", self.doc, block.line));
            body.push_str(&commands_of(block));
        }
        for (written, run) in &self.substitutions {
            assert!(
                body.contains(written.as_str()),
                "{}: the substitution of `{written}` matches no command any more; update this test's list",
                self.doc
            );
            body = body.replace(written.as_str(), run);
        }
        let mut services = 0;
        let body = backgrounded(&body, logs, &mut services);
        // Each block says where it is before it runs: the last mark before a failure names
        // the block that failed.
        let body: String = body
            .lines()
            .map(|l| match l.strip_prefix("#@ ") {
                Some(place) => format!("echo '== {place}' >&2\n"),
                None => format!("{l}\n"),
            })
            .collect();
        // A server in the background is ready when its port answers; one that died says why.
        let prologue = r#"set -e
doc_wait_for_port() {
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    kill -0 "$2" 2>/dev/null || { echo "the server on port $1 exited:" >&2; cat "$3" >&2; exit 1; }
    sleep 0.2
  done
}
"#;
        let script = format!(
            "{prologue}\n# (the test's own)\n{}\n# (the document's)\n{body}\n# (the test's own)\n{}\n",
            self.before, self.after
        );
        (script, count)
    }

    /// Runs the script in `root` (its home directory too); fails with everything it printed
    /// and the services' logs when it fails.
    fn run(&self, root: &Path) -> Ran {
        let logs = root.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let (script, blocks) = self.script(&logs);
        assert!(blocks > 0, "{}: no command block to run", self.doc);
        std::fs::write(root.join("script.sh"), &script).unwrap();
        let bin = Path::new(ARBITER).parent().unwrap().display().to_string();
        let (stdout_file, stderr_file) = (root.join("stdout"), root.join("stderr"));
        let mut cmd = Command::new("bash");
        cmd.arg(root.join("script.sh"))
            .current_dir(root)
            .env("PATH", format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()))
            .env("HOME", &home)
            .env_remove("ARBITER_CACHE_DIR")
            .env_remove("ARBITER_CONFIG_DIR")
            .env_remove("ARBITER_SERVER")
            .env_remove("ARBITER_TOKEN")
            .env_remove("ARBITER_BOOTSTRAP_TOKEN")
            .env_remove("ARBITER_ADMIN_TOKEN")
            .env_remove("ARBITER_DATABASE_URL")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_file).unwrap())
            .stderr(std::fs::File::create(&stderr_file).unwrap())
            // Its own process group: whatever it leaves running is stopped with it.
            .process_group(0);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start bash");
        let group = nix::unistd::Pid::from_raw(child.id() as i32);
        // A guard against a hang, not a measure: the walkthroughs take a minute or two.
        let finished = wait_until(Duration::from_secs(600), || child.try_wait().ok().flatten().is_some());
        let status = if finished { child.try_wait().ok().flatten() } else { None };
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        wait_until(Duration::from_secs(15), || processes_in_group(group.as_raw()).is_empty());
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
        let ran = Ran {
            stdout: std::fs::read_to_string(&stdout_file).unwrap_or_default(),
            stderr: std::fs::read_to_string(&stderr_file).unwrap_or_default(),
        };
        if !status.is_some_and(|s| s.success()) {
            let mut service_logs = String::new();
            for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                service_logs.push_str(&format!("--- {} ---\n{text}\n", entry.path().display()));
            }
            panic!(
                "{}: the commands failed ({status:?}; the last `==` line names the block)\n--- script ---\n{script}\n--- stdout ---\n{}\n--- stderr ---\n{}\n{service_logs}",
                self.doc, ran.stdout, ran.stderr
            );
        }
        ran
    }
}

/// The processes of process group `group`.
fn processes_in_group(group: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().nth(2).map(str::to_string)))
                .flatten()
                .is_some_and(|pgrp| pgrp == group.to_string())
        })
        .collect()
}

fn other_port(taken: &[u16]) -> u16 {
    loop {
        let p = free_port();
        if !taken.contains(&p) {
            return p;
        }
    }
}

/// docs/distributed.md from its first block to its last: the walkthrough on one machine (a
/// server, two workers, a plan of two tasks), then the TLS control plane on Postgres made as
/// the guide makes it, a worker registered and run against it with `--ca-cert` — in an
/// environment whose `GIT_SSL_CAINFO` names another bundle, as many machines' do. The test
/// then gives that control plane a plan of its own: the worker, alone on it, must fetch the
/// plan's repository over git through TLS and do both tasks.
#[test]
fn the_distributed_guide_runs_as_written_tls_included() {
    let dir = tempfile::Builder::new().prefix("arbiter-doc-distributed-").tempdir().unwrap();
    let root = dir.path();
    let pg = PgDatabase::create();
    let loopback = free_port();
    let tls = other_port(&[loopback]);
    let run = DocRun::new("docs/distributed.md")
        .substitute("/tmp/walk", root.join("walk").display().to_string())
        .substitute("127.0.0.1:7878", format!("127.0.0.1:{loopback}"))
        // A server certificate names its host; the test's host is this one.
        .substitute("0.0.0.0:7878", format!("0.0.0.0:{tls}"))
        .substitute("cp.example:7878", format!("localhost:{tls}"))
        .substitute("cp.example", "localhost")
        .substitute("ARBITER_BOOTSTRAP_TOKEN=...", "ARBITER_BOOTSTRAP_TOKEN=$ARBITER_BOOTSTRAP_TOKEN")
        .substitute("ARBITER_ADMIN_TOKEN=...", "ARBITER_ADMIN_TOKEN=$ARBITER_ADMIN_TOKEN")
        .substitute("postgres://arbiter@db/arbiter", pg.url.clone())
        .substitute("/var/lib/arbiter/server", root.join("cp-data").display().to_string());
    let run = DocRun {
        // Another bundle in git's environment: a CA that signed nothing here.
        before: format!(
            "openssl req -x509 -newkey ed25519 -days 1 -nodes -subj /CN=elsewhere -keyout {0}/other.key -out {0}/other-bundle.pem 2>/dev/null\nexport GIT_SSL_CAINFO={0}/other-bundle.pem",
            root.display()
        ),
        after: format!(
            r#"cd {walk}
git clone -q calc calc-tls
sed -e 's/^id = "calc"/id = "calc-tls"/' -e "s|^repository = .*|repository = \"$PWD/calc-tls\"|" calc/plan.toml > calc-tls.toml
TLS="--server https://localhost:{tls} --ca-cert cert.pem"
arbiter plan apply calc-tls.toml $TLS
while arbiter plan status calc-tls $TLS | grep -qE '^[0-9]+ task\(s\):.*(ready|running)'; do sleep 1; done
arbiter plan status calc-tls $TLS
arbiter worker list $TLS
git -C calc-tls show arbiter/calc-tls:calc.py
"#,
            walk = root.join("walk").display()
        ),
        ..run
    };
    let ran = run.run(root);
    // The walkthrough, then the plan through TLS: both tasks done each time, both fixes on
    // each integration branch.
    assert_eq!(ran.stdout.matches("2 task(s): done 2").count(), 2, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(ran.stdout.matches("return a * b").count(), 2, "{}", ran.stdout);
    assert_eq!(ran.stdout.matches("return a + b").count(), 2, "{}", ran.stdout);
    // The TLS control plane's only worker did its plan.
    let tls_workers = ran.stdout.rsplit("2 task(s): done 2").next().unwrap_or_default();
    assert!(tls_workers.contains("gpu-box-1") && tls_workers.contains("connected"), "{}", ran.stdout);
    assert!(!tls_workers.contains("w1") && !tls_workers.contains("w2"), "{}", ran.stdout);
}

/// The certificate the guide's recipe once made (a CA, as `openssl req -x509` makes by
/// default) is refused by every client; arbiter says so, with the fix, instead of "cannot
/// reach". The fixed recipe's certificate is accepted by the same client.
#[test]
fn a_ca_certificate_served_as_the_server_s_own_is_named_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let make = |name: &str, extra: &[&str]| {
        let mut args = vec!["req", "-x509", "-newkey", "ed25519", "-days", "1", "-nodes", "-subj", "/CN=localhost"];
        args.extend(["-addext", "subjectAltName=DNS:localhost"]);
        args.extend(extra);
        let (key, cert) = (format!("{name}-key.pem"), format!("{name}.pem"));
        args.extend(["-keyout", key.as_str(), "-out", cert.as_str()]);
        let out = Command::new("openssl").args(&args).current_dir(dir.path()).output().expect("openssl");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (dir.path().join(key).display().to_string(), dir.path().join(cert).display().to_string())
    };
    for (name, extra, fine) in
        [("ca", &[][..], false), ("leaf", &["-addext", "basicConstraints=critical,CA:FALSE"][..], true)]
    {
        let (key, cert) = make(name, extra);
        let serve = Serve::start(&["--tls-cert", cert.as_str(), "--tls-key", key.as_str()], None);
        let url = serve.url.replace("127.0.0.1", "localhost");
        assert!(url.starts_with("https://localhost:"), "{url}");
        let token = dir.path().join(format!("{name}.token")).display().to_string();
        let register = serve.cli(
            dir.path(),
            &["worker", "register", "--server", &url, "--ca-cert", &cert, "--name", name, "--token-file", &token],
            &[("ARBITER_BOOTSTRAP_TOKEN", BOOTSTRAP)],
        );
        if fine {
            register.assert_code(0);
            continue;
        }
        register.assert_code(2);
        assert!(
            register.stderr.contains("presents a CA certificate as its own (CaUsedAsEndEntity)")
                && register.stderr.contains("-addext basicConstraints=critical,CA:FALSE")
                && !register.stderr.contains("cannot reach"),
            "{}",
            register.stderr
        );
    }
}

/// The README's quick start, in a repository like the one it assumes (`your-repo`: a
/// calculator whose test fails, and the agent script it names, not committed), with the
/// model server of the built-in agent's example played by `arbiter mock-llm`.
#[test]
fn the_readme_quick_start_runs_as_written() {
    let dir = tempfile::Builder::new().prefix("arbiter-doc-readme-").tempdir().unwrap();
    let root = dir.path();
    let repo = root.join("your-repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_in(&repo, &["init", "-q", "-b", "main"]);
    git_in(&repo, &["config", "user.name", "you"]);
    git_in(&repo, &["config", "user.email", "you@example.com"]);
    std::fs::write(repo.join("calc.py"), CALC_PY).unwrap();
    std::fs::write(repo.join("test_calc.py"), TEST_CALC_PY).unwrap();
    std::fs::write(repo.join(".gitignore"), "__pycache__/\n").unwrap();
    std::fs::write(repo.join("my-agent.sh"), "#!/bin/sh\nsed -i 's/return a - b/return a + b/' calc.py\n").unwrap();
    set_mode(&repo.join("my-agent.sh"), 0o755);
    // The plan the quick start applies (committed): two dependent tasks, each appending to
    // NOTES.md.
    std::fs::write(
        repo.join("plan.toml"),
        r#"id = "calc"
name = "Notes on calc"

[defaults]
runners = "command"
command = "sed -n 's/^(Task \\([^ ]*\\) of plan.*/- \\1/p' \"$ARBITER_PROMPT_FILE\" >> NOTES.md"
verify = ["python3 -m unittest -q"]

[[tasks]]
id = "notes"
title = "Start NOTES.md"
description = "Start NOTES.md with a line naming this task."
acceptance_criteria = ["NOTES.md exists"]

[[tasks]]
id = "more-notes"
title = "Add to NOTES.md"
description = "Add a line naming this task to NOTES.md."
acceptance_criteria = ["NOTES.md has two lines"]
dependencies = ["notes"]
"#,
    )
    .unwrap();
    git_in(&repo, &["add", "calc.py", "test_calc.py", ".gitignore", "plan.toml"]);
    git_in(&repo, &["commit", "-qm", "calc with a bug, and a plan"]);
    // Every candidate of the built-in agent gets the same two turns: an edit, then done.
    let mock = MockLlm::start(&json!({"turns": "history", "responses": [
        {"text": "sub is missing; adding it.", "tool_calls": [{"name": "edit_file", "arguments": {
            "path": "calc.py", "old": "def mul(a, b):", "new": "def sub(a, b):\n    return a - b\n\n\ndef mul(a, b):"}}]},
        {"text": "Done.", "tool_calls": [{"name": "finish", "arguments": {"summary": "sub() added."}}]},
    ]}));
    let run = DocRun {
        heading: Some("## Quick start"),
        ..DocRun::new("README.md")
            // The build under test is the `arbiter` on PATH.
            .substitute("cargo install --path crates/arbiter-cli --locked", ":")
            .substitute("http://127.0.0.1:8080/v1", mock.openai_url())
    };
    let ran = run.run(root);
    // Two runs with a winner each: the fix committed, then sub() added by the built-in agent.
    assert_eq!(ran.stdout.matches("Winner: c0").count(), 2, "{}\n{}", ran.stdout, ran.stderr);
    let calc = std::fs::read_to_string(repo.join("calc.py")).unwrap();
    assert!(calc.contains("return a + b") && calc.contains("def sub(a, b)"), "{calc}");
    assert!(git_in(&repo, &["log", "-1", "--format=%s"]).contains("Fix add"));
    // The plan: both tasks done, one after the other, on its integration branch.
    assert!(ran.stdout.contains("2 task(s): done 2"), "{}", ran.stdout);
    assert_eq!(git_in(&repo, &["show", "arbiter/calc:NOTES.md"]), "- notes\n- more-notes\n");
}

/// docs/security.md's commands: the seal of a demo's run holds, and an edit breaks it.
#[test]
fn the_security_guide_s_commands_run_as_written() {
    let dir = tempfile::Builder::new().prefix("arbiter-doc-security-").tempdir().unwrap();
    let root = dir.path();
    let run = DocRun::new("docs/security.md").substitute("/tmp/sealed", root.join("sealed").display().to_string());
    let ran = run.run(root);
    assert!(ran.stdout.contains("files match manifest.json"), "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("changed     final_report.md"), "{}", ran.stdout);
}

/// The reading of a document: blocks in order, the languages that are commands, console
/// prompts, heredocs left alone, services put in the background, a block without a language
/// refused.
#[test]
fn documents_are_read_block_by_block() {
    let md = "# t\n\n```sh\necho one\n```\n\n## Other\n\n```toml\nx = 1\n```\n\n```console\n$ echo two \\\n  more\nout\n```\n";
    let blocks = fenced_blocks("t.md", md, None);
    assert_eq!(
        blocks.iter().map(|b| (b.line, b.lang.as_str())).collect::<Vec<_>>(),
        [(3, "sh"), (9, "toml"), (13, "console")]
    );
    assert_eq!(commands_of(&blocks[2]), "echo two \\\n  more\n");
    assert_eq!(fenced_blocks("t.md", md, Some("## Other")).len(), 2);
    let unnamed = std::panic::catch_unwind(|| fenced_blocks("t.md", "```\nls\n```\n", None));
    assert!(unnamed.is_err(), "a block without a language is refused");
    let logs = PathBuf::from("/logs");
    let mut n = 0;
    let text = "cat > a <<'X'\narbiter serve --bind 1:2\nX\nA=1 arbiter serve --bind 127.0.0.1:99 \\\n  --tls-cert c\narbiter worker run --slots 2 > w.log 2>&1 &\narbiter worker run --once\n";
    let out = backgrounded(text, &logs, &mut n);
    assert_eq!(
        out,
        "cat > a <<'X'\narbiter serve --bind 1:2\nX\nA=1 arbiter serve --bind 127.0.0.1:99 \\\n  --tls-cert c > /logs/service-1.log 2>&1 &\ndoc_wait_for_port 99 $! /logs/service-1.log\narbiter worker run --slots 2 > w.log 2>&1 &\narbiter worker run --once > /logs/service-2.log 2>&1 &\n"
    );
}
