"""The credential-rotation drill through ansible-playbook against the lab's Keystone: verdicts come from
measurements, the bundle verifies, check mode changes nothing, and no secret leaks anywhere."""

from __future__ import annotations

import configparser
import json
import stat
import subprocess
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import openstack
import pytest
import yaml
from k8s_fixtures import KUBECTL
from labtest import LAB_HOME, REPO, ansible_playbook, delete_family, list_family

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils._evidence import verify_manifest


@dataclass
class DrillRun:
    proc: subprocess.CompletedProcess[str]
    evidence_root: Path
    conf: Path
    family: str

    def bundles(self) -> list[Path]:
        return sorted((self.evidence_root / "credential-rotation").glob("*/"))

    def record(self, index: int = -1) -> dict:
        return json.loads((self.bundles()[index] / "record.json").read_text())


def run_drill(tmp: Path, family: str, *extra: str) -> DrillRun:
    conf = tmp / "etc" / "cloud.conf"
    evidence = tmp / "evidence"
    # The test's own Secret in the lab Kubernetes API: the lab cluster's cloud-config (what its cloud-provider
    # stand-ins use) is not the test's to rotate, nor are its workloads to restart; the canary and the watch,
    # which measure those, are tested end to end in test_rotation_end_to_end.py.
    proc = ansible_playbook("playbooks/drills/credential_rotation.yml", "-e", f"credential_rotation_credential_name={family}",
                            "-e", f"credential_rotation_cloud_conf_path={conf}",
                            "-e", f"credential_rotation_secret_name={family}-cloud-config",
                            "-e", "credential_rotation_manila_secret_name=",
                            "-e", '{"credential_rotation_workloads": [], "credential_rotation_watch_service": {}}',
                            "-e", "credential_rotation_canary=false",
                            "-e", f"k8s_openstack_evidence_root={evidence}", *extra)
    return DrillRun(proc, evidence, conf, family)


def delete_test_secret(family: str) -> None:
    subprocess.run([KUBECTL, f"--kubeconfig={LAB_HOME / 'kubeconfig'}", "-n", "kube-system", "delete", "secret",
                    f"{family}-cloud-config", "--ignore-not-found"], capture_output=True, check=False)


@pytest.fixture(scope="module")
def drill_family(lab_is_up: None) -> Iterator[str]:
    family = f"drill-{uuid.uuid4().hex[:8]}"
    yield family
    delete_family(openstack.connect(cloud="lab-k8s-cluster"), family)
    delete_test_secret(family)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, drill_family: str) -> tuple[DrillRun, DrillRun]:
    """First deployment, then a rotation from the configuration the first run wrote (verbose, for the leak test)."""
    tmp = tmp_path_factory.mktemp("drill")
    first = run_drill(tmp, drill_family)
    second = run_drill(tmp, drill_family, "-vvv")
    return first, second


def configured(conf: Path) -> tuple[str, str]:
    parser = configparser.ConfigParser()
    parser.read(conf)
    return parser["Global"]["application-credential-id"], parser["Global"]["application-credential-secret"]


def test_drill_passes_and_rotates_from_the_live_configuration(two_runs: tuple[DrillRun, DrillRun],
                                                              user_conn: openstack.connection.Connection) -> None:
    first, second = two_runs
    assert first.proc.returncode == 0, first.proc.stdout[-3000:]
    assert second.proc.returncode == 0, second.proc.stdout[-3000:]
    assert len(second.bundles()) == 2
    rec1, rec2 = second.record(0), second.record(1)
    assert rec1["verdict"] == rec2["verdict"] == "pass"
    # The second run started from the credential the first one left in cloud.conf.
    assert rec2["steps"][0]["output"]["current_credential_id"] == rec1["measured"]["successor_id"]
    cred_id = configured(second.conf)[0]
    assert cred_id == rec2["measured"]["successor_id"]
    # Exactly the live credential remains in Keystone.
    assert [c.id for c in list_family(user_conn, second.family)] == [cred_id]
    assert stat.S_IMODE(second.conf.stat().st_mode) == 0o600
    # Backup names start with a pid (Ansible's backup naming): order them by time, not by name.
    backups = sorted(second.conf.parent.glob("cloud.conf.*~"), key=lambda b: b.stat().st_mtime_ns)
    assert backups and all(stat.S_IMODE(b.stat().st_mode) == 0o600 for b in backups)
    # A way back: the newest backup holds the first run's credential (no file content in the message: secrets).
    holds_previous = rec1["measured"]["successor_id"] in backups[-1].read_text()
    assert holds_previous, "the newest backup lacks the previous credential"


