//! End-to-end tests of feature slices (`arbiter feature`, `arbiter qa`, `arbiter rules`)
//! and of the rules gate and repair loop any run can use: the real binary, real git
//! repositories (and bare remotes) in temporary directories, real Python for the syntax
//! trees and the slices' tests, and the scripted model server over real HTTP for specs,
//! spec QA and the built-in agent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::{Value, json};

/// The project's shared logger, as orch.py's projects have it.
const LOGGER_PY: &str =
    "import logging\n\n\ndef logging_func(name: str) -> logging.Logger:\n    return logging.getLogger(name)\n";

/// A template set whose tests run with unittest (this machine's Python has no pytest).
const UNIT_HANDLER: &str = "from typing import Any, Dict\n\nfrom shared.logger import logging_func\n\nlogger = logging_func(__name__)\n\n\nclass {{name}}Handler:\n    def execute(self, **kwargs: Any) -> Dict[str, Any]:\n        logger.info(\"{{name}}.execute called\")\n        return {\"status\": \"ok\"}\n";
const UNIT_TESTS: &str = "import unittest\n\nfrom .Handler import {{name}}Handler\n\n\nclass Test{{name}}Handler(unittest.TestCase):\n    def test_execute_returns_ok(self) -> None:\n        self.assertEqual({{name}}Handler().execute()[\"status\"], \"ok\")\n";

/// A uv-style Python project with the shared logger, `arbiter init` done, the `unit`
/// template set and a unittest test command.
fn slice_repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("shared/__init__.py", "");
    repo.write("shared/logger.py", LOGGER_PY);
    repo.write(".python-version", "3.11\n");
    repo.write("pyproject.toml", "[project]\nname = \"shop\"\nversion = \"0.1.0\"\n");
    repo.write("README.md", "# shop\n");
    repo.write(".gitignore", "__pycache__/\n");
    repo.commit_all("shop");
    repo.arbiter(&["init"]).assert_code(0);
    repo.write(".arbiter/templates/unit/Handler.py", UNIT_HANDLER);
    repo.write(".arbiter/templates/unit/Tests.py", UNIT_TESTS);
    repo.write(".arbiter/templates/unit/__init__.py", "");
    append_config(&repo, "[slices]\ntest_command = \"python3 -m unittest -q {tests}\"\ntemplate = \"unit\"\n");
    repo
}

fn append_config(repo: &TestRepo, text: &str) {
    let path = repo.arbiter_dir().join("config.toml");
    let old = fs::read_to_string(&path).unwrap_or_default();
    fs::write(&path, format!("{old}\n{text}")).expect("write config.toml");
}

/// `arbiter backend add NAME` on the mock, for `role`.
fn add_backend(repo: &TestRepo, name: &str, mock: &MockLlm, role: &str) {
    let url = mock.openai_url();
    let args = [
        "backend",
        "add",
        name,
        "--provider",
        "openai-compatible",
        "--model",
        "m",
        "--base-url",
        &url,
        "--roles",
        role,
    ];
    repo.arbiter(&args).assert_code(0);
}

/// `arbiter run` of `./agent.sh`, one candidate, with the rules gate (and `extra`).
fn gated_run(repo: &TestRepo, extra: &[&str]) -> Run {
    let mut args = vec![
        "run",
        "--task",
        "add app.py",
        "--command",
        "./agent.sh",
        "--candidates",
        "1",
        "--verify",
        "true",
        "--rules",
    ];
    args.extend_from_slice(extra);
    repo.arbiter(&args)
}

fn branch(repo: &TestRepo) -> String {
    repo.git(&["branch", "--show-current"]).trim().to_string()
}

fn last_subject(repo: &TestRepo, rev: &str) -> String {
    repo.git(&["log", "-1", "--format=%s", rev]).trim().to_string()
}

