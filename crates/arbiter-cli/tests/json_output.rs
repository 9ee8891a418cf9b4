//! Every `--json` document the CLI prints matches its documented schema
//! (`docs/schemas/<name>.schema.json`): run for real, then validated. The documents of the
//! control plane (`worker list`, `bench queue`) and of `plan events` / `plan push` are
//! checked where those commands run (distributed.rs, plans.rs). The schema files are what
//! `scripts/json-schemas.py` writes, byte for byte: a hand edit fails here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::{Value, json};

const FIX: &str = "sed -i 's/return a - b/return a + b/' calc.py\n";

/// `arbiter ARGS --json` in `repo`, exiting `code`, checked against `schema`.
fn document(repo: &TestRepo, schema: &str, args: &[&str], code: i32) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let run = repo.arbiter(&args);
    run.assert_code(code);
    let doc = assert_schema(schema, &run.stdout);
    assert_eq!((doc["schema"].as_str(), doc["schema_version"].as_u64()), (Some(schema), Some(1)), "{doc:#}");
    doc
}

#[test]
fn the_run_documents_match_their_schemas() {
    let repo = python_repo(FIX);
    repo.arbiter(&["init"]).assert_code(0);
    let run = ["run", "--task", "Fix add", "--command", "./agent.sh", "--candidates", "2", "--verify", VERIFY_PY];
    let mut not_applied = run.to_vec();
    not_applied.extend(["--apply", "none"]);
    let ran = document(&repo, "run", &not_applied, 0);
    assert_eq!(ran["candidates"].as_array().map(Vec::len), Some(2), "{ran:#}");
    let id = ran["run_id"].as_str().expect("a run id").to_string();

    let list = document(&repo, "runs-list", &["runs", "list"], 0);
    assert_eq!(list["runs"][0]["run_id"], json!(id));
    let shown = document(&repo, "runs-show", &["runs", "show", &id], 0);
    assert_eq!(shown["state"]["run_id"], json!(id));
    let verified = document(&repo, "runs-verify", &["runs", "verify", &id], 0);
    assert_eq!(verified["holds"], json!(true));
    let applied = document(&repo, "apply", &["apply", &id], 0);
    assert_eq!(applied["apply"]["applied"], json!(true), "{applied:#}");
    assert!(repo.read("calc.py").contains("return a + b"));

    // A run directory someone changed: the document says so, and the exit code too.
    std::fs::write(repo.run_dir().join("selection.json"), "{}").unwrap();
    let broken = document(&repo, "runs-verify", &["runs", "verify", &id], 1);
    assert_eq!((broken["holds"].clone(), broken["changed"].clone()), (json!(false), json!(["selection.json"])));
}

#[test]
fn the_machine_and_configuration_documents_match_their_schemas() {
    let repo = python_repo(FIX);
    repo.arbiter(&["init"]).assert_code(0);
    let config = document(&repo, "config-show", &["config", "show"], 0);
    assert!(config["settings"].as_array().is_some_and(|s| !s.is_empty()), "{config:#}");
    document(&repo, "runners", &["runners"], 0);
    let doctor = repo.arbiter(&["doctor", "--json"]);
    assert_schema("doctor", &doctor.stdout);
    document(&repo, "cache-prune", &["cache", "prune"], 0);

    // The local store's access tokens: named, with their role and state, never their value.
    let created = repo.arbiter(&["token", "create", "viewer", "--read-only"]);
    let secret = created.assert_code(0).stdout.trim().to_string();
    repo.arbiter(&["token", "create", "ops"]).assert_code(0);
    repo.arbiter(&["token", "revoke", "ops"]).assert_code(0);
    let run = repo.arbiter(&["token", "list", "--json"]);
    assert!(!secret.is_empty() && !run.stdout.contains(&secret), "a token's value is never listed: {}", run.stdout);
    let tokens = document(&repo, "token-list", &["token", "list"], 0);
    let rows: Vec<(Value, Value, bool)> = tokens["tokens"]
        .as_array()
        .expect("a list of tokens")
        .iter()
        .map(|t| (t["name"].clone(), t["role"].clone(), t["revoked_at"].is_string()))
        .collect();
    assert!(rows.contains(&(json!("viewer"), json!("read-only"), false)), "{tokens:#}");
    assert!(rows.contains(&(json!("ops"), json!("admin"), true)), "{tokens:#}");

    let mock = MockLlm::start(&json!({"responses": [
        {"tool_calls": [{"name": "echo", "arguments": {"text": "ping"}}], "repeat": true}
    ]}));
    let url = mock.openai_url();
    let add = ["backend", "add", "local", "--provider", "openai-compatible", "--model", "m", "--base-url", &url];
    repo.arbiter(&add).assert_code(0);
    let list = document(&repo, "backend-list", &["backend", "list"], 0);
    assert_eq!(list["backends"][0]["key"]["source"], "none", "{list:#}");
    document(&repo, "backend-show", &["backend", "show", "local"], 0);
    let tested = document(&repo, "backend-test", &["backend", "test", "local"], 0);
    assert_eq!(tested["tool_calls_work"], json!(true), "{tested:#}");
}

