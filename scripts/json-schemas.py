#!/usr/bin/env python3
"""Writes docs/schemas/*.schema.json: the shape of every `--json` document the CLI prints.

The schemas are the documentation; `crates/arbiter-cli/tests/json_output.rs` runs each
command and validates what it printed against its schema. Change a document's type, then
its entry here, then run `python3 scripts/json-schemas.py`. `--check` writes nothing and
exits 1 listing the schema files that differ (a test runs it, so a hand edit fails CI).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "docs", "schemas")

S = {"type": "string"}
SN = {"type": ["string", "null"]}
I = {"type": "integer", "minimum": 0}
IN = {"type": ["integer", "null"]}
INT = {"type": "integer"}
B = {"type": "boolean"}
NUM = {"type": "number"}
USD = {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$", "description": "US dollars, an exact decimal"}
USDN = {"type": ["string", "null"], "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}
TIME = {"type": "string", "description": "RFC 3339, UTC"}
TIMEN = {"type": ["string", "null"], "description": "RFC 3339, UTC"}
STRS = {"type": "array", "items": S}
STRSN = {"type": ["array", "null"], "items": S}


def obj(props, optional=(), description=None, closed=True):
    o = {"type": "object", "properties": props, "required": [k for k in props if k not in optional]}
    if closed:
        o["additionalProperties"] = False
    if description:
        o["description"] = description
    return o


def arr(items):
    return {"type": "array", "items": items}


def nullable(schema):
    s = dict(schema)
    s["type"] = [schema["type"], "null"] if isinstance(schema["type"], str) else schema["type"] + ["null"]
    return s


def artifact(name):
    return {"type": "object", "description": f"{name} as written in the run directory (docs/file-formats.md)"}


RUN_STATUS = {"enum": ["running", "succeeded", "not_applied", "failed", "interrupted", "error"]}
TASK_STATUS = ["blocked", "ready", "running", "done", "failed", "skipped", "cancelled"]
BUDGET = obj({"limit": USDN, "spent": USD, "reserved": USD, "crossed": B})
COUNTS = {"type": "object", "propertyNames": {"enum": TASK_STATUS}, "additionalProperties": I}
PLAN = {
    "id": S,
    "name": S,
    "repository": SN,
    "base_ref": S,
    "integration_branch": S,
    "source": dict(S, description="where the plan came from: the issue's URL (`arbiter intake`)"),
    "prd": dict(S, description="the PRD the plan was drafted from"),
    "integration_branch_record": nullable(obj({"origin": {"enum": ["created", "adopted"]}, "base": S, "recorded_at": TIME})),
    "cancelled": B,
    "budget": BUDGET,
    "counts": COUNTS,
    "tasks": arr(obj({
        "id": S, "title": S, "status": {"enum": TASK_STATUS},
        "priority": {"enum": ["critical", "high", "medium", "low"]}, "dependencies": STRS,
        "depth": I, "waiting_on": arr(obj({"task": S, "status": {"enum": TASK_STATUS}})),
        "attempts": I, "max_attempts": I, "cost": USD, "uncosted_calls": I, "lease_owner": SN, "lease_expires": TIMEN,
        "run_id": SN, "commit": SN, "reason": SN,
    })),
}
# Only a plan that came from an issue or a PRD has them.
PLAN_OPTIONAL = ("source", "prd")
WAKE = obj({"p50": NUM, "p95": NUM, "max": NUM, "samples": I})
# The decision gate's verdict on one task (`plan import`, `plan new`).
GATE_VERDICT = obj({"task": S, "verdict": {"enum": ["ALLOW", "WARN", "REJECT"]}, "missing": STRS, "reason": S})
# A branch pushed to a remote (`plan push`, `pr`).
PUSHED = {"remote": S, "url": S, "branch": S, "commit": S, "up_to_date": B}

DOCUMENTS = {
    "run": ("`arbiter run`, `arbiter runs resume` and `arbiter demo` with --json: how the tournament ended", {
        "run_id": S, "status": RUN_STATUS, "winner": SN, "summary": S,
        "materialization": {"type": ["object", "null"], "description": "what was applied, and how"},
        "candidates": arr(obj({"candidate_id": S, "rank": I, "runner": S, "eligible": B, "gates_passed": I,
                               "gates_total": I, "votes": I, "reason": S})),
        "cost": obj({"known_usd": USD, "complete": B, "description": S}),
        "spending": artifact("spending (strategy, escalation, budget) as in cost.json"),
        "run_dir": S, "verification": S, "exit_code": I,
    }),
    "runs-list": ("`arbiter runs list --json`", {
        "runs": arr(obj({"run_id": S, "status": RUN_STATUS, "winner": SN, "candidates": I, "task": S,
                         "started_at": TIME, "finished_at": TIMEN, "run_dir": S})),
    }),
    "runs-show": ("`arbiter runs show RUN --json`: the run's artifacts", {
        "run_dir": S, "state": artifact("state.json"), "selection": nullable(artifact("selection.json")),
        "ranking": nullable(artifact("ranking.json")), "cost": nullable(artifact("cost.json")),
    }),
    "runs-verify": ("`arbiter runs verify RUN --json`: the run directory against its seal", {
        "run_id": S, "run_dir": S, "sealed": B, "holds": B, "files": IN, "changed": STRSN, "missing": STRSN,
        "unexpected": STRSN, "message": S,
    }),
    "apply": ("`arbiter apply RUN --json`: the apply.json the command wrote", {
        "apply": obj({"schema_version": I, "run_id": S, "candidate_id": S, "at": INT, "branch": SN,
                      "created_branch": B, "commit": SN, "applied": B, "already_applied": B,
                      "rolled_back": B, "error": SN}, optional=("already_applied",), closed=False),
    }),
    "config-show": ("`arbiter config show --json`: every setting, its value and where it came from", {
        "config_file": S, "config_file_exists": B,
        "settings": arr(obj({"key": S, "value": S, "origin": {"enum": ["default", "config", "flag", "detected"]}})),
        "runners": {"type": ["array", "null"], "items": {"type": "object"}},
        "runners_error": SN,
    }),
    "cache-prune": ("`arbiter cache prune --json`", {
        "cache": S, "pools_removed": I, "workspaces_removed": I, "bytes_freed": I, "in_use": I,
    }),
    "bench-queue": ("`arbiter bench queue --json`: the control plane's queue benchmark", {
        "server": S, "workers": I, "tasks": I, "import_seconds": NUM, "cycles": I, "seconds": NUM,
        "claim_complete_per_second": NUM, "claim_ms": obj({"p50": NUM, "p95": NUM, "p99": NUM}),
        "wakeup_ms": WAKE, "import_to_claim_ms": WAKE,
    }),
    "doctor": ("`arbiter doctor --json`: what this machine and repository give arbiter", {
        "checks": arr(obj({"area": S, "name": S, "status": {"enum": ["ok", "warn", "fail", "absent"]},
                           "detail": S, "hint": S}, optional=("hint",))),
    }),
    "runners": ("`arbiter runners --json`: every runner, installed or not", {
        "runners": arr(obj({
            "name": S, "kind": S, "configured": B, "program": SN, "path": SN, "installed": B, "version": SN,
            "problem": SN, "model": SN, "backend": SN,
            "backends": arr(obj({"name": S, "provider": S, "model": S, "enabled": B, "prices": S})),
            "hint": SN,
        })),
    }),
    "worker-list": ("`arbiter worker list --json`: the control plane's workers", {
        "workers": arr(obj({"name": S, "id": S, "runners": STRS, "backends": STRS, "slots": I,
                            "current_work": {"description": "what it holds, as its last heartbeat said"},
                            "last_heartbeat": TIMEN, "registered_at": TIME, "revoked_at": TIMEN, "revoked_by": S,
                            "connected": B}, optional=("revoked_by",))),
    }),
    "token-list": ("`arbiter token list --json`: the named access tokens (never their values)", {
        "tokens": arr(obj({"name": S, "role": {"enum": ["admin", "read-only"]}, "created_at": TIME,
                           "last_used_at": TIMEN, "revoked_at": TIMEN})),
    }),
    "backend-list": ("`arbiter backend list --json`", {
        "backends": arr({"$ref": "#/$defs/backend"}),
    }),
    "backend-show": ("`arbiter backend show NAME --json`", None),
    "backend-test": ("`arbiter backend test NAME --json`: one small real call", {
        "backend": S, "ok": B, "latency_ms": I, "attempts": I,
        "usage": {"type": ["object", "null"], "properties": {"input_tokens": I, "output_tokens": I, "cached_tokens": I}},
        "cost": USDN, "flags": STRS, "tool_calls_work": B,
    }),
    "plan-show": ("`arbiter plan show ID --json`: the plan and its tasks", dict(PLAN), PLAN_OPTIONAL),
    "plan-status": ("`arbiter plan status ID --json`: the plan, its tasks and every attempt", dict(PLAN, attempts=arr(obj({
        "task": S, "attempt": I, "fence": INT, "worker": S,
        "status": {"enum": ["running", "succeeded", "failed", "expired", "cancelled"]},
        "started_at": TIME, "finished_at": TIMEN, "cost": USD, "reserved": USD, "run_id": SN, "commit": SN,
        "reason": SN,
    }))), PLAN_OPTIONAL),
    "plan-run": ("`arbiter plan run ID --json`: the plan as the run left it", dict(PLAN, interrupted=B, exit_code=I),
                 PLAN_OPTIONAL),
    "plan-list": ("`arbiter plan list --json`", {
        "plans": arr(obj({"id": S, "name": S, "cancelled": B, "counts": COUNTS, "budget": BUDGET})),
    }),
    "plan-import": ("`arbiter plan import|apply FILE --json`: what the import did, and the gate's verdicts", {
        "plan": S,
        "report": obj({"created_plan": B, "added": STRS, "updated": STRS, "unchanged": STRS, "skipped": STRS},
                      closed=False),
        "adopted_branch": nullable(obj({"name": S, "origin": {"enum": ["adopted"]}, "base": S, "recorded_at": TIME})),
        "verdicts": arr(GATE_VERDICT),
    }),
    "plan-push": ("`arbiter plan push ID --json`", dict(PUSHED)),
    "plan-events": ("`arbiter plan events ID --json`: the plan's event log (kinds in docs/plans.md)", {
        "events": arr(obj({"id": INT, "plan_id": S, "task_id": SN, "attempt": IN, "kind": S,
                           "at": {"type": "integer", "description": "µs since the epoch"},
                           "data": {"type": "object"}})),
    }),
    "plan-new": ("`arbiter plan new IDEA --json`: what was drafted, what it cost, whether it was imported", {
        "slug": S, "prd": dict(S, description="the PRD, relative to the repository"),
        "plan_file": dict(S, description="the plan file, relative to the repository"),
        "tasks": I, "questions": STRS, "repaired": B,
        "dropped": dict(STRS, description="what was left out of the model's plan, and why"),
        "gate": arr(GATE_VERDICT), "calls": I,
        "cost": dict(USD, description="US dollars of the calls whose cost is known, an exact decimal"),
        "uncosted_calls": I, "imported": B,
    }),
    "intake": ("`arbiter intake github|gitlab REF --json`: what became of each issue", {
        "forge": {"enum": ["github", "gitlab"]}, "repository": S,
        "issues": arr(obj({"number": I, "url": SN,
                           "outcome": {"enum": ["planned", "planned_already", "planned_concurrently", "failed"]},
                           "plan": SN, "tasks": IN, "prd": SN, "plan_file": SN, "calls": I, "cost": USDN,
                           "error": SN})),
    }),
    "pr": ("`arbiter pr RUN|--plan ID --json`: the branch, and the pull request or what stands in for it", {
        "of": {"enum": ["run", "plan"]}, "id": S,
        "published": {"oneOf": [
            obj({"outcome": {"const": "opened"}, "branch": S, "base": S, "url": S, "existed": B,
                 "pushed": obj(PUSHED)}),
            obj({"outcome": {"const": "pushed"}, "branch": S, "base": S, "compare_url": SN, "why": S,
                 "pushed": obj(PUSHED)}),
            obj({"outcome": {"const": "offline"}, "branch": S, "bundle": S, "patches": STRS}),
        ]},
        "commit": SN,
    }),
    "feature-do": ("`arbiter feature do --json`: the slice's tournament, its candidates' last gate failures and "
                   "repair rounds, and the commit", {
        "slice": S, "branch": S, "run_id": S, "run_dir": S, "status": RUN_STATUS, "winner": SN, "commit": SN,
        "pushed": nullable(B), "push_error": SN,
        "candidates": arr(obj({"candidate_id": S, "runner": S, "eligible": B, "reason": S, "repair_rounds": I,
                               "failing_gates": arr(obj({"gate": S, "output_tail": S}))})),
        "exit_code": I,
    }),
    "feature-scan": ("`arbiter feature scan --json`: the slices on disk and the registry's view of them", {
        "registry": S,
        "slices": arr(obj({"domain": S, "name": S, "dir": S, "flat": B, "registered": B})),
        "registered_missing": STRS,
    }),
    "feature-status": ("`arbiter feature status --json`: the slices in progress", {
        "default_branch": S, "current_branch": SN,
        "in_progress": arr(obj({"branch": S, "current": B, "ahead": I, "behind": I, "has_slice": B})),
        "uncommitted": STRS,
    }),
    "qa": ("`arbiter qa --json`: every registered slice's rules and tests", {
        "slices": arr(obj({
            "slice": S, "dir": S, "present": B, "files_checked": I, "violations": STRS,
            "tests": nullable(obj({"command": S, "passed": nullable(B), "exit_code": IN, "timed_out": B,
                                   "output_tail": S, "log": SN})),
        })),
        "project_violations": STRS, "skipped": STRS, "tests_passed": I, "tests_failed": I,
        "slices_without_tests": I, "violations": I, "strict": B, "passed": B,
    }),
    "rules-check": ("`arbiter rules check --json`: the violations (`line` 0: the whole file or the project)", {
        "files_checked": I,
        "violations": arr(obj({"path": S, "line": I, "rule": S, "message": S})),
        "skipped": STRS, "passed": B,
    }),
    "rules-list": ("`arbiter rules list --json`: the rule sets in force", {
        "sets": arr(obj({
            "lang": {"enum": ["python", "ts", "vue", "jinja"]}, "source": S,
            "checks": arr(obj({"id": S, "group": S,
                               "kind": {"enum": ["line", "text-required", "balanced", "py-ast", "project"]},
                               "message": S})),
        })),
        "warnings": STRS,
    }),
}

BACKEND = obj({
    "name": S,
    "backend": {"type": "object", "description": "the [backends.NAME] table (docs/configuration.md)"},
    "key": {"type": "object", "properties": {"source": {"enum": ["env", "env_missing", "secrets_file", "none"]}},
            "required": ["source"], "description": "where the key comes from, never the key"},
})


def schema_of(name, title, props, optional=()):
    if props is None:
        props = dict(BACKEND["properties"])
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"arbiter/{name}",
        "title": title,
        **obj({"schema": {"const": name}, "schema_version": {"const": 1}, **props}, optional=optional),
    }
    if name in ("backend-list",):
        schema["$defs"] = {"backend": BACKEND}
    return schema


def rendered():
    """Every schema file's name and the text it must hold."""
    return {
        f"{name}.schema.json": json.dumps(schema_of(name, *entry), indent=2, ensure_ascii=False) + "\n"
        for name, entry in DOCUMENTS.items()
    }