/// A bare repository as `origin`, holding `main`.
fn add_remote(repo: &TestRepo) -> tempfile::TempDir {
    let remote = tempfile::tempdir().expect("temp dir");
    git_in(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    repo.git(&["remote", "add", "origin", remote.path().to_str().expect("utf-8")]);
    repo.git(&["push", "-q", "origin", "main"]);
    remote
}

fn remote_heads(remote: &Path) -> String {
    git_in(remote, &["for-each-ref", "--format=%(refname:short)", "refs/heads"])
}

#[test]
fn new_without_a_model_uses_the_template_says_so_and_commits_slice_and_registry_together() {
    let repo = slice_repo();
    let run = repo.arbiter(&["feature", "new", "billing/Invoice", "Create an invoice from an order; totals in cents"]);
    run.assert_code(0);
    assert!(run.stderr.contains("no `spec` role backend is configured"), "{}", run.stderr);
    assert!(
        run.stdout.contains("Created billing/Invoice in features/billing/Invoice on the branch billing/Invoice"),
        "{}",
        run.stdout
    );
    assert_eq!(branch(&repo), "billing/Invoice");
    assert_eq!(last_subject(&repo, "HEAD"), "new: billing/Invoice");
    assert!(repo.status().is_empty(), "the registry is committed with the slice: {:?}", repo.status());
    let committed = repo.git(&["show", "--name-only", "--format=", "HEAD"]);
    for f in [
        ".features.json",
        "features/billing/Invoice/spec.md",
        "features/billing/Invoice/Handler.py",
        "features/billing/Invoice/Tests.py",
    ] {
        assert!(committed.lines().any(|l| l == f), "{f} not in the commit:\n{committed}");
    }
    let spec = repo.read("features/billing/Invoice/spec.md");
    assert!(spec.starts_with("# Invoice — Billing Feature\n"), "{spec}");
    assert!(spec.contains("## Overview\n\nCreate an invoice from an order; totals in cents\n"), "{spec}");
    assert!(repo.read("features/billing/Invoice/Handler.py").contains("class InvoiceHandler:"));
    let registry: Value = serde_json::from_str(&repo.read(".features.json")).unwrap();
    assert_eq!(registry["known_features"]["Invoice"], "billing");
    assert_eq!(registry["domain_keywords"]["invoice"], json!(["billing", "Invoice"]));

    // Never written over: exit 2 and the fix; the fix works.
    let again = repo.arbiter(&["feature", "new", "billing/Invoice", "Something else"]);
    again.assert_code(2);
    assert!(
        again.stderr.contains("features/billing/Invoice already exists") && again.stderr.contains("--force"),
        "{}",
        again.stderr
    );
    assert_eq!(repo.read("features/billing/Invoice/spec.md"), spec);
    repo.arbiter(&["feature", "new", "billing/Invoice", "Something else", "--force"]).assert_code(0);
    assert!(repo.read("features/billing/Invoice/spec.md").contains("Something else"));

    // A new branch needs a clean tree; committing is the fix.
    repo.git(&["switch", "-q", "main"]);
    repo.write("README.md", "# shop, edited\n");
    let dirty = repo.arbiter(&["feature", "new", "billing/Refund", "Refund an invoice"]);
    dirty.assert_code(2);
    assert!(dirty.stderr.contains("uncommitted changes (README.md); commit or stash them first"), "{}", dirty.stderr);
    assert_eq!(branch(&repo), "main");
    repo.commit_all("readme");
    repo.arbiter(&["feature", "new", "billing/Refund", "Refund an invoice"]).assert_code(0);
    assert_eq!(branch(&repo), "billing/Refund");
    assert_eq!(repo.git(&["rev-parse", "billing/Refund~1"]), repo.git(&["rev-parse", "main"]), "branched from main");

    // orch.py's own slice: the default set, Controller.py left out, every shipped rule passes.
    repo.git(&["switch", "-q", "main"]);
    repo.arbiter(&["feature", "new", "Payments", "Take a payment", "--template", "python", "--no-controller"])
        .assert_code(0);
    assert_eq!(branch(&repo), "nodomain/Payments");
    let files: Vec<String> = fs::read_dir(repo.path().join("features/nodomain/Payments"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for f in ["Schema.py", "Handler.py", "Tests.py", "__init__.py", "spec.md"] {
        assert!(files.contains(&f.to_string()), "{f}: {files:?}");
    }
    assert!(!files.contains(&"Controller.py".to_string()), "{files:?}");
    let check = repo.arbiter(&["rules", "check", "features/nodomain/Payments"]);
    check.assert_code(0);
}

/// Spec writing and QA on the mock model: the first QA round finds issues and corrects the
/// spec, the second finds the correction valid; both rounds are recorded.
#[test]
fn new_with_a_model_writes_the_spec_and_spec_qa_checks_it_in_rounds() {
    let draft = "# Invoice — Billing Feature\n\n## Overview\n\nAn invoice from an order.\n";
    let corrected = "# Invoice — Billing Feature\n\n## Overview\n\nAn invoice from an order; totals in cents.\n\n## Error Cases\n\n| Condition | Error | Message |\n|---|---|---|\n| no lines | ValueError | an invoice needs lines |\n";
    let issues = json!({"verdict": "issues", "issues": ["totals in cents are not said", "no error cases"], "corrected_spec": corrected});
    let mock = MockLlm::start(&json!({"responses": [
        {"match": {"contains": "You are a spec writer"}, "text": format!("```markdown\n{draft}```")},
        {"match": {"contains": "spec QA validator"}, "text": issues.to_string()},
        {"match": {"contains": "spec QA validator"}, "text": "{\"verdict\": \"valid\"}"},
    ]}));
    let repo = slice_repo();
    add_backend(&repo, "writer", &mock, "spec");
    let run = repo.arbiter(&["feature", "new", "billing/Invoice", "Create an invoice from an order; totals in cents"]);
    run.assert_code(0);
    assert!(run.stdout.contains("Spec QA: valid (2 round(s)"), "{}", run.stdout);
    assert!(!run.stderr.contains("template"), "{}", run.stderr);
    assert_eq!(repo.read("features/billing/Invoice/spec.md"), corrected);
    let records = repo.arbiter_dir().join("features/billing/Invoice");
    assert_eq!(fs::read_to_string(records.join("spec-draft.md")).unwrap(), draft);
    let round1 = read_json(&records.join("spec-qa-new-1.json"));
    assert_eq!(round1["verdict"]["verdict"], "issues", "{round1:#}");
    assert_eq!(round1["corrected"], true);
    assert_eq!(read_json(&records.join("spec-qa-new-2.json"))["verdict"]["verdict"], "valid");
    assert!(!records.join("spec-qa-new-3.json").exists());
    assert!(repo.status().is_empty(), "{:?}", repo.status());
}

/// `modify` records a dated amendment (request, resolution, QA verdict) in spec.md; QA gets
/// the original request and every amendment (the mock only answers "valid" to a request
/// holding both), and the amendment is committed on the slice's branch.
#[test]
fn modify_records_an_amendment_checked_against_the_original_intent() {
    let repo = slice_repo();
    repo.arbiter(&["feature", "new", "billing/Invoice", "Create an invoice from an order; totals in cents"])
        .assert_code(0);
    repo.git(&["switch", "-q", "main"]);
    // Without a model: recorded as is, said so.
    let plain = repo.arbiter(&["feature", "modify", "billing/Invoice", "Add VAT per line"]);
    plain.assert_code(0);
    assert_eq!(branch(&repo), "billing/Invoice", "modify works on the slice's branch");
    let spec = repo.read("features/billing/Invoice/spec.md");
    assert!(spec.contains("## Amendments\n\n### Amendment 1 — "), "{spec}");
    assert!(spec.contains("#### Request\n\nAdd VAT per line\n\n#### Resolution\n\nRecorded without a model"), "{spec}");
    assert!(spec.contains("#### QA verdict\n\nnot run (no model)"), "{spec}");
    assert_eq!(last_subject(&repo, "HEAD"), "modify: billing/Invoice (amendment 1)");
    assert!(repo.status().is_empty());

    let amended = "# Invoice — Billing Feature\n\n## Overview\n\nAn invoice from an order; totals in cents, VAT per line, rounded half up.\n";
    let mock = MockLlm::start(&json!({"responses": [
        {"match": {"contains": "You amend the spec"}, "text": json!({"resolution": "Each line's VAT is rounded half up to the cent.", "spec": amended}).to_string(), "repeat": true},
        {"match": {"contains": "## Amendment 2 request\\n\\nRound VAT half up"}, "text": "{\"verdict\": \"valid\"}", "repeat": true},
    ]}));
    add_backend(&repo, "writer", &mock, "spec");
    // The target from the current branch, the change as the only word.
    let run = repo.arbiter(&["feature", "modify", "Round VAT half up"]);
    run.assert_code(0);
    assert!(run.stdout.contains("Amendment 2 recorded"), "{}", run.stdout);
    assert!(run.stdout.contains("QA verdict: valid"), "{}", run.stdout);
    let spec = repo.read("features/billing/Invoice/spec.md");
    assert!(spec.starts_with(amended), "the body is the amended spec:\n{spec}");
    assert!(spec.contains("### Amendment 1 — ") && spec.contains("### Amendment 2 — "), "{spec}");
    assert!(spec.contains("#### Resolution\n\nEach line's VAT is rounded half up to the cent."), "{spec}");
    assert_eq!(spec.matches("## Amendments").count(), 1);
    let qa = read_json(&repo.arbiter_dir().join("features/billing/Invoice/spec-qa-amend-2-1.json"));
    assert_eq!(qa["verdict"]["verdict"], "valid", "{qa:#}");
    assert_eq!(last_subject(&repo, "HEAD"), "modify: billing/Invoice (amendment 2)");

    // From an editor: the slice of the file open in it.
    repo.git(&["switch", "-q", "main"]);
    let from_editor = repo
        .arbiter_cmd(&["feature", "modify", "Keep invoices immutable"])
        .env("ARBITER_CURRENT_FILE", repo.path().join("features/billing/Invoice/Handler.py"))
        .output()
        .map(Run::from_output)
        .unwrap();
    from_editor.assert_code(0);
    assert!(
        from_editor.stdout.contains("Amendment 3 recorded in the spec of billing/Invoice"),
        "{}",
        from_editor.stdout
    );
    // From Neovim: its server names the buffer (a stand-in `nvim` answers the remote query).
    repo.git(&["switch", "-q", "main"]);
    let bin = tempfile::tempdir().unwrap();
    let handler = repo.path().join("features/billing/Invoice/Handler.py");
    let fake = bin.path().join("nvim");
    fs::write(
        &fake,
        format!(
            "#!/bin/sh\n[ \"$3\" = /tmp/nvim.sock ] && [ \"$5\" = \"expand('%:p')\" ] && echo {}\n",
            handler.display()
        ),
    )
    .unwrap();
    set_mode(&fake, 0o755);
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let from_nvim = repo
        .arbiter_cmd(&["feature", "modify", "Invoices are numbered per year"])
        .env("NVIM", "/tmp/nvim.sock")
        .env("PATH", path)
        .output()
        .map(Run::from_output)
        .unwrap();
    from_nvim.assert_code(0);
    assert!(from_nvim.stdout.contains("Amendment 4 recorded in the spec of billing/Invoice"), "{}", from_nvim.stdout);
    // No target, no slice branch, no editor: exit 2 with the ways to name one.
    repo.git(&["switch", "-q", "main"]);
    let nothing = repo.arbiter(&["feature", "modify", "Change something"]);
    nothing.assert_code(2);
    assert!(nothing.stderr.contains("name the slice to modify"), "{}", nothing.stderr);
}

/// The built-in agent on the mock model first writes a slice that breaks two rules and a
/// test; the repair loop gives it the violations and the failing test, it fixes both, and
/// the winner is committed as `feat: Invoice` and pushed to the bare remote.
#[test]
fn do_repairs_a_rule_violation_and_a_failing_test_and_commits_the_winner() {
    let repo = slice_repo();
    let remote = add_remote(&repo);
    repo.arbiter(&["feature", "new", "billing/Invoice", "Create an invoice from an order; totals in cents"])
        .assert_code(0);
    let bad_handler = "import os\nfrom typing import Any, Dict\n\nfrom shared.logger import logging_func\n\nlogger = logging_func(__name__)\n\n\nclass InvoiceHandler:\n    # totals in cents\n    def execute(self, **kwargs: Any) -> Dict[str, Any]:\n        logger.info(\"Invoice.execute called\")\n        return {\"status\": \"ok\", \"total\": 0}\n";
    let good_handler = "from typing import Any, Dict\n\nfrom shared.logger import logging_func\n\nlogger = logging_func(__name__)\n\n\nclass InvoiceHandler:\n    def execute(self, **kwargs: Any) -> Dict[str, Any]:\n        logger.info(\"Invoice.execute called\")\n        return {\"status\": \"ok\", \"total\": sum(kwargs.get(\"lines\", []))}\n";
    let tests = "import unittest\n\nfrom .Handler import InvoiceHandler\n\n\nclass TestInvoiceHandler(unittest.TestCase):\n    def test_total_is_the_sum_of_the_lines_in_cents(self) -> None:\n        self.assertEqual(InvoiceHandler().execute(lines=[150, 250])[\"total\"], 400)\n";
    let write = |path: &str, content: &str| json!({"name": "write_file", "arguments": {"path": format!("features/billing/Invoice/{path}"), "content": content}});
    let finish = |s: &str| json!({"name": "finish", "arguments": {"summary": s}});
    let mock = MockLlm::start(&json!({"responses": [
        {"text": "Writing the slice.", "tool_calls": [write("Handler.py", bad_handler), write("Tests.py", tests)]},
        {"text": "Done.", "tool_calls": [finish("wrote the slice")]},
        {"match": {"contains": "Gate failures (repair round 1 of 3)"}, "text": "Fixing what the gates found.", "tool_calls": [write("Handler.py", good_handler)]},
        {"text": "Fixed.", "tool_calls": [finish("removed the comment and the unused import; the total is the sum")]},
    ]}));
    add_backend(&repo, "b1", &mock, "coding");
    let run = repo.arbiter(&[
        "feature",
        "do",
        "--runner",
        "builtin",
        "--backend",
        "b1",
        "--candidates",
        "1",
        "--timeout-seconds",
        "120",
        "--json",
    ]);
    run.assert_code(0);
    let doc = assert_schema("feature-do", &run.stdout);
    assert_eq!(doc["winner"], "c01", "{doc:#}");
    assert_eq!(doc["pushed"], true, "{doc:#}");
    assert_eq!(doc["candidates"][0]["repair_rounds"], 2, "{doc:#}");
    assert!(run.stderr.contains("c01 repair round 1/3: back to the agent"), "{}", run.stderr);

    let run_dir = repo.run_dir();
    let round1 = read_json(&run_dir.join("candidates/c01/repair/round-1.json"));
    let failing: Vec<&str> = round1["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .map(|g| g["gate"].as_str().unwrap())
        .collect();
    assert_eq!(
        failing,
        vec!["python3 -m unittest -q features/billing/Invoice/Tests.py", "arbiter rules check"],
        "{round1:#}"
    );
    assert!(read_json(&run_dir.join("candidates/c01/repair/round-2.json")).get("feedback").is_none());
    // The feedback is in the transcript: the agent's second run starts with it.
    let transcript = read_json_lines(&run_dir.join("candidates/c01/transcript.jsonl"));
    let users: Vec<&str> =
        transcript.iter().filter(|e| e["type"] == "user").filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(users.len(), 2, "{transcript:#?}");
    let feedback = users[1];
    for expected in [
        "## Gate failures (repair round 1 of 3)",
        "features/billing/Invoice/Handler.py:1 'os' imported but unused",
        "features/billing/Invoice/Handler.py:10 comments not allowed",
        "test_total_is_the_sum_of_the_lines_in_cents",
        "AssertionError: 0 != 400",
    ] {
        assert!(feedback.contains(expected), "{expected} not in the feedback:\n{feedback}");
    }

    assert_eq!(branch(&repo), "billing/Invoice");
    assert_eq!(last_subject(&repo, "HEAD"), "feat: Invoice");
    assert_eq!(repo.read("features/billing/Invoice/Handler.py"), good_handler);
    assert!(repo.status().is_empty(), "{:?}", repo.status());
    assert!(remote_heads(remote.path()).lines().any(|b| b == "billing/Invoice"), "pushed");
    assert_eq!(git_in(remote.path(), &["log", "-1", "--format=%s", "billing/Invoice"]).trim(), "feat: Invoice");
    assert_eq!(last_subject(&repo, "main"), "shop", "do never merges");
}

/// A candidate that never gets its slice right: exit 1, its last gate failures in the
/// report, and the branch as it was.
#[test]
fn do_without_an_acceptable_candidate_exits_1_and_leaves_the_branch_alone() {
    let repo = slice_repo();
    repo.arbiter(&["feature", "new", "billing/Invoice", "Totals in cents"]).assert_code(0);
    repo.write_agent("agent.sh", "printf 'import os\\n' > features/billing/Invoice/Handler.py\n");
    repo.commit_all("agent");
    let before = repo.head();
    let apply = repo.arbiter(&["feature", "do", "--command", "./agent.sh", "--apply", "none"]);
    apply.assert_code(2);
    assert!(apply.stderr.contains("leave out --apply"), "{}", apply.stderr);
    let run = repo.arbiter(&["feature", "do", "--command", "./agent.sh", "--candidates", "1", "--repair-rounds", "1"]);
    run.assert_code(1);
    assert!(run.stdout.contains("failing gate `arbiter rules check`"), "{}", run.stdout);
    assert!(run.stdout.contains("features/billing/Invoice/Handler.py:1 'os' imported but unused"), "{}", run.stdout);
    assert!(run.stdout.contains("nothing was applied and billing/Invoice is as it was"), "{}", run.stdout);
    assert_eq!(repo.head(), before);
    assert!(repo.status().is_empty(), "{:?}", repo.status());
    assert!(repo.run_dir().join("candidates/c01/repair/round-1.json").is_file());
}

/// Three registered slices: one passes, one fails its test, one breaks a rule. A failing
/// test fails qa; a rule only with --strict.
#[test]
fn qa_checks_every_slice_and_fails_on_a_failing_test() {
    let repo = slice_repo();
    for (target, prompt) in
        [("billing/Invoice", "Invoices"), ("billing/Refund", "Refunds"), ("shipping/Parcel", "Parcels")]
    {
        repo.git(&["switch", "-q", "main"]);
        repo.arbiter(&["feature", "new", target, prompt]).assert_code(0);
        repo.arbiter(&["feature", "merge"]).assert_code(0);
    }
    assert_eq!(branch(&repo), "main");
    let registry: Value = serde_json::from_str(&repo.read(".features.json")).unwrap();
    assert_eq!(registry["known_features"].as_object().unwrap().len(), 3, "{registry:#}");
    repo.write(
        "features/billing/Refund/Handler.py",
        repo.read("features/billing/Refund/Handler.py").replace("\"ok\"", "\"refunded\""),
    );
    let parcel = repo.read("features/shipping/Parcel/Handler.py");
    repo.write(
        "features/shipping/Parcel/Handler.py",
        parcel.replace("logger = logging_func", "# the logger\nlogger = logging_func"),
    );
    repo.commit_all("break two slices");

    let run = repo.arbiter(&["qa"]);
    run.assert_code(1);
    assert!(run.stdout.contains("billing/Invoice  ok          passed"), "{}", run.stdout);
    assert!(run.stdout.contains("billing/Refund   ok          FAILED"), "{}", run.stdout);
    assert!(run.stdout.contains("shipping/Parcel  1 issue(s)  passed"), "{}", run.stdout);
    assert!(run.stdout.contains("features/shipping/Parcel/Handler.py:5 comments not allowed"), "{}", run.stdout);
    assert!(run.stdout.contains("AssertionError: 'refunded' != 'ok'"), "{}", run.stdout);
    assert!(
        run.stdout.contains("Summary: 2 passed, 1 failed, 0 without tests, 1 violation(s), 3 feature slices"),
        "{}",
        run.stdout
    );
    let json_run = repo.arbiter(&["qa", "--json"]);
    json_run.assert_code(1);
    let doc = assert_schema("qa", &json_run.stdout);
    assert_eq!((doc["tests_passed"].as_u64(), doc["tests_failed"].as_u64()), (Some(2), Some(1)), "{doc:#}");

    repo.write(
        "features/billing/Refund/Handler.py",
        repo.read("features/billing/Refund/Handler.py").replace("\"refunded\"", "\"ok\""),
    );
    repo.commit_all("fix the refund");
    repo.arbiter(&["qa"]).assert_code(0);
    let strict = repo.arbiter(&["qa", "--strict"]);
    strict.assert_code(1);
    assert!(strict.stdout.contains("(--strict: they fail qa)"), "{}", strict.stdout);
}

/// orch.py's rule format written by hand: every kind and filter on the research file's
/// examples, py-ast checks on Python's own syntax tree.
#[test]
fn every_rule_kind_and_filter_of_orch_py_s_format_works_on_real_files() {
    let repo = TestRepo::new();
    repo.write(
        ".agents/rules/python/core.json",
        r##"{
  "lang": "python",
  "checks": [
    {"id": "comment", "group": "standards", "kind": "line", "pattern": "^\\s*#", "exclude": ["noqa", "# -*-", "#!/"], "message": "comments not allowed"},
    {"id": "no-print", "group": "standards", "kind": "line", "pattern": "print\\(", "exclude": ["logger"], "message": "print() not allowed"},
    {"id": "no-emoji", "group": "standards", "kind": "line", "pattern": "[\\U0001F600-\\U0010FFFF]", "message": "emojis not allowed"},
    {"id": "return-types", "group": "standards", "kind": "py-ast", "check": "return_annotations", "message": "missing return type"},
    {"id": "bare-none", "group": "standards", "kind": "py-ast", "check": "bare_none", "message": "bare None"},
    {"id": "unused-imports", "group": "standards", "kind": "py-ast", "check": "unused_imports", "message": "unused import"},
    {"id": "shared-logger", "group": "standards", "kind": "py-ast", "check": "shared_logger_import", "except": ["__init__.py", "Tests.py"], "skip": {"name": ["Schema.py"], "contains": ["BaseModel"]}, "message": "shared logger"},
    {"id": "schema-basemodel", "group": "structure", "kind": "text-required", "only": ["Schema.py"], "contains": ["BaseModel"], "message": "Schema.py must import and use pydantic.BaseModel"},
    {"id": "balanced", "group": "structure", "kind": "balanced", "pairs": [
      {"open": "(", "close": ")", "message": "unbalanced parentheses: {open} '(' and {close} ')'"},
      {"token": "\"\"\"", "mode": "odd", "message": "unterminated \"\"\" string"}
    ]}
  ]
}"##,
    );
    repo.write(
        ".arbiter/rules/python/constitution.json",
        r#"{"lang": "python", "checks": [{"id": "uv", "group": "constitution", "kind": "project", "require": [".python-version"], "forbid": ["requirements.txt"], "message": "a uv project"}]}"#,
    );
    repo.write("requirements.txt", "flask\n");
    repo.write(
        "f/Handler.py",
        "#!/usr/bin/env python\nimport os\nimport sys\nfrom typing import Optional\n\nfrom shared.logger import logging_func\n\n# a comment\nlogger = logging_func(__name__)\n\n\ndef run(pos: str | None = None, q: int = None, r: Optional[int] = None):\n    print(pos)\n    logger.info(print(q))\n    return \"\u{1F600}\" + \"(\" + sys.version\n",
    );
    repo.write("f/Tests.py", "import pytest\n\n\ndef test_it():\n    assert True\n");
    repo.write("f/Schema.py", "from pydantic import BaseModel\n\n\nclass S(BaseModel):\n    x: int = 1\n");
    repo.write("g/Schema.py", "class S:\n    def f(self) -> int:\n        return (1\n");
    repo.write("g/Handler.py", "import logging\n\nlog = logging.getLogger(__name__)\n");
    repo.write("web/app.vue", "<p>{{ print(x) }}</p>\n");
    repo.commit_all("files");
    // The shipped rules stay out of this test: only the hand-written ones.
    fs::create_dir_all(repo.arbiter_dir()).unwrap();
    fs::write(repo.arbiter_dir().join("config.toml"), "[rules]\nshipped = false\n").unwrap();

    let run = repo.arbiter(&["rules", "check", "--json"]);
    run.assert_code(1);
    let doc = assert_schema("rules-check", &run.stdout);
    let got: Vec<String> = doc["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let line = v["line"].as_u64().unwrap();
            let loc = if line == 0 {
                format!("{}:", v["path"].as_str().unwrap())
            } else {
                format!("{}:{line}", v["path"].as_str().unwrap())
            };
            format!("{loc} [{}] {}", v["rule"].as_str().unwrap(), v["message"].as_str().unwrap())
        })
        .collect();
    let expected = vec![
        ".python-version: [uv] a uv project (missing)",
        "f/Handler.py:12 [bare-none] q: int = None does not allow None; write int | None",
        "f/Handler.py:12 [return-types] run missing return type",
        "f/Handler.py:13 [no-print] print() not allowed",
        "f/Handler.py:15 [no-emoji] emojis not allowed",
        "f/Handler.py:2 [unused-imports] 'os' imported but unused",
        "f/Handler.py:8 [comment] comments not allowed",
        "g/Schema.py: [balanced] unbalanced parentheses: 2 '(' and 1 ')'",
        "g/Schema.py: [schema-basemodel] Schema.py must import and use pydantic.BaseModel",
        "g/Handler.py:3 [shared-logger] uses logging.getLogger; use the shared logger: from shared.logger import logging_func",
        "requirements.txt: [uv] a uv project (must not exist)",
    ];
    let syntax: Vec<&String> = got.iter().filter(|v| v.contains("[syntax]")).collect();
    assert_eq!(syntax.len(), 1, "one syntax error, reported once: {got:#?}");
    assert!(syntax[0].starts_with("g/Schema.py:3 [syntax] syntax error: "), "{syntax:?}");
    let mut got_sorted: Vec<String> = got.iter().filter(|v| !v.contains("[syntax]")).cloned().collect();
    got_sorted.sort();
    let mut expected_sorted: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected_sorted.sort();
    assert_eq!(got_sorted, expected_sorted, "{doc:#}");
    // Human output: `path:line message`.
    let text = repo.arbiter(&["rules", "check"]);
    text.assert_code(1);
    assert!(text.stdout.lines().any(|l| l == "f/Handler.py:2 'os' imported but unused"), "{}", text.stdout);
    assert!(
        text.stdout.lines().any(|l| l == "g/Schema.py: Schema.py must import and use pydantic.BaseModel"),
        "{}",
        text.stdout
    );
    // Groups isolate standards from structure.
    let structure = repo.arbiter(&["rules", "check", "--group", "structure", "--no-project", "--json"]);
    let doc: Value = serde_json::from_str(&structure.stdout).unwrap();
    let rules: std::collections::BTreeSet<&str> =
        doc["violations"].as_array().unwrap().iter().map(|v| v["rule"].as_str().unwrap()).collect();
    assert_eq!(rules.into_iter().collect::<Vec<_>>(), vec!["balanced", "schema-basemodel"]);
    let bad_group = repo.arbiter(&["rules", "check", "--group", "nope"]);
    bad_group.assert_code(2);
    assert!(bad_group.stderr.contains("groups: constitution, standards, structure"), "{}", bad_group.stderr);
    // One file, given as a path.
    let one = repo.arbiter(&["rules", "check", "f/Tests.py", "--no-project"]);
    one.assert_code(0);
    let listed = repo.arbiter(&["rules", "list", "--json"]);
    listed.assert_code(0);
    let doc = assert_schema("rules-list", &listed.stdout);
    assert_eq!(doc["sets"][0]["source"], ".agents/rules/python/core.json", "{doc:#}");
}

/// `merge` with a bare remote: main is brought up to date first, the slice is merged with a
/// merge commit naming it, main is pushed, the slice branch is gone locally and remotely.
#[test]
fn merge_updates_main_from_the_remote_merges_pushes_and_deletes_the_branch() {
    let repo = slice_repo();
    let remote = add_remote(&repo);
    repo.arbiter(&["feature", "new", "billing/Invoice", "Invoices"]).assert_code(0);
    repo.git(&["push", "-q", "-u", "origin", "billing/Invoice"]);
    // Someone else pushes to main meanwhile.
    let other = tempfile::tempdir().unwrap();
    git_in(other.path(), &["clone", "-q", remote.path().to_str().unwrap(), "."]);
    git_in(
        other.path(),
        &["-c", "user.name=o", "-c", "user.email=o@o", "commit", "-q", "--allow-empty", "-m", "theirs"],
    );
    git_in(other.path(), &["push", "-q", "origin", "main"]);

    let run = repo.arbiter(&["feature", "merge"]);
    run.assert_code(0);
    assert!(run.stdout.contains("Merged billing/Invoice into main"), "{}", run.stdout);
    assert!(run.stdout.contains("brought up to date"), "{}", run.stdout);
    assert_eq!(branch(&repo), "main");
    assert_eq!(last_subject(&repo, "main"), "merge: billing/Invoice");
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "main~1"]).trim(), "theirs", "main was fast-forwarded first");
    assert_eq!(git_in(remote.path(), &["log", "-1", "--format=%s", "main"]).trim(), "merge: billing/Invoice");
    assert!(!repo.git(&["branch", "--list", "billing/Invoice"]).contains("Invoice"));
    assert_eq!(remote_heads(remote.path()).trim(), "main");
    assert!(repo.path().join("features/billing/Invoice/spec.md").is_file());
    // Nothing to merge from main itself.
    let on_main = repo.arbiter(&["feature", "merge"]);
    on_main.assert_code(2);
    assert!(on_main.stderr.contains("name one: arbiter feature merge <domain>/<Feature>"), "{}", on_main.stderr);
}