def test_bundle_is_complete_and_verifiable(two_runs: tuple[DrillRun, DrillRun]) -> None:
    second = two_runs[1]
    bundle = second.bundles()[-1]
    files = {p.name: p.read_bytes() for p in bundle.iterdir()}
    assert set(files) == {"record.json", "report.md", "junit.xml", "SHA256SUMS"}
    assert verify_manifest(files["SHA256SUMS"].decode(), files) == []
    record = json.loads(files["record.json"])
    ctx = record["context"]
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert ctx["collection_version"] == galaxy["version"] and ctx["ansible_core_version"].startswith("2.")
    # The lab inventory gives the drill its cluster: the Secret clause is part of the declared rule, and held.
    assert {"measure": "cluster_secret_matches_consumer_config", "equals": True} in record["drill"]["pass_rule"]["all"]
    assert any(name.endswith("hosts.yml") for name in ctx["hashes"]) and any(
        name.endswith("ansible.cfg") for name in ctx["hashes"])
    assert record["started_at"] < record["ended_at"]
    assert [c["measure"] for c in record["clauses"]] == [c["measure"] for c in record["drill"]["pass_rule"]["all"]]
    measured = record["measured"]
    assert measured["old_credential_authenticates_after_retire"] is False
    assert measured["old_credential_http_status"] in (401, 404)
    assert 0 < float(measured["rotation_seconds"]) < 60
    suite = ET.fromstring(files["junit.xml"]).find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert int(suite.get("tests", "0")) == len(record["steps"]) + len(record["clauses"])
    assert "# Drill credential-rotation: PASS" in files["report.md"].decode()


def test_no_secret_reaches_output_evidence_or_logs(two_runs: tuple[DrillRun, DrillRun]) -> None:
    first, second = two_runs
    secrets = {configured(second.conf)[1]}
    secrets |= {configured(b)[1] for b in second.conf.parent.glob("cloud.conf.*~")}
    secrets |= set(json.loads((LAB_HOME / "secrets.json").read_text()).values())
    secrets.discard("")
    # Positive control: the current and the previous (retired) secrets are real, distinct values.
    assert len(secrets) >= 4
    places = {"first run stdout": first.proc.stdout, "first run stderr": first.proc.stderr,
              "second run -vvv stdout": second.proc.stdout, "second run stderr": second.proc.stderr}
    for path in second.evidence_root.rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_text(errors="replace")
    for path in (LAB_HOME / "logs").glob("*.log"):
        places[str(path)] = path.read_text(errors="replace")
    assert len(places) > 8
    leaks = sorted(name for name, text in places.items() for secret in secrets if secret in text)
    assert leaks == []


def test_drill_fails_honestly_when_retirement_is_skipped(tmp_path: Path, drill_family: str) -> None:
    family = drill_family + "-noretire"
    run = run_drill(tmp_path, family, "-e", "credential_rotation_retire=false")
    try:
        assert run.proc.returncode != 0
        assert "drill credential-rotation FAILED" in run.proc.stdout
        record = run.record()
        assert record["verdict"] == "fail"
        failed = sorted(c["measure"] for c in record["clauses"] if not c["passed"])
        assert failed == ["old_credential_authenticates_after_retire", "predecessors_remaining"]
        suite = ET.fromstring((run.bundles()[-1] / "junit.xml").read_text()).find("testsuite")
        assert suite is not None and suite.get("failures") == "2"
    finally:
        delete_family(openstack.connect(cloud="lab-k8s-cluster"), family)
        delete_test_secret(family)


def test_check_mode_changes_nothing(tmp_path: Path, two_runs: tuple[DrillRun, DrillRun],
                                    user_conn: openstack.connection.Connection) -> None:
    second = two_runs[1]
    before_conf = second.conf.read_bytes()
    before_family = [c.id for c in list_family(user_conn, second.family)]
    proc = ansible_playbook("playbooks/drills/credential_rotation.yml", "--check", "-e", f"credential_rotation_credential_name={second.family}",
                            "-e", f"credential_rotation_cloud_conf_path={second.conf}",
                            "-e", f"k8s_openstack_evidence_root={tmp_path / 'evidence'}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"Would create and prove {second.family}-" in proc.stdout
    assert second.conf.read_bytes() == before_conf
    assert [c.id for c in list_family(user_conn, second.family)] == before_family
    assert not (tmp_path / "evidence").exists()
