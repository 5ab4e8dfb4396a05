# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drill framework's pure logic: drill declarations, redaction, pass rules,
and the evidence bundle's files (record JSON, JUnit XML, Markdown, manifest).

A drill declares, before it runs, as data::

    id: credential-rotation
    expected_result: "..."
    owner: platform-team
    pass_rule:
      all:
        - {measure: new_credential_authenticates, equals: true}
        - {measure: rotation_seconds, max: 60}

Every step records what was called, its (redacted) output and measured values;
the verdict is the pass rule evaluated on the measured values, nothing else. A
measure the run never recorded fails its clause.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence
from xml.sax.saxutils import escape, quoteattr

SCHEMA_VERSION = 1
REDACTED = "<redacted>"
# Dict keys whose values are secrets wherever they appear.
SECRET_KEY = re.compile(r"(secret|password|passwd|token|private[_-]?key|credential[_-]?secret)", re.IGNORECASE)
# Keys that merely talk about secrets and hold no secret value.
NOT_SECRET_KEYS = frozenset({"secret_name", "token_expires_at", "secrets_checked", "no_secret_found"})
DRILL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
OPERATORS = ("equals", "not_equals", "min", "max", "in", "not_in")
FILES = ("record.json", "report.md", "junit.xml")
MANIFEST = "SHA256SUMS"


class SpecError(ValueError):
    """A drill declaration or pass rule is malformed; the message says what to fix."""


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ------------------------------------------------------------------ declarations

def rule_clauses(rule: Any) -> list[Mapping[str, Any]]:
    if isinstance(rule, Mapping) and set(rule) == {"all"}:
        rule = rule["all"]
    if not isinstance(rule, Sequence) or isinstance(rule, (str, bytes)) or not rule:
        raise SpecError("pass_rule must be {all: [clause, ...]} or a non-empty list of clauses")
    return list(rule)


def validate_spec(spec: Mapping[str, Any]) -> None:
    """Check a drill declaration; raise SpecError naming what to fix."""
    missing = [k for k in ("id", "expected_result", "owner", "pass_rule") if not spec.get(k)]
    if missing:
        raise SpecError(f"drill declaration lacks {', '.join(missing)}: every drill states id, expected_result, "
                        "owner and pass_rule before it runs")
    if not DRILL_ID.match(str(spec["id"])):
        raise SpecError(f"drill id {spec['id']!r} must be lower-case letters, digits and '-', 2-63 characters")
    for index, clause in enumerate(rule_clauses(spec["pass_rule"])):
        if not isinstance(clause, Mapping) or not clause.get("measure"):
            raise SpecError(f"pass_rule clause {index} needs a 'measure' name")
        ops = [k for k in clause if k != "measure"]
        if len(ops) != 1 or ops[0] not in OPERATORS:
            raise SpecError(f"pass_rule clause {index} ({clause.get('measure')}) needs exactly one operator of "
                            f"{', '.join(OPERATORS)}; got {ops}")
        if ops[0] in ("in", "not_in") and not isinstance(clause[ops[0]], Sequence):
            raise SpecError(f"pass_rule clause {index}: '{ops[0]}' takes a list")


# ------------------------------------------------------------------ rules

def evaluate_clause(clause: Mapping[str, Any], measured: Mapping[str, Any]) -> dict[str, Any]:
    name = str(clause["measure"])
    op = next(k for k in clause if k != "measure")
    expected = clause[op]
    result: dict[str, Any] = {"measure": name, "operator": op, "expected": expected}
    if name not in measured:
        return {**result, "actual": None, "passed": False, "reason": "not measured"}
    actual = measured[name]
    result["actual"] = actual
    try:
        if op == "equals":
            passed = actual == expected
        elif op == "not_equals":
            passed = actual != expected
        elif op == "min":
            passed = actual is not None and not isinstance(actual, bool) and float(actual) >= float(expected)
        elif op == "max":
            passed = actual is not None and not isinstance(actual, bool) and float(actual) <= float(expected)
        elif op == "in":
            passed = actual in expected
        else:
            passed = actual not in expected
    except (TypeError, ValueError):
        return {**result, "passed": False, "reason": f"cannot compare {actual!r} with {op} {expected!r}"}
    return {**result, "passed": bool(passed), "reason": "" if passed else f"{actual!r} fails {op} {expected!r}"}