/// A conflict stops the merge with nothing half-done; following the message resolves it.
#[test]
fn a_merge_conflict_stops_cleanly_and_the_suggested_fix_works() {
    let repo = slice_repo();
    repo.arbiter(&["feature", "new", "billing/Invoice", "Invoices"]).assert_code(0);
    repo.write("README.md", "# shop, the slice's\n");
    repo.commit_all("slice readme");
    repo.git(&["switch", "-q", "main"]);
    repo.write("README.md", "# shop, main's\n");
    repo.commit_all("main readme");
    let main_before = repo.git(&["rev-parse", "main"]);
    let run = repo.arbiter(&["feature", "merge", "billing/Invoice"]);
    run.assert_code(1);
    assert!(
        run.stderr.contains("conflicts in README.md; nothing was merged and you are back on billing/Invoice"),
        "{}",
        run.stderr
    );
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before);
    assert_eq!(branch(&repo), "billing/Invoice");
    assert!(repo.status().is_empty(), "{:?}", repo.status());
    assert!(!repo.path().join(".git/MERGE_HEAD").exists());

    // The hint: bring main into the slice, resolve, commit, merge again.
    let merged =
        std::process::Command::new("git").args(["merge", "-q", "main"]).current_dir(repo.path()).output().unwrap();
    assert!(!merged.status.success());
    repo.write("README.md", "# shop, both\n");
    repo.commit_all("resolve");
    repo.arbiter(&["feature", "merge"]).assert_code(0);
    assert_eq!(repo.read("README.md"), "# shop, both\n");
    assert_eq!(last_subject(&repo, "main"), "merge: billing/Invoice");
}

