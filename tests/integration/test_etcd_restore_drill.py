"""The etcd-restore drill through ansible-playbook against the real lab: its etcd, its Kubernetes API (Secrets
encrypted with the Barbican key), Barbican and Keystone. Nothing is mocked.

The restore identity is a throwaway user of a throwaway project (not the key's project, whose members Barbican
lets read the key): it reads the key only through the key's ACL. Run 1 (key on the ACL) must pass; run 2 (ACL
entry revoked) must fail, naming the key, with the Secrets measured unreadable and the source cluster untouched.
Each claim of the drill's evidence is checked against what the test reads itself (etcd, the API, Barbican).
"""

from __future__ import annotations

import base64
import configparser
import contextlib
import io
import json
import os
import secrets as pysecrets
import socket
import subprocess
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import openstack
import pytest
import yaml
from k8s_fixtures import api_client_for
from kubernetes import client
from ansible.module_utils.testing import patch_module_args
from labtest import ADMIN_CLOUD, CLOUDS_YAML, LAB_HOME, USER_CLOUD, ansible_playbook

from ansible_collections.deployopen.k8s_openstack.plugins.modules import barbican_kms_key as kms_mod
from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils._evidence import verify_manifest

PLAYBOOK = "playbooks/drills/etcd_restore.yml"
SOURCE_ENDPOINTS = "http://127.0.0.1:23791,http://127.0.0.1:23792,http://127.0.0.1:23793"
# What the lab inventory gives the drill (inventories/lab/group_vars/all/etcd_restore.yml).
RESTORE_PORTS = [24791, 24792, 24793, 24801, 24802, 24803, 26543]
MARKER_NAMESPACE = "etcd-restore-drill"
MARKER_NAME = "etcd-restore-marker"
KEY_NAME = "lab-k8s-kms"
BUNDLE_FILES = {"record.json", "report.md", "junit.xml", "SHA256SUMS"}


# ------------------------------------------------------------------ helpers (independent of the drill)

def lab_key_id() -> str:
    """The key the lab cluster encrypts with, from the plugin cloud.conf the barbican_kms role rendered (site.yml,
    which `make test` runs before this file, as `make lab` does)."""
    cloud_conf = LAB_HOME / "k8s" / "barbican-kms" / "cloud.conf"
    if not cloud_conf.exists():
        pytest.fail(f"{cloud_conf} is missing: the drill needs the lab as site.yml leaves it (make lab)")
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(cloud_conf)
    return parser["KeyManager"]["key-id"].strip('"')


def etcdctl(*args: str) -> str:
    out = subprocess.run(["/usr/bin/etcdctl", f"--endpoints={SOURCE_ENDPOINTS}", "--dial-timeout=5s", *args, "-w", "json"],
                         env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True, text=True, check=True, timeout=30)
    return out.stdout


def source_member_ids() -> list[int]:
    return sorted(m["ID"] for m in json.loads(etcdctl("member", "list"))["members"])


def source_cluster_id() -> int:
    return int(json.loads(etcdctl("member", "list"))["header"]["cluster_id"])


def source_healthy() -> int:
    return sum(1 for e in json.loads(etcdctl("endpoint", "health")) if e["health"])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def marker_namespace_exists() -> bool:
    api = api_client_for(LAB_HOME / "kubeconfig")
    try:
        client.CoreV1Api(api).read_namespace(MARKER_NAMESPACE)
        return True
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    finally:
        api.close()


def set_acl(user_id: str, acl_state: str) -> dict[str, Any]:
    """barbican_kms_key as the key's owner (the cluster's service user) puts the user on, or takes it off, the
    key's read ACL (run in-process as Ansible would; the module-scoped fixtures cannot use run_module)."""
    args = {"cloud": USER_CLOUD, "name": KEY_NAME, "state": "present", "read_users": [user_id], "acl_state": acl_state,
            "_ansible_check_mode": False, "_ansible_diff": False}
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out):
        with pytest.raises(SystemExit):
            kms_mod.main()
    result: dict[str, Any] = json.loads(out.getvalue())
    assert result.get("failed") is not True, result
    return result


def acl_users(key_id: str) -> list[str]:
    conn = openstack.connect(cloud=USER_CLOUD)
    acl = conn.key_manager.request(f"/secrets/{key_id}/acl", "GET", headers={"Accept": "application/json"}).json()
    return list(acl["read"].get("users", []))


