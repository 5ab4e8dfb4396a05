"""The credential-rotation drill end to end on the lab cluster, as `make lab` runs it: the credential the
cloud-provider stand-ins use is rotated, their cloud-config Secret rewritten, their workloads restarted; a
canary (LoadBalancer Service, PVC, pod) proves new operations before and after the old credential is retired,
and an existing LoadBalancer Service is checked every second throughout (zero failed checks is the rule).

Two fault runs come first, each injected at the same point (after the successor is created, before the
cluster is touched) by a test-only callback plugin:
- Keystone stopped (the lab's real Keystone process): the drill fails, nothing is retired, the consumer file
  is put back, and once Keystone is back the cluster works on the credential it had;
- a concurrent change of the cloud-config Secret: the drill's guarded write is refused (409), same outcome.
Then a normal run passes and retires what the failed runs left. Every verdict is read back from Keystone,
the lab Kubernetes API, the stand-ins' published status, Octavia and Cinder - not from the drill's own record.

These tests stop Keystone and rotate the lab cluster's own credential: `make test` runs them alone.
"""

from __future__ import annotations

import base64
import configparser
import hashlib
import json
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import openstack
import pytest
import requests
from k8s_fixtures import KUBECTL
from labtest import LAB_HOME, REPO, ansible_playbook, list_family, wait_for

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils._evidence import verify_manifest

pytestmark = pytest.mark.usefixtures("lab_is_up")

# What the lab inventory gives the drill (inventories/lab/group_vars/all/main.yml).
FAMILY = "lab-k8s-cloud-provider"
CONSUMER_CONF = LAB_HOME / "k8s" / "cloud-provider-openstack" / "cloud.conf"
KUBECONFIG = LAB_HOME / "kubeconfig"
DRILL_NAMESPACE = "credential-rotation-drill"
CLUSTER = "lab-k8s"
FAULT_POINT = "Create the successor and prove it"
CALLBACKS = Path(__file__).parent / "callback_plugins"


def kubectl_json(*args: str) -> Any:
    out = subprocess.run([KUBECTL, f"--kubeconfig={KUBECONFIG}", *args, "-o", "json"], capture_output=True,
                         text=True, check=True, timeout=60)
    return json.loads(out.stdout)


def secret_conf() -> str:
    secret = kubectl_json("-n", "kube-system", "get", "secret", "cloud-config")
    return base64.b64decode(secret["data"]["cloud.conf"]).decode()