/// `undo` discards the slice's branch and nothing else: uncommitted work elsewhere survives,
/// main and its unpushed commits are untouched.
#[test]
fn undo_discards_only_the_slice_and_uncommitted_work_elsewhere_survives() {
    let repo = slice_repo();
    let remote = add_remote(&repo);
    repo.write("notes.txt", "main's unpushed work\n");
    repo.commit_all("unpushed on main");
    let main_before = repo.git(&["rev-parse", "main"]);
    repo.arbiter(&["feature", "new", "billing/Invoice", "Invoices"]).assert_code(0);
    repo.git(&["push", "-q", "-u", "origin", "billing/Invoice"]);
    repo.write("README.md", "# shop, uncommitted edit\n");
    repo.write("scratch.txt", "untracked work\n");
    repo.write("features/billing/Invoice/Handler.py", "half-done\n");

    let refused = repo.arbiter(&["feature", "undo"]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("uncommitted changes") && refused.stderr.contains("--yes"), "{}", refused.stderr);
    assert_eq!(branch(&repo), "billing/Invoice");

    let run = repo.arbiter(&["feature", "undo", "--yes"]);
    run.assert_code(0);
    assert_eq!(branch(&repo), "main");
    assert!(!repo.git(&["branch", "--list", "billing/Invoice"]).contains("Invoice"));
    assert_eq!(remote_heads(remote.path()).trim(), "main", "the remote branch is deleted");
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before, "main is untouched");
    assert_eq!(repo.read("README.md"), "# shop, uncommitted edit\n");
    assert_eq!(repo.read("scratch.txt"), "untracked work\n");
    assert!(!repo.path().join("features/billing/Invoice").exists(), "the slice's own changes went with it");
    assert!(run.stdout.contains("kept uncommitted changes"), "{}", run.stdout);
    // A branch that does not exist: exit 2.
    repo.arbiter(&["feature", "undo", "billing/Invoice"]).assert_code(2);
}