def processes_of(path: Path) -> list[int]:
    """Processes whose command line names the drill's work folder (the restored members and API server)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(path).encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@dataclass
class DrillRun:
    proc: subprocess.CompletedProcess[str]
    evidence_root: Path

    def bundle(self) -> Path:
        bundles = sorted((self.evidence_root / "etcd-restore").glob("*/"))
        assert len(bundles) == 1, bundles
        return bundles[0]

    def record(self) -> dict[str, Any]:
        return dict(json.loads((self.bundle() / "record.json").read_text()))

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr


@dataclass
class Runs:
    check: DrillRun
    passed: DrillRun
    failed: DrillRun
    work_dir: Path
    password: str
    marker_value: str
    user_id: str
    key_id: str
    members_before: list[int]
    cluster_id_before: int
    after_check: dict[str, Any]
    after: dict[str, Any]


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def restore_identity(lab_is_up: None, lab_etcd: Any) -> Iterator[dict[str, Any]]:
    """A throwaway user in a throwaway project (member there only): it can read the cluster's key only through
    the key's ACL. The ACL entry, the user and the project are removed afterwards."""
    identity: Any = openstack.connect(cloud=ADMIN_CLOUD).identity
    suffix = uuid.uuid4().hex[:8]
    project = identity.create_project(name=f"it-etcd-restore-{suffix}", domain_id="default")
    password = pysecrets.token_urlsafe(18)
    user = identity.create_user(name=f"it-etcd-restore-{suffix}", password=password, domain_id="default",
                                default_project_id=project.id)
    identity.assign_project_role_to_user(project, user, identity.find_role("member", ignore_missing=False))
    auth_url = yaml.safe_load(CLOUDS_YAML.read_text())["clouds"][USER_CLOUD]["auth"]["auth_url"]
    auth = {"auth_url": auth_url, "username": user.name, "password": password, "project_name": project.name,
            "user_domain_name": "Default", "project_domain_name": "Default"}
    try:
        yield {"auth": auth, "user_id": user.id, "password": password}
    finally:
        set_acl(user.id, "absent")
        identity.delete_user(user)
        identity.delete_project(project)


def run_drill(tmp: Path, name: str, extra_vars: dict[str, Any], *args: str) -> DrillRun:
    evidence = tmp / name / "evidence"
    vars_file = tmp / name / "vars.json"
    vars_file.parent.mkdir(parents=True)
    vars_file.write_text(json.dumps({**extra_vars, "k8s_openstack_evidence_root": str(evidence)}))
    vars_file.chmod(0o600)
    return DrillRun(ansible_playbook(PLAYBOOK, "-e", f"@{vars_file}", *args), evidence)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, restore_identity: dict[str, Any]) -> Runs:
    """Check mode, then a run with the key on the restore identity's ACL, then one with the ACL entry revoked."""
    tmp = tmp_path_factory.mktemp("etcd-restore")
    work_dir = tmp / "work"
    marker_value = pysecrets.token_urlsafe(24)
    key_id = lab_key_id()
    members_before, cluster_id_before = source_member_ids(), source_cluster_id()
    extra = {"etcd_restore_kms_auth": restore_identity["auth"], "etcd_restore_kms_auth_type": "password",
             "etcd_restore_work_dir": str(work_dir), "etcd_restore_marker_value": marker_value}

    check = run_drill(tmp, "check", extra, "--check")
    after_check = {"work_dir": work_dir.exists(), "ports": [p for p in RESTORE_PORTS if listening(p)],
                   "marker_namespace": marker_namespace_exists()}

    set_acl(restore_identity["user_id"], "present")
    assert restore_identity["user_id"] in acl_users(key_id)
    passed = run_drill(tmp, "pass", extra, "-vvv")

    revoked = set_acl(restore_identity["user_id"], "absent")
    assert revoked["changed"] is True, revoked
    assert restore_identity["user_id"] not in acl_users(key_id)
    failed = run_drill(tmp, "fail", extra, "-vvv")

    after = {"ports": [p for p in RESTORE_PORTS if listening(p)], "processes": processes_of(work_dir),
             "run_folders": sorted(str(p) for p in work_dir.glob("*/")) if work_dir.exists() else [],
             "marker_namespace": marker_namespace_exists(), "members": source_member_ids(),
             "healthy": source_healthy()}
    return Runs(check, passed, failed, work_dir, restore_identity["password"], marker_value,
                restore_identity["user_id"], key_id, members_before, cluster_id_before, after_check, after)


# ------------------------------------------------------------------ check mode

def test_check_mode_writes_nothing_and_starts_nothing(runs: Runs) -> None:
    run = runs.check
    assert run.proc.returncode == 0, run.output[-3000:]
    assert "Would restore restore-1, restore-2, restore-3" in run.proc.stdout
    assert runs.key_id in run.proc.stdout  # it says which key it would check
    assert "changed=0" in run.proc.stdout
    assert not run.evidence_root.exists()
    assert runs.after_check == {"work_dir": False, "ports": [], "marker_namespace": False}


