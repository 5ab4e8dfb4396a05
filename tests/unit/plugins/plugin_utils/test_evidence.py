from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils import _evidence as ev

SPEC = {
    "id": "credential-rotation",
    "owner": "platform",
    "expected_result": "new works, old dead",
    "pass_rule": {"all": [
        {"measure": "new_ok", "equals": True},
        {"measure": "old_ok", "equals": False},
        {"measure": "seconds", "max": 60},
    ]},
}


@pytest.mark.parametrize("mutation,message", [
    ({"id": ""}, "lacks id"),
    ({"owner": None}, "lacks owner"),
    ({"pass_rule": []}, "lacks pass_rule"),
    ({"id": "Bad_Id"}, "lower-case"),
    ({"pass_rule": "new_ok == true"}, "pass_rule must be"),
    ({"pass_rule": [{"equals": True}]}, "needs a 'measure'"),
    ({"pass_rule": [{"measure": "a", "equals": 1, "max": 2}]}, "exactly one operator"),
    ({"pass_rule": [{"measure": "a", "roughly": 1}]}, "exactly one operator"),
    ({"pass_rule": [{"measure": "a", "in": 5}]}, "takes a list"),
])
def test_validate_spec_rejects(mutation: dict, message: str) -> None:
    spec = {**SPEC, **mutation}
    with pytest.raises(ev.SpecError, match=message):
        ev.validate_spec(spec)


@pytest.mark.parametrize("clause,measured,passed,reason", [
    ({"measure": "a", "equals": True}, {"a": True}, True, ""),
    ({"measure": "a", "equals": True}, {"a": False}, False, "fails equals"),
    ({"measure": "a", "equals": True}, {}, False, "not measured"),
    ({"measure": "a", "not_equals": 0}, {"a": 1}, True, ""),
    ({"measure": "a", "max": 60}, {"a": 59.9}, True, ""),
    ({"measure": "a", "max": 60}, {"a": 60.1}, False, "fails max"),
    ({"measure": "a", "max": 0}, {"a": "0"}, True, ""),  # values templated by Ansible may be strings
    ({"measure": "a", "min": 1}, {"a": 0}, False, "fails min"),
    ({"measure": "a", "min": 1}, {"a": True}, False, "fails min"),  # a bool is not a number
    ({"measure": "a", "max": 1}, {"a": None}, False, "fails max"),
    ({"measure": "a", "max": 1}, {"a": "lots"}, False, "cannot compare"),
    ({"measure": "a", "in": [401, 404]}, {"a": 404}, True, ""),
    ({"measure": "a", "not_in": [201]}, {"a": 201}, False, "fails not_in"),
])
def test_evaluate_clause(clause: dict, measured: dict, passed: bool, reason: str) -> None:
    result = ev.evaluate_clause(clause, measured)
    assert result["passed"] is passed
    assert reason in result["reason"]


def test_verdict_comes_only_from_measurements_and_failed_steps() -> None:
    record = ev.new_record(SPEC, "run-1", {"collection_version": "0.1.0"})
    ev.add_step(record, {"name": "probe", "measured": {"new_ok": True, "old_ok": False}})
    ev.add_step(record, {"name": "timing", "measured": {"seconds": 3.2}})
    assert ev.finish(copy.deepcopy(record))["verdict"] == "pass"
    failing = copy.deepcopy(record)
    ev.add_step(failing, {"name": "late", "measured": {"old_ok": True}})  # a later value wins
    assert ev.finish(failing)["verdict"] == "fail"
    broken = copy.deepcopy(record)
    ev.add_step(broken, {"name": "crash", "status": "failed", "output": "boom"})
    finished = ev.finish(broken)
    assert finished["verdict"] == "fail" and finished["failed_steps"] == ["crash"]
    with pytest.raises(ev.SpecError, match="finished"):
        ev.add_step(finished, {"name": "after"})


def test_unmeasured_rule_fails() -> None:
    record = ev.new_record(SPEC, "run-2", {})
    ev.add_step(record, {"name": "only one", "measured": {"new_ok": True}})
    finished = ev.finish(record)
    assert finished["verdict"] == "fail"
    assert [c["reason"] for c in finished["clauses"] if not c["passed"]] == ["not measured", "not measured"]


def test_step_defaults_to_covering_time_since_previous_record() -> None:
    record = ev.new_record(SPEC, "run-3", {})
    first = ev.add_step(record, {"name": "a"})
    second = ev.add_step(record, {"name": "b"})
    assert first["started_at"] == record["started_at"]
    assert second["started_at"] == first["ended_at"]
    with pytest.raises(ev.SpecError, match="status"):
        ev.add_step(record, {"name": "c", "status": "weird"})


@pytest.mark.parametrize("value,secrets,expected", [
    ({"password": "hunter22"}, [], {"password": ev.REDACTED}),
    ({"application_credential": {"id": "abc", "secret": "s3cr3t!"}}, [],
     {"application_credential": {"id": "abc", "secret": ev.REDACTED}}),
    ({"auth_token": None, "token_count": 3}, [], {"auth_token": None, "token_count": 3}),
    ({"secret_name": "cloud-config"}, [], {"secret_name": "cloud-config"}),
    ({"msg": "failed with key s3cr3tvalue in it"}, ["s3cr3tvalue"], {"msg": f"failed with key {ev.REDACTED} in it"}),
    (["a", {"nested": ["x-s3cr3tvalue-y"]}], ["s3cr3tvalue"], ["a", {"nested": [f"x-{ev.REDACTED}-y"]}]),
    ("abc", ["ab"], "abc"),  # too short to be a secret: never blank out arbitrary text
])
def test_redact(value: object, secrets: list[str], expected: object) -> None:
    assert ev.redact(value, secrets) == expected


def test_leaked_names_files_holding_secrets() -> None:
    assert ev.leaked({"a": "clean", "b": "has TOPSECRET"}, ["TOPSECRET"]) == ["b"]
    assert ev.leaked({"a": "clean"}, ["TOPSECRET", ""]) == []


def test_renderings_junit_markdown_manifest() -> None:
    record = ev.new_record(SPEC, "run-4", {"collection_version": "0.1.0", "hashes": {"inv.yml": "ab" * 32}})
    ev.add_step(record, {"name": "probe", "call": "POST /v3/auth/tokens", "measured": {"new_ok": True, "old_ok": True}})
    ev.add_step(record, {"name": "crash", "status": "failed", "output": {"msg": "x < y & z"}})
    ev.finish(record)
    suite = ET.fromstring(ev.junit_xml(record)).find("testsuite")
    assert suite is not None
    assert suite.get("tests") == "5" and suite.get("failures") == "3"  # crash, old_ok, seconds unmeasured
    names = [c.get("name") for c in suite.iter("testcase")]
    assert "01 probe" in names and "new_ok equals true" in names
    report = ev.markdown_report(record)
    assert report.startswith("# Drill credential-rotation: FAIL")
    assert "| old_ok | equals false | true | FAIL" in report and "`inv.yml`" in report
    files = {"record.json": ev.record_json(record).encode(), "report.md": report.encode()}
    text = ev.manifest(files)
    assert ev.verify_manifest(text, files) == []
    files["report.md"] += b"tampered"
    assert ev.verify_manifest(text, files) == ["report.md"]
    assert json.loads(files["record.json"])["verdict"] == "fail"