/// A name in two domains is ambiguous: exit 2 listing both; the domain the message asks
/// for resolves it. An unknown name suggests the close one.
#[test]
fn ambiguous_and_unknown_names_exit_2_with_candidates() {
    let repo = slice_repo();
    for target in ["billing/Invoice", "shipping/Invoice"] {
        repo.git(&["switch", "-q", "main"]);
        repo.arbiter(&["feature", "new", target, "Invoices"]).assert_code(0);
        repo.arbiter(&["feature", "merge"]).assert_code(0);
    }
    // The registry maps Invoice to one domain only; remove it so the name is ambiguous.
    repo.write(".features.json", "{\"features_dir\": \"features\"}\n");
    repo.commit_all("forget the registry");
    let run = repo.arbiter(&["feature", "modify", "Invoice", "Add VAT"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("'Invoice' names 2 slices: billing/Invoice (features/billing/Invoice), shipping/Invoice (features/shipping/Invoice); name one as <domain>/Invoice"),
        "{}",
        run.stderr
    );
    assert_eq!(branch(&repo), "main", "nothing happened");
    repo.arbiter(&["feature", "modify", "shipping/Invoice", "Add VAT"]).assert_code(0);
    assert_eq!(branch(&repo), "shipping/Invoice");
    let unknown = repo.arbiter(&["feature", "do", "Invoce"]);
    unknown.assert_code(2);
    assert!(unknown.stderr.contains("no slice 'Invoce' here"), "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("did you mean billing/Invoice (features/billing/Invoice), shipping/Invoice"),
        "{}",
        unknown.stderr
    );
    let scan = repo.arbiter(&["feature", "scan", "--json"]);
    scan.assert_code(0);
    let doc = assert_schema("feature-scan", &scan.stdout);
    assert_eq!(doc["slices"].as_array().unwrap().len(), 2, "{doc:#}");
}

/// `delete` and `move` commit what they do (registry included); several slices are in
/// progress at once and `status` lists them.
#[test]
fn delete_move_and_status_keep_the_registry_and_branches_in_step() {
    let repo = slice_repo();
    repo.arbiter(&["feature", "new", "billing/Invoice", "Invoices"]).assert_code(0);
    repo.git(&["switch", "-q", "main"]);
    repo.arbiter(&["feature", "new", "billing/Refund", "Refunds"]).assert_code(0);
    let status = repo.arbiter(&["feature", "status", "--json"]);
    status.assert_code(0);
    let doc = assert_schema("feature-status", &status.stdout);
    let branches: Vec<&str> =
        doc["in_progress"].as_array().unwrap().iter().map(|b| b["branch"].as_str().unwrap()).collect();
    assert_eq!(branches, vec!["billing/Invoice", "billing/Refund"], "{doc:#}");

    // move: directory, registry and branch in one commit, then the tests.
    let moved = repo.arbiter(&["feature", "move", "billing/Refund", "payments/Reimbursement"]);
    moved.assert_code(0);
    assert!(moved.stdout.contains("its tests pass at the new place"), "{}", moved.stdout);
    assert_eq!(branch(&repo), "payments/Reimbursement");
    assert_eq!(last_subject(&repo, "HEAD"), "move: billing/Refund -> payments/Reimbursement");
    assert!(repo.status().is_empty(), "the old path's removal is committed too: {:?}", repo.status());
    assert!(!repo.path().join("features/billing/Refund").exists());
    let registry: Value = serde_json::from_str(&repo.read(".features.json")).unwrap();
    assert_eq!(registry["known_features"], json!({"Reimbursement": "payments"}), "{registry:#}");
    let clash = repo.arbiter(&["feature", "move", "payments/Reimbursement", "payments/Reimbursement"]);
    clash.assert_code(2);

    // delete: unmerged commits need --yes; then the slice is gone, as a commit, and its branch.
    repo.git(&["switch", "-q", "billing/Invoice"]);
    let refused = repo.arbiter(&["feature", "delete"]);
    refused.assert_code(2);
    assert!(refused.stderr.contains("pass --yes"), "{}", refused.stderr);
    let run = repo.arbiter(&["feature", "delete", "--yes"]);
    run.assert_code(0);
    assert_eq!(branch(&repo), "main");
    assert!(!repo.git(&["branch", "--list", "billing/Invoice"]).contains("Invoice"));
    // Merged slices are deleted from main as a commit with their registry entry.
    repo.git(&["switch", "-q", "payments/Reimbursement"]);
    repo.arbiter(&["feature", "merge"]).assert_code(0);
    repo.arbiter(&["feature", "delete", "payments/Reimbursement"]).assert_code(0);
    assert_eq!(last_subject(&repo, "HEAD"), "delete: payments/Reimbursement");
    assert!(!repo.path().join("features/payments/Reimbursement").exists());
    let registry: Value = serde_json::from_str(&repo.read(".features.json")).unwrap();
    assert_eq!(registry["known_features"], json!({}), "{registry:#}");
    assert!(repo.status().is_empty());
}

/// Hostile input files: a catastrophic regex runs in linear time, one that explodes when
/// compiled and an oversized rule file are refused, paths out of the repository in a rule
/// file, a registry or a target are refused, never followed.
#[test]
fn hostile_rule_files_registries_and_targets_are_refused_or_harmless() {
    let repo = slice_repo();
    let rules = repo.path().join(".arbiter/rules/python");
    fs::create_dir_all(&rules).unwrap();
    fs::write(
        rules.join("evil.json"),
        r#"{"checks": [{"id": "redos", "kind": "line", "pattern": "(a+)+$", "message": "redos"}]}"#,
    )
    .unwrap();
    repo.write("long.py", format!("x = '{}b'\n", "a".repeat(200_000)));
    let run = repo.arbiter(&["rules", "check", "long.py", "--no-project"]);
    assert!(run.code == Some(0) || run.code == Some(1), "{}", run.stderr);

    fs::write(
        rules.join("evil.json"),
        r#"{"checks": [{"id": "bomb", "kind": "line", "pattern": "(a{1000}){1000}", "message": "x"}]}"#,
    )
    .unwrap();
    let bomb = repo.arbiter(&["rules", "check"]);
    bomb.assert_code(2);
    assert!(bomb.stderr.contains("evil.json: check 'bomb' has a pattern arbiter cannot use"), "{}", bomb.stderr);

    fs::write(
        rules.join("evil.json"),
        r#"{"checks": [{"id": "p", "kind": "project", "require": ["../../../etc/passwd"], "message": "x"}]}"#,
    )
    .unwrap();
    let traversal = repo.arbiter(&["rules", "check"]);
    traversal.assert_code(2);
    assert!(traversal.stderr.contains("not a path inside the project"), "{}", traversal.stderr);

    fs::write(rules.join("evil.json"), format!("{{\"checks\": [], \"pad\": \"{}\"}}", "x".repeat(2 << 20))).unwrap();
    let huge = repo.arbiter(&["rules", "check"]);
    huge.assert_code(2);
    assert!(huge.stderr.contains("more than a rule file may have"), "{}", huge.stderr);
    fs::remove_file(rules.join("evil.json")).unwrap();

    // A file outside the repository is refused.
    let outside = repo.arbiter(&["rules", "check", "../"]);
    outside.assert_code(2);

    // A registry pointing outside the repository is refused before anything is written.
    repo.write(".features.json", "{\"features_dir\": \"../outside\"}\n");
    repo.commit_all("hostile registry");
    let parent = repo.path().parent().unwrap().join("outside");
    let run = repo.arbiter(&["feature", "new", "billing/Invoice", "x"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("features_dir") && run.stderr.contains("not a directory inside the repository"),
        "{}",
        run.stderr
    );
    assert!(!parent.exists());
    assert_eq!(branch(&repo), "main");
    repo.write(".features.json", "{\"known_features\": {\"X\": \"../../tmp\"}}\n");
    repo.commit_all("hostile registry 2");
    repo.arbiter(&["feature", "scan"]).assert_code(2);
    repo.write(".features.json", "{}\n");
    repo.commit_all("plain registry");
    for target in ["../../etc/x", "billing/../../x", "-rf", "billing/Invoice/extra"] {
        let run = repo.arbiter(&["feature", "new", target, "x"]);
        run.assert_code(2);
        assert_eq!(branch(&repo), "main", "{target}");
    }
    assert!(repo.status().is_empty(), "{:?}", repo.status());
}

/// The rules gate and the repair loop in a plain `arbiter run`: a hostile candidate that
/// rewrites the rules in its own tree and hides a file behind a link is still judged by the
/// repository's rules; its failures go back to it once; it is not eligible.
#[test]
fn a_run_s_rules_gate_judges_a_hostile_candidate_by_the_repository_s_rules() {
    let repo = slice_repo();
    // The base breaks a project check itself: that is not the candidate's doing.
    fs::remove_file(repo.path().join(".python-version")).unwrap();
    repo.write_agent(
        "agent.sh",
        "mkdir -p .agents/rules/python\nprintf '{\"lang\": \"python\", \"checks\": []}' > .agents/rules/python/core.json\nprintf 'import os\\n# sneaky\\nx = 1\\n' > app.py\nln -sf README.md hidden.py\n",
    );
    repo.commit_all("agent");
    let run = gated_run(&repo, &["--repair-rounds", "1"]);
    run.assert_code(1);
    let dir = repo.run_dir();
    let evidence = read_json(&dir.join("candidates/c01/evidence.json"));
    let gate = evidence["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["command"] == "arbiter rules check")
        .expect("a rules gate");
    assert_eq!(gate["passed"], false, "{evidence:#}");
    let tail = gate["output_tail"].as_str().unwrap();
    assert!(tail.contains("app.py:1 'os' imported but unused"), "{tail}");
    assert!(tail.contains("app.py:2 comments not allowed"), "{tail}");
    assert!(tail.contains("hidden.py: not checked by the rules: a symbolic link (not followed)"), "{tail}");
    assert!(!tail.contains(".python-version"), "project checks failing on the base are not the candidate's: {tail}");
    let round = read_json(&dir.join("candidates/c01/repair/round-1.json"));
    assert!(round["feedback"].as_str().unwrap().contains("app.py:2 comments not allowed"), "{round:#}");
    assert!(dir.join("candidates/c01/repair/prompt-1.md").is_file());
    let settings = repo.arbiter(&["config", "show", "--rules", "--repair-rounds", "2"]);
    settings.assert_code(0);
    assert!(
        settings.stdout.lines().any(|l| l.starts_with("repair_rounds") && l.contains("2") && l.contains("(flag)")),
        "{}",
        settings.stdout
    );
}

/// Without Python the py-ast checks cannot run: `rules check` and a run with the rules gate
/// stop with exit 3 and say how to fix it; the fix works.
#[test]
fn a_missing_python_is_an_environment_error_with_a_fix() {
    let repo = slice_repo();
    repo.write("app.py", "x = 1\n");
    repo.commit_all("app");
    append_config(&repo, "[rules]\npython = \"/nonexistent/python3\"\n");
    let run = repo.arbiter(&["rules", "check", "app.py"]);
    run.assert_code(3);
    assert!(
        run.stderr.contains("`/nonexistent/python3` is not installed") && run.stderr.contains("[rules]"),
        "{}",
        run.stderr
    );
    repo.write_agent("agent.sh", "true\n");
    repo.commit_all("agent");
    let gated = gated_run(&repo, &[]);
    gated.assert_code(3);
    assert!(repo.run_dirs().is_empty(), "nothing was started");
    let config = repo.arbiter_dir().join("config.toml");
    fs::write(&config, fs::read_to_string(&config).unwrap().replace("/nonexistent/python3", "python3")).unwrap();
    let fixed = repo.arbiter(&["rules", "check", "app.py", "--no-project"]);
    fixed.assert_code(1);
    assert!(fixed.stdout.contains("app.py: missing the shared logger import"), "python3 parsed it: {}", fixed.stdout);
}

/// A repository without a commit has no default branch: exit 2 saying to commit first, and
/// once committed the slice is created.
#[test]
fn a_repository_without_commits_is_told_to_commit_first() {
    let repo = TestRepo::new();
    let run = repo.arbiter(&["feature", "new", "billing/Invoice", "Invoices"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("no commit yet") && run.stderr.contains("git commit --allow-empty -m init"),
        "{}",
        run.stderr
    );
    repo.git(&["commit", "-q", "--allow-empty", "-m", "init"]);
    repo.arbiter(&["feature", "new", "billing/Invoice", "Invoices"]).assert_code(0);
    assert_eq!(branch(&repo), "billing/Invoice");
    assert!(repo.status().is_empty(), "{:?}", repo.status());
}