#[test]
fn the_plan_documents_match_their_schemas() {
    let repo = initialized_repo("# plan\n", TASK_FILE_AGENT);
    let plan = json!({"id": "p", "name": "Plan p", "defaults": {"verify": ["true"], "candidates": 1,
    "runners": "command", "command": "./agent.sh"},
    "tasks": [
        {"id": "A", "title": "Write A", "description": "Write A.txt holding A.", "acceptance_criteria": ["A.txt exists"]},
        {"id": "B", "title": "Write B", "description": "Write B.txt holding B.", "dependencies": ["A"],
         "acceptance_criteria": ["B.txt exists"]}
    ]});
    repo.write("plan.json", plan.to_string());
    let applied = document(&repo, "plan-import", &["plan", "apply", "plan.json"], 0);
    assert_eq!(applied["report"]["added"], json!(["A", "B"]), "{applied:#}");
    assert_eq!(applied["verdicts"].as_array().map(Vec::len), Some(2), "{applied:#}");
    let imported = document(&repo, "plan-import", &["plan", "import", "plan.json"], 0);
    assert_eq!(imported["report"]["unchanged"], json!(["A", "B"]), "{imported:#}");
    let shown = document(&repo, "plan-show", &["plan", "show", "p"], 0);
    assert_eq!(shown["tasks"][1]["waiting_on"], json!([{"task": "A", "status": "ready"}]), "{shown:#}");
    let ran = document(&repo, "plan-run", &["plan", "run", "p"], 0);
    assert_eq!((ran["counts"]["done"].clone(), ran["exit_code"].clone()), (json!(2), json!(0)), "{ran:#}");
    let status = document(&repo, "plan-status", &["plan", "status", "p"], 0);
    assert_eq!(status["attempts"].as_array().map(Vec::len), Some(2), "{status:#}");
    let list = document(&repo, "plan-list", &["plan", "list"], 0);
    assert_eq!(list["plans"][0]["id"], "p");
    let events = document(&repo, "plan-events", &["plan", "events", "p"], 0);
    assert!(events["events"].as_array().is_some_and(|e| e.iter().any(|e| e["kind"] == "task_done")));

    // A branch handed over with --adopt-branch is in the import's document, as plan show has it.
    repo.git(&["branch", "feature"]);
    let tip = repo.git(&["rev-parse", "feature"]).trim().to_string();
    let adopt = json!({"id": "q", "name": "Plan q", "integration_branch": "feature", "defaults": {"verify": ["true"]},
        "tasks": [{"id": "A", "title": "Write A", "description": "Write A.txt holding A.", "acceptance_criteria": ["A.txt exists"]}]});
    repo.write("adopt.json", adopt.to_string());
    let adopted = document(&repo, "plan-import", &["plan", "import", "adopt.json", "--adopt-branch", "feature"], 0);
    assert_eq!(adopted["adopted_branch"]["name"], "feature", "{adopted:#}");
    assert_eq!(
        (adopted["adopted_branch"]["origin"].clone(), adopted["adopted_branch"]["base"].clone()),
        (json!("adopted"), json!(tip))
    );
}

/// Every document the CLI can print has its schema, and every schema is checked by a test.
#[test]
fn every_json_document_has_a_schema_and_a_test() {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    let named: BTreeSet<String> = rust_files(&cli.join("src"))
        .iter()
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("const SCHEMA: &'static str = \""))
                .filter_map(|rest| rest.strip_suffix("\";"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    let files: BTreeSet<String> = std::fs::read_dir(cli.join("../../docs/schemas"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".schema.json")).map(str::to_string))
        .collect();
    assert_eq!(named, files, "a --json document without a schema file, or a schema no document has");
    let tests = rust_files(&cli.join("tests")).join("\n");
    let unchecked: Vec<&String> = files
        .iter()
        .filter(|name| {
            !tests.contains(&format!("assert_schema(\"{name}\""))
                && !tests.contains(&format!("document(&repo, \"{name}\""))
        })
        .collect();
    assert!(unchecked.is_empty(), "schemas no test checks a document against: {unchecked:?}");
}