# ------------------------------------------------------------------ key on the ACL: pass

def test_drill_passes_when_the_key_is_reachable(runs: Runs) -> None:
    run = runs.passed
    assert run.proc.returncode == 0, run.output[-4000:]
    record = run.record()
    assert record["verdict"] == "pass", record["clauses"]
    assert all(c["passed"] for c in record["clauses"])
    m = record["measured"]
    assert m["key_reachable_from_restore"] is True and m["key_http_status"] == 200
    assert m["restored_members_healthy"] == 3 and m["restored_cluster_isolated"] is True
    assert m["marker_objects_present"] is True and m["marker_secret_matches"] is True
    assert m["counts_match"] is True and m["secrets_unreadable"] == 0
    assert m["secrets_restored"] == m["secrets_at_snapshot"] >= 1
    assert m["services_restored"] == m["services_at_snapshot"] >= 1
    assert m["deployments_restored"] == m["deployments_at_snapshot"] >= 1
    assert m["source_cluster_untouched"] is True and m["restore_processes_left"] == 0
    for measure in ("snapshot_seconds", "restore_data_seconds", "members_up_seconds", "restore_env_up_seconds",
                    "restore_seconds", "verification_seconds"):
        assert 0 < float(m[measure]) < 120, (measure, m[measure])
    steps = {s["name"]: s for s in record["steps"]}
    key_step = steps["prove the Barbican key is reachable from the restore environment"]
    assert key_step["output"]["user_id"] == runs.user_id  # the throwaway identity, not the key's project
    assert key_step["output"]["payload_bytes"] == 32
    restore_step = steps["restore the snapshot into a new 3-member etcd and start it"]
    # The restored cluster is another cluster than the source (new token, new members).
    assert restore_step["output"]["source_cluster_id"] == str(runs.cluster_id_before)
    assert restore_step["output"]["restored_cluster_id"] not in ("", str(runs.cluster_id_before))
    assert sorted(restore_step["output"]["members"]) == ["restore-1", "restore-2", "restore-3"]
    check_step = steps["verify through the restore API server - marker objects, counts, every Secret decrypts"]
    at_snapshot = dict(check_step["output"]["at_snapshot"])
    assert f"{MARKER_NAMESPACE}/{MARKER_NAME}" in at_snapshot["Secret"]
    assert dict(check_step["output"]["restored"]) == at_snapshot


def test_pass_bundle_is_complete_and_verifiable(runs: Runs) -> None:
    bundle_is_verifiable(runs.passed, failures=0)


# ------------------------------------------------------------------ ACL revoked: fail, naming the key

def test_drill_fails_naming_the_key_when_it_is_unavailable(runs: Runs) -> None:
    run = runs.failed
    assert run.proc.returncode != 0
    assert "drill etcd-restore FAILED" in run.proc.stdout
    failure = next(line for line in run.output.splitlines() if "drill etcd-restore FAILED" in line)
    assert runs.key_id in failure and KEY_NAME in failure, failure
    assert "NOT reachable" in failure
    record = run.record()
    assert record["verdict"] == "fail"
    failed = sorted(c["measure"] for c in record["clauses"] if not c["passed"])
    assert failed == ["counts_match", "key_reachable_from_restore", "marker_objects_present",
                      "marker_secret_matches", "secrets_unreadable"]
    m = record["measured"]
    assert m["key_reachable_from_restore"] is False and m["key_http_status"] == 403
    # Every Secret of the snapshot was read on its own; the encrypted ones did not decrypt.
    assert m["secrets_unreadable"] >= 1 and m["secrets_unreadable"] <= m["secrets_at_snapshot"]
    steps = {s["name"]: s for s in record["steps"]}
    check_step = steps["verify through the restore API server - marker objects, counts, every Secret decrypts"]
    errors = dict(check_step["output"]["read_errors"])
    assert f"{MARKER_NAMESPACE}/{MARKER_NAME}" in errors
    assert all(runs.key_id in why and "403" in why for why in errors.values()), errors
    # The restore itself worked: only the key was missing.
    assert m["restored_members_healthy"] == 3 and m["services_restored"] == m["services_at_snapshot"]
    # And the source cluster was not touched - measured by the drill, in the bundle.
    assert m["source_cluster_untouched"] is True and m["source_members_unchanged"] is True
    assert m["source_members_healthy"] == 3 and m["source_marker_readable"] is True
    assert m["restore_processes_left"] == 0


def test_fail_bundle_is_complete_and_verifiable(runs: Runs) -> None:
    bundle_is_verifiable(runs.failed, failures=5)