def on_disk():
    """The schema files docs/schemas/ holds, and their text."""
    if not os.path.isdir(OUT):
        return {}
    files = {}
    for name in sorted(os.listdir(OUT)):
        if name.endswith(".schema.json"):
            with open(os.path.join(OUT, name), encoding="utf-8", newline="") as f:
                files[name] = f.read()
    return files


def differences(wanted, found):
    """What differs between the files this script writes and those on disk, one line each."""
    lines = []
    for name, text in wanted.items():
        if name not in found:
            lines.append(f"docs/schemas/{name}: missing")
        elif found[name] != text:
            lines.append(f"docs/schemas/{name}: differs from its entry in scripts/json-schemas.py")
    for name in found:
        if name not in wanted:
            lines.append(f"docs/schemas/{name}: no entry in scripts/json-schemas.py writes it")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true",
        help="write nothing; exit 1 listing the schema files that differ from what this script writes",
    )
    args = parser.parse_args()
    wanted = rendered()
    found = on_disk()
    if args.check:
        lines = differences(wanted, found)
        if lines:
            print("\n".join(lines), file=sys.stderr)
            print("docs/schemas/ is out of step with scripts/json-schemas.py: change a document's entry in the "
                  "script (not its schema file), then run `python3 scripts/json-schemas.py`; delete a schema file "
                  "whose document is gone", file=sys.stderr)
            return 1
        print(f"docs/schemas/ matches scripts/json-schemas.py ({len(wanted)} schemas)")
        return 0
    os.makedirs(OUT, exist_ok=True)
    for name, text in wanted.items():
        if found.get(name) != text:
            with open(os.path.join(OUT, name), "w", encoding="utf-8", newline="") as f:
                f.write(text)
    print(f"wrote {len(wanted)} schemas to docs/schemas/")
    for name in found:
        if name not in wanted:
            print(f"warning: docs/schemas/{name} has no entry here: add one, or delete the file if its "
                  "document is gone", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