/// The checkout's root, where `scripts/` and `docs/schemas/` are.
fn checkout_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `python3 scripts/json-schemas.py ARGS`, the script found under `root`.
fn schemas_script(root: &Path, args: &[&str]) -> Run {
    let out = Command::new("python3")
        .arg(root.join("scripts/json-schemas.py"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("run python3 (the tests need it: .ci/run installs it)");
    Run::from_output(out)
}

/// The script is the one source of the schemas: what it would write is what is committed.
#[test]
fn the_schema_files_are_what_the_script_writes() {
    let check = schemas_script(&checkout_root(), &["--check"]);
    check.assert_code(0);
    assert!(check.stdout.contains("docs/schemas/ matches scripts/json-schemas.py"), "{}", check.stdout);
}

/// A schema edited by hand, one the script does not write and one gone: `--check` names each,
/// writes nothing and exits 1; its advice (run the script, delete the orphan) puts it right.
#[test]
fn a_hand_edited_schema_fails_the_check_until_the_script_is_run() {
    let copy = tempfile::Builder::new().prefix("arbiter-schemas-").tempdir().expect("create a temp dir");
    let root = copy.path();
    let schemas = root.join("docs/schemas");
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::create_dir_all(&schemas).unwrap();
    std::fs::copy(checkout_root().join("scripts/json-schemas.py"), root.join("scripts/json-schemas.py")).unwrap();
    let committed = checkout_root().join("docs/schemas");
    let names: Vec<PathBuf> = files_under(&committed).iter().filter_map(|p| p.file_name()).map(PathBuf::from).collect();
    for name in &names {
        std::fs::copy(committed.join(name), schemas.join(name)).unwrap();
    }
    let original = std::fs::read_to_string(schemas.join("qa.schema.json")).unwrap();
    let loosened = original.replacen("\"additionalProperties\": false", "\"additionalProperties\": true", 1);
    assert_ne!(loosened, original, "the edit changes the file");
    std::fs::write(schemas.join("qa.schema.json"), &loosened).unwrap();
    std::fs::remove_file(schemas.join("pr.schema.json")).unwrap();
    std::fs::write(schemas.join("orphan.schema.json"), "{}\n").unwrap();
    let before: Vec<PathBuf> = files_under(&schemas);

    let check = schemas_script(root, &["--check"]);
    check.assert_code(1);
    for line in [
        "docs/schemas/qa.schema.json: differs from its entry in scripts/json-schemas.py",
        "docs/schemas/pr.schema.json: missing",
        "docs/schemas/orphan.schema.json: no entry in scripts/json-schemas.py writes it",
        "run `python3 scripts/json-schemas.py`",
    ] {
        assert!(check.stderr.contains(line), "{line:?} not in:\n{}", check.stderr);
    }
    assert!(!check.stderr.contains("runs-list"), "only the files that differ are named:\n{}", check.stderr);
    assert_eq!(files_under(&schemas), before, "--check writes nothing");
    assert_eq!(std::fs::read_to_string(schemas.join("qa.schema.json")).unwrap(), loosened, "--check writes nothing");

    // The advice, followed: run the script, then delete the schema no document has.
    schemas_script(root, &[]).assert_code(0);
    assert_eq!(std::fs::read_to_string(schemas.join("qa.schema.json")).unwrap(), original);
    let orphan_left = schemas_script(root, &["--check"]);
    orphan_left.assert_code(1);
    assert!(orphan_left.stderr.contains("orphan.schema.json") && !orphan_left.stderr.contains("qa.schema.json"));
    std::fs::remove_file(schemas.join("orphan.schema.json")).unwrap();
    schemas_script(root, &["--check"]).assert_code(0);
    for name in &names {
        assert_eq!(
            std::fs::read(schemas.join(name)).unwrap(),
            std::fs::read(committed.join(name)).unwrap(),
            "{} as the script writes it",
            name.display()
        );
    }
}

fn rust_files(dir: &Path) -> Vec<String> {
    files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| std::fs::read_to_string(dir.join(p)).unwrap())
        .collect()
}
