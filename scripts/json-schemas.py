#!/usr/bin/env python3
"""Writes docs/schemas/*.schema.json: the shape of every `--json` document the CLI prints.

The schemas are the documentation; `crates/arbiter-cli/tests/json_output.rs` runs each
command and validates what it printed against its schema. Change a document's type, then
its entry here, then run `python3 scripts/json-schemas.py`.
"""
import json
import os

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
WAKE = obj({"p50": NUM, "p95": NUM, "max": NUM, "samples": I})

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
    "plan-show": ("`arbiter plan show ID --json`: the plan and its tasks", dict(PLAN)),
    "plan-status": ("`arbiter plan status ID --json`: the plan, its tasks and every attempt", dict(PLAN, attempts=arr(obj({
        "task": S, "attempt": I, "fence": INT, "worker": S,
        "status": {"enum": ["running", "succeeded", "failed", "expired", "cancelled"]},
        "started_at": TIME, "finished_at": TIMEN, "cost": USD, "reserved": USD, "run_id": SN, "commit": SN,
        "reason": SN,
    })))),
    "plan-run": ("`arbiter plan run ID --json`: the plan as the run left it", dict(PLAN, interrupted=B, exit_code=I)),
    "plan-list": ("`arbiter plan list --json`", {
        "plans": arr(obj({"id": S, "name": S, "cancelled": B, "counts": COUNTS, "budget": BUDGET})),
    }),
    "plan-import": ("`arbiter plan import|apply FILE --json`: what the import did, and the gate's verdicts", {
        "plan": S,
        "report": obj({"created_plan": B, "added": STRS, "updated": STRS, "unchanged": STRS, "skipped": STRS},
                      closed=False),
        "adopted_branch": nullable(obj({"name": S, "origin": {"enum": ["adopted"]}, "base": S, "recorded_at": TIME})),
        "verdicts": arr(obj({"task": S, "verdict": {"enum": ["ALLOW", "WARN", "REJECT"]}, "missing": STRS,
                             "reason": S})),
    }),
    "plan-push": ("`arbiter plan push ID --json`", {
        "remote": S, "url": S, "branch": S, "commit": S, "up_to_date": B,
    }),
    "plan-events": ("`arbiter plan events ID --json`: the plan's event log (kinds in docs/plans.md)", {
        "events": arr(obj({"id": INT, "plan_id": S, "task_id": SN, "attempt": IN, "kind": S,
                           "at": {"type": "integer", "description": "µs since the epoch"},
                           "data": {"type": "object"}})),
    }),
}

BACKEND = obj({
    "name": S,
    "backend": {"type": "object", "description": "the [backends.NAME] table (docs/configuration.md)"},
    "key": {"type": "object", "properties": {"source": {"enum": ["env", "env_missing", "secrets_file", "none"]}},
            "required": ["source"], "description": "where the key comes from, never the key"},
})


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (title, props) in DOCUMENTS.items():
        if props is None:
            props = dict(BACKEND["properties"])
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"arbiter/{name}",
            "title": title,
            **obj({"schema": {"const": name}, "schema_version": {"const": 1}, **props}),
        }
        if name in ("backend-list",):
            schema["$defs"] = {"backend": BACKEND}
        with open(os.path.join(OUT, f"{name}.schema.json"), "w") as f:
            json.dump(schema, f, indent=2, ensure_ascii=False)
            f.write("\n")
    print(f"wrote {len(DOCUMENTS)} schemas to docs/schemas/")


if __name__ == "__main__":
    main()