def bundle_is_verifiable(run: DrillRun, failures: int) -> None:
    bundle = run.bundle()
    files = {p.name: p.read_bytes() for p in bundle.iterdir()}
    assert set(files) == BUNDLE_FILES
    assert verify_manifest(files["SHA256SUMS"].decode(), files) == []
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=bundle, capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and checked.stdout.count(": OK") == 3, checked.stdout + checked.stderr
    record = json.loads(files["record.json"])
    assert [c["measure"] for c in record["clauses"]] == [c["measure"] for c in record["drill"]["pass_rule"]["all"]]
    assert record["started_at"] < record["ended_at"]
    suite = ET.fromstring(files["junit.xml"]).find("testsuite")
    assert suite is not None and suite.get("failures") == str(failures)
    assert int(suite.get("tests", "0")) == len(record["steps"]) + len(record["clauses"])
    assert [s["status"] for s in record["steps"]] == ["ok"] * 7


# ------------------------------------------------------------------ afterwards

def test_everything_is_cleaned_up_and_the_source_untouched(runs: Runs) -> None:
    after = runs.after
    assert after["ports"] == [] and after["processes"] == []
    assert after["run_folders"] == []
    assert after["marker_namespace"] is False
    assert after["members"] == runs.members_before and after["healthy"] == 3
    assert runs.user_id not in acl_users(runs.key_id)


def test_no_secret_reaches_output_or_evidence(runs: Runs) -> None:
    secrets = {runs.password, runs.marker_value, base64.b64encode(runs.marker_value.encode()).decode(),
               (LAB_HOME / "data" / "k8s-api" / "token").read_text().strip()}
    secrets |= set(json.loads((LAB_HOME / "secrets.json").read_text()).values())
    secrets = {s for s in secrets if len(s) >= 6}
    assert len(secrets) >= 5
    places = {}
    for name, run in (("check", runs.check), ("pass -vvv", runs.passed), ("fail -vvv", runs.failed)):
        places[f"{name} stdout"] = run.proc.stdout
        places[f"{name} stderr"] = run.proc.stderr
        if run.evidence_root.exists():
            for path in run.evidence_root.rglob("*"):
                if path.is_file():
                    places[str(path)] = path.read_text(errors="replace")
    assert len(places) >= 6 + 8
    # Positive control: the -vvv output is verbose (module arguments are printed), so a leak would show.
    assert "<127.0.0.1> EXEC" in runs.passed.proc.stdout or "ESTABLISH LOCAL CONNECTION" in runs.passed.proc.stdout
    leaks = sorted(name for name, text in places.items() for secret in secrets if secret in text)
    assert leaks == []


# ------------------------------------------------------------------ a restore environment that does not come up

def test_a_restore_api_that_does_not_start_fails_the_run_and_leaves_nothing(tmp_path: Path, lab_is_up: None) -> None:
    work_dir = tmp_path / "work"
    run = run_drill(tmp_path, "broken-api", {
        "etcd_restore_work_dir": str(work_dir), "etcd_restore_api_timeout": 5,
        "etcd_restore_api_command": ["/bin/sh", "-c", "echo restore api server cannot serve on {port} >&2; exit 3"]})
    assert run.proc.returncode != 0
    failure = next(line for line in run.output.splitlines() if "drill etcd-restore FAILED" in line)
    assert "step failed: FAILED: Wait for the restore API server's kubeconfig" in failure, failure
    # The key was never measured: the message does not blame it.
    assert "key_reachable_from_restore: not measured" in failure and "NOT reachable" not in failure
    record = run.record()
    assert record["verdict"] == "fail"
    failed_step = record["steps"][-1]
    assert failed_step["status"] == "failed"
    # The API server's own words (its log, with the port filled in) are in the evidence.
    assert dict(failed_step["output"]["log_tails"])["api.log"] == "restore api server cannot serve on 26543\n"
    # The members it restored were running (healthy) before the failure, and are stopped now.
    assert record["measured"]["restored_members_healthy"] == 3
    assert [p for p in RESTORE_PORTS if listening(p)] == [] and processes_of(work_dir) == []
    assert list(work_dir.glob("*/")) == [] and not marker_namespace_exists()


def test_a_taken_port_refuses_the_run_before_anything_starts(tmp_path: Path, lab_is_up: None) -> None:
    work_dir = tmp_path / "work"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", RESTORE_PORTS[-1]))
        holder.listen(1)
        run = run_drill(tmp_path, "port-taken", {"etcd_restore_work_dir": str(work_dir)})
    assert run.proc.returncode != 0
    assert f"ports {RESTORE_PORTS[-1]} on 127.0.0.1 are in use" in run.output
    assert not (tmp_path / "port-taken" / "evidence").exists()  # refused before the drill was declared
    assert not work_dir.exists() and not marker_namespace_exists()