def credential_of(conf_text: str) -> tuple[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(conf_text)
    return parser["Global"]["application-credential-id"], parser["Global"]["application-credential-secret"]


def sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def provider_status() -> dict[str, str]:
    return dict(kubectl_json("-n", "kube-system", "get", "configmap", "lab-cloud-provider").get("data") or {})


def authenticates(cred_id: str, secret: str) -> bool:
    """A token for the application credential, straight from Keystone (no module of the collection involved)."""
    credential = {"id": cred_id, "secret": secret}
    body: dict[str, Any] = {"auth": {"identity": {"methods": ["application_credential"],
                                                  "application_credential": credential}}}
    resp = requests.post(os.environ.get("LAB_KEYSTONE_URL", "http://127.0.0.1:25000/v3") + "/auth/tokens",
                         json=body, timeout=30)
    return resp.status_code == 201


def stand_ins_use(cred_id: str) -> bool:
    status = provider_status()
    return all(status.get(f"{c}.application-credential-id") == cred_id and status.get(f"{c}.error") == ""
               for c in ("ccm", "csi"))


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    evidence: Path
    seconds: float
    fault: dict[str, Any] = field(default_factory=dict)
    # What the cluster looked like right after the run (read back independently).
    secret_sha: str = ""
    consumer_sha: str = ""
    family_ids: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        bundles = sorted((self.evidence / "credential-rotation").glob("*/"))
        assert len(bundles) == 1, bundles
        return dict(json.loads((bundles[0] / "record.json").read_text()))

    def bundle(self) -> Path:
        return sorted((self.evidence / "credential-rotation").glob("*/"))[0]


def run_drill(tmp: Path, name: str, fault_command: list[str] | None = None, *extra: str) -> Run:
    evidence = tmp / name / "evidence"
    env: dict[str, str] = {}
    marker = tmp / name / "fault.json"
    if fault_command:
        env = {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": "fault_injection",
               "FAULT_AFTER_TASK": FAULT_POINT, "FAULT_COMMAND": json.dumps(fault_command), "FAULT_MARKER": str(marker)}
    started = time.monotonic()
    proc = ansible_playbook("playbooks/drills/credential_rotation.yml", "-e", f"k8s_openstack_evidence_root={evidence}",
                            *extra, env=env)
    run = Run(proc, evidence, round(time.monotonic() - started, 1))
    if fault_command:
        run.fault = json.loads(marker.read_text()) if marker.exists() else {}
    return run


def snapshot(run: Run, conn: Any) -> None:
    run.secret_sha = sha(secret_conf())
    run.consumer_sha = sha(CONSUMER_CONF.read_bytes())
    run.family_ids = sorted(c.id for c in list_family(conn, FAMILY))


@dataclass
class Runs:
    before: dict[str, Any]
    keystone_down: Run
    conflict: Run
    passed: Run
    after: dict[str, Any]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    tmp = tmp_path_factory.mktemp("rotation-e2e")
    conn = openstack.connect(cloud="lab-k8s-cluster")
    if not CONSUMER_CONF.exists():
        pytest.fail(f"{CONSUMER_CONF} is missing: these tests need the lab as site.yml leaves it (make lab)")
    old_id, old_secret = credential_of(secret_conf())
    wait_for("the stand-ins on the cluster's credential", lambda: stand_ins_use(old_id), 60, every=1)
    before = {"credential": old_id, "secret_sha": sha(secret_conf()), "consumer_sha": sha(CONSUMER_CONF.read_bytes()),
              "family_ids": sorted(c.id for c in list_family(conn, FAMILY)), "secret_value": old_secret}

    try:
        keystone_down = run_drill(tmp, "keystone-down", ["python3", "-m", "lab", "down", "keystone"])
    finally:
        subprocess.run(["python3", "-m", "lab", "up", "keystone"], cwd=REPO, capture_output=True, check=True, timeout=300)
    openstack.connect(cloud="lab-k8s-cluster").authorize()
    conn = openstack.connect(cloud="lab-k8s-cluster")
    snapshot(keystone_down, conn)
    wait_for("the stand-ins working on the old credential", lambda: stand_ins_use(old_id), 60, every=1)

    stamp = str(time.time())
    conflict = run_drill(tmp, "conflict", [KUBECTL, f"--kubeconfig={KUBECONFIG}", "-n", "kube-system", "annotate",
                                           "secret", "cloud-config", f"drills.deployopen.io/concurrent-change={stamp}",
                                           "--overwrite"])
    snapshot(conflict, conn)
    conflict.fault["annotation"] = stamp

    passed = run_drill(tmp, "pass", None, "-vvv")
    snapshot(passed, conn)
    new_id, new_secret = credential_of(secret_conf())
    after = {"credential": new_id, "secret_value": new_secret,
             "stand_ins_on_new": wait_for("the stand-ins on the new credential", lambda: stand_ins_use(new_id), 60, every=1),
             "old_authenticates": authenticates(old_id, old_secret),
             "new_authenticates": authenticates(new_id, new_secret)}
    yield Runs(before, keystone_down, conflict, passed, after)


def failed_step(record: dict[str, Any]) -> dict[str, Any]:
    failed = [s for s in record["steps"] if s["status"] == "failed"]
    assert len(failed) == 1, [s["name"] for s in failed]
    return dict(failed[0])


def assert_cluster_kept_its_credential(run: Run, before: dict[str, Any]) -> None:
    """Nothing retired, the cluster's Secret and the consumer file hold the credential they had, and it works."""
    assert run.secret_sha == before["secret_sha"], "the cluster's cloud-config Secret changed"
    assert run.consumer_sha == before["consumer_sha"], "the consumer file was not put back"
    assert before["credential"] in run.family_ids, "the credential in use was retired"
    record = run.record()
    assert record["measured"].get("consumer_config_restored") is True
    assert "predecessors_remaining" not in record["measured"]
    assert "cluster_secret_matches_consumer_config" not in record["measured"]


def test_keystone_down_mid_rotation_fails_and_the_cluster_keeps_its_credential(runs: Runs) -> None:
    run = runs.keystone_down
    assert run.fault.get("rc") == 0, run.fault  # the fault really happened, after the successor was created
    assert run.proc.returncode != 0
    record = run.record()
    assert record["verdict"] == "fail"
    step = failed_step(record)
    assert step["name"] == "FAILED: Prove the credential in the consumer configuration authenticates"
    assert "127.0.0.1:25000" in json.dumps(step["output"])  # the message names the Keystone it could not reach
    assert_cluster_kept_its_credential(run, runs.before)
    # The successor the failed run created is left for the next run to retire (it never reached the cluster).
    assert len(run.family_ids) == len(runs.before["family_ids"]) + 1
    assert run.secret_sha == runs.before["secret_sha"]


def test_rejected_secret_update_fails_and_the_cluster_keeps_its_credential(runs: Runs) -> None:
    run = runs.conflict
    assert run.fault.get("rc") == 0, run.fault
    assert run.proc.returncode != 0
    record = run.record()
    assert record["verdict"] == "fail"
    step = failed_step(record)
    assert step["name"] == "FAILED: Write the cloud-config Secret from the rotated cloud.conf"
    assert "409" in json.dumps(step["output"]) or "Conflict" in json.dumps(step["output"])
    assert_cluster_kept_its_credential(run, runs.before)
    # The concurrent change stands: not overwritten then, and kept by the next run (it writes the data only).
    secret = kubectl_json("-n", "kube-system", "get", "secret", "cloud-config")
    assert secret["metadata"]["annotations"]["drills.deployopen.io/concurrent-change"] == run.fault["annotation"]
    assert len(run.family_ids) == len(runs.before["family_ids"]) + 2


def test_the_next_run_passes_end_to_end(runs: Runs) -> None:
    run = runs.passed
    assert run.proc.returncode == 0, run.proc.stdout[-4000:]
    record = run.record()
    assert record["verdict"] == "pass"
    measured = record["measured"]
    rule = [c["measure"] for c in record["drill"]["pass_rule"]["all"]]
    assert {"canary_before_retire_passed", "canary_after_retire_passed", "watch_checks", "watch_failed_checks",
            "cluster_secret_matches_consumer_config"} <= set(rule)
    assert measured["canary_before_retire_passed"] is True and measured["canary_after_retire_passed"] is True
    assert measured["watch_failed_checks"] == 0
    # Checked every second from before the rotation to after the second canary: many checks, not one.
    assert measured["watch_checks"] >= 20
    assert measured["workloads_restarted"] == 3  # the CCM DaemonSet, the CSI Deployment and DaemonSet
    # It recovered what the failed runs left: the two unused successors and the old credential are retired.
    assert measured["predecessors_remaining"] == 0
    assert run.family_ids == [runs.after["credential"]]
    print(f"\n[numbers] drill {run.seconds}s; watch {measured['watch_checks']} checks, "
          f"{measured['watch_failed_checks']} failed, availability {measured['watch_availability']}; canary "
          f"before {measured['canary_before_retire_seconds']}s, after {measured['canary_after_retire_seconds']}s; "
          f"fault runs {runs.keystone_down.seconds}s, {runs.conflict.seconds}s")


def test_the_stand_ins_use_the_new_credential_and_the_old_one_is_dead(runs: Runs) -> None:
    assert runs.after["credential"] != runs.before["credential"]
    assert runs.after["stand_ins_on_new"]
    assert runs.after["new_authenticates"] is True
    assert runs.after["old_authenticates"] is False
    assert sha(CONSUMER_CONF.read_bytes()) == sha(secret_conf())


def test_the_canary_leaves_nothing_behind(runs: Runs) -> None:
    assert runs.passed.proc.returncode == 0
    for kind in ("service", "pvc", "pod"):
        names = [i["metadata"]["name"] for i in kubectl_json("-n", DRILL_NAMESPACE, "get", kind)["items"]]
        assert [n for n in names if n.startswith("canary-")] == [], kind
    conn = openstack.connect(cloud="lab-k8s-cluster")
    prefix = f"kube_service_{CLUSTER}_{DRILL_NAMESPACE}_canary-"
    assert [lb.name for lb in conn.load_balancer.load_balancers() if lb.name.startswith(prefix)] == []
    canary_pvs = {s["output"].get("persistent_volume") for s in runs.passed.record()["steps"] if "canary" in s["name"]}
    assert len(canary_pvs) == 2 and None not in canary_pvs
    assert [v.name for v in conn.block_storage.volumes() if v.name in canary_pvs] == []
    # The watched Service stays, with its load balancer: the next run watches it again.
    watched = kubectl_json("-n", DRILL_NAMESPACE, "get", "service", "watched")
    assert watched["status"]["loadBalancer"]["ingress"]


def test_bundles_verify_and_hold_no_secret(runs: Runs) -> None:
    secrets = {runs.before["secret_value"], runs.after["secret_value"]}
    secrets |= set(json.loads((LAB_HOME / "secrets.json").read_text()).values())
    secrets.discard("")
    assert len(secrets) >= 3
    places: dict[str, str] = {}
    for name, run in (("keystone-down", runs.keystone_down), ("conflict", runs.conflict), ("pass", runs.passed)):
        files = {p.name: p.read_bytes() for p in run.bundle().iterdir()}
        assert verify_manifest(files["SHA256SUMS"].decode(), files) == []
        suite = ET.fromstring(files["junit.xml"]).find("testsuite")
        assert suite is not None and (suite.get("failures") == "0") == (name == "pass")
        places.update({f"{name} {p}": v.decode(errors="replace") for p, v in files.items()})
        places[f"{name} stdout"] = run.proc.stdout
        places[f"{name} stderr"] = run.proc.stderr
    places["provider log"] = (LAB_HOME / "logs" / "cloud-provider.log").read_text(errors="replace")
    places["provider status"] = json.dumps(provider_status())
    leaks = sorted(name for name, text in places.items() for secret in secrets if secret in text)
    assert leaks == []