def evaluate_rule(rule: Any, measured: Mapping[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    clauses = [evaluate_clause(c, measured) for c in rule_clauses(rule)]
    return all(c["passed"] for c in clauses), clauses


# ------------------------------------------------------------------ redaction

def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A deep copy with secret-named keys blanked and every known secret string cut out."""
    known = sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4}, key=len, reverse=True)
    return _redact(value, known)


def _redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if (isinstance(key, str) and SECRET_KEY.search(key) and key not in NOT_SECRET_KEYS
                    and item not in (None, "", False, True) and not isinstance(item, (int, float))):
                out[key] = REDACTED
            else:
                out[key] = _redact(item, secrets)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(item, secrets) for item in value]
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    return value


def leaked(texts: Mapping[str, str], secrets: Iterable[str]) -> list[str]:
    """Names of the texts that contain any of the secrets (should be none)."""
    known = [s for s in secrets if isinstance(s, str) and len(s) >= 4]
    return sorted(name for name, text in texts.items() if any(s in text for s in known))


# ------------------------------------------------------------------ the record

def new_record(spec: Mapping[str, Any], run_id: str, context: Mapping[str, Any]) -> dict[str, Any]:
    validate_spec(spec)
    return {
        "schema": SCHEMA_VERSION,
        "run_id": run_id,
        "drill": {k: v for k, v in spec.items()
                  if k in ("id", "expected_result", "owner", "pass_rule", "title", "description", "references")},
        "started_at": utc_now(),
        "ended_at": None,
        "context": dict(context),
        "steps": [],
        "measured": {},
        "verdict": None,
        "clauses": [],
    }


def add_step(record: dict[str, Any], step: Mapping[str, Any]) -> dict[str, Any]:
    """Append a step; its measured values join the run's measured values (a later value wins)."""
    if record.get("verdict") is not None:
        raise SpecError(f"run {record['run_id']} is finished: no more steps can be added")
    # Unless told, a step covers the time since the previous record was written.
    previous_end = record["steps"][-1]["ended_at"] if record["steps"] else record["started_at"]
    entry = {
        "index": len(record["steps"]) + 1,
        "name": str(step["name"]),
        "call": step.get("call"),
        "status": step.get("status", "ok"),
        "started_at": step.get("started_at") or previous_end,
        "ended_at": step.get("ended_at") or utc_now(),
        "output": step.get("output"),
        "measured": dict(step.get("measured") or {}),
    }
    if entry["status"] not in ("ok", "failed", "skipped"):
        raise SpecError(f"step status must be ok, failed or skipped, not {entry['status']!r}")
    record["steps"].append(entry)
    record["measured"].update(entry["measured"])
    return entry


def finish(record: dict[str, Any]) -> dict[str, Any]:
    """Evaluate the pass rule on what was measured. A failed step fails the run too."""
    passed, clauses = evaluate_rule(record["drill"]["pass_rule"], record["measured"])
    failed_steps = [s["name"] for s in record["steps"] if s["status"] == "failed"]
    record["clauses"] = clauses
    record["failed_steps"] = failed_steps
    record["verdict"] = "pass" if passed and not failed_steps else "fail"
    record["ended_at"] = utc_now()
    return record


# ------------------------------------------------------------------ renderings

def record_json(record: Mapping[str, Any]) -> str:
    return json.dumps(record, indent=2, sort_keys=False, default=str) + "\n"


def junit_xml(record: Mapping[str, Any]) -> str:
    """One test suite per run: a test case per step and per pass-rule clause."""
    drill = record["drill"]
    cases = []
    for step in record["steps"]:
        body = ""
        if step["status"] == "failed":
            body = f"<failure message={quoteattr('step failed')}>{escape(_short(step.get('output')))}</failure>"
        elif step["status"] == "skipped":
            body = "<skipped/>"
        cases.append(f'    <testcase classname={quoteattr(drill["id"] + ".steps")} '
                     f'name={quoteattr(str(step["index"]).zfill(2) + " " + step["name"])}>{body}</testcase>')
    for clause in record.get("clauses", []):
        body = "" if clause["passed"] else f"<failure message={quoteattr(clause['reason'])}/>"
        label = f"{clause['measure']} {clause['operator']} {json.dumps(clause['expected'])}"
        cases.append(f'    <testcase classname={quoteattr(drill["id"] + ".pass_rule")} '
                     f'name={quoteattr(label)}>{body}</testcase>')
    failures = sum(1 for c in cases if "<failure" in c)
    skipped = sum(1 for c in cases if "<skipped" in c)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
            f'  <testsuite name={quoteattr(drill["id"])} tests="{len(cases)}" failures="{failures}" '
            f'skipped="{skipped}" errors="0" timestamp={quoteattr(str(record["started_at"]))} '
            f'id={quoteattr(str(record["run_id"]))}>\n' + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n")


def _short(value: Any, limit: int = 2000) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + " ..."


def markdown_report(record: Mapping[str, Any]) -> str:
    drill = record["drill"]
    ctx = record.get("context", {})
    verdict = str(record.get("verdict") or "unfinished").upper()
    lines = [
        f"# Drill {drill['id']}: {verdict}",
        "",
        f"- Run: `{record['run_id']}`, {record['started_at']} to {record.get('ended_at')}",
        f"- Owner: {drill['owner']}",
        f"- Expected result: {drill['expected_result']}",
        f"- Collection {ctx.get('collection_version')}, ansible-core {ctx.get('ansible_core_version')}, "
        f"controller {ctx.get('controller')}",
        "",
        "## Pass rule (declared before the run)",
        "",
        "| measure | rule | measured | result |",
        "|---|---|---|---|",
    ]
    for clause in record.get("clauses", []):
        lines.append(f"| {clause['measure']} | {clause['operator']} {json.dumps(clause['expected'])} | "
                     f"{json.dumps(clause.get('actual'), default=str)} | {'pass' if clause['passed'] else 'FAIL: ' + clause['reason']} |")
    lines += ["", "## Steps", "", "| # | step | call | status | started | ended |", "|---|---|---|---|---|---|"]
    for step in record["steps"]:
        call = str(step.get("call") or "").replace("|", "\\|")
        lines.append(f"| {step['index']} | {step['name']} | `{call}` | {step['status']} | {step['started_at']} | "
                     f"{step['ended_at']} |")
    if record.get("failed_steps"):
        lines += ["", f"Failed steps: {', '.join(record['failed_steps'])}"]
    lines += ["", "## Configuration versions", ""]
    for name, digest in sorted((ctx.get("hashes") or {}).items()):
        lines.append(f"- `{name}`: sha256 `{digest}`")
    lines += ["", "Full record: `record.json` (secrets redacted). Integrity: `SHA256SUMS`.", ""]
    return "\n".join(lines)


def manifest(files: Mapping[str, bytes]) -> str:
    return "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(files.items()))


def verify_manifest(text: str, files: Mapping[str, bytes]) -> list[str]:
    """Names whose content no longer matches the manifest (or that it lists but are missing)."""
    bad = []
    for line in text.splitlines():
        digest, _sep, name = line.partition("  ")
        if name not in files or hashlib.sha256(files[name]).hexdigest() != digest:
            bad.append(name)
    return bad
