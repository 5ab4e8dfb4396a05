"""The preflight against the lab's real Nova, Cinder, Neutron and Octavia: the module's readings agree with
what the services say, the role passes on the lab as seeded and fails, naming the cause, on each problem
(a quota lowered with the admin cloud and restored, a missing or retired volume type, an unknown Octavia
provider, an even etcd member count); check mode reports the same; the evidence holds the feature map.

A service absent from the lab's catalog fails the tests that need it, saying which (a skip would hide it)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import openstack
import pytest
import yaml
from labtest import ADMIN_CLOUD, CLOUDS_YAML, USER_CLOUD, ModuleRunner, ansible_playbook

from ansible_collections.deployopen.k8s_openstack.plugins.modules import cloud_capacity_info
from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils._evidence import verify_manifest

SERVICE_TYPES = {"compute": "Nova", "block-storage": "Cinder", "network": "Neutron", "load-balancer": "Octavia"}


@pytest.fixture(scope="session")
def lab_cloud(lab_is_up: None, user_conn: openstack.connection.Connection) -> openstack.connection.Connection:
    """The lab project's connection; fails (with the reason) when a service the preflight reads is not in the
    catalog or does not answer."""
    absent = [f"{name} ({stype})" for stype, name in SERVICE_TYPES.items() if not user_conn.has_service(stype)]
    if absent:
        pytest.fail(f"not in the lab's catalog: {', '.join(absent)} - the preflight reads them; run `make lab-up`",
                    pytrace=False)
    return user_conn


@pytest.fixture(scope="session")
def admin_conn(lab_is_up: None) -> openstack.connection.Connection:
    return openstack.connect(cloud=ADMIN_CLOUD)


@dataclass
class PreflightRun:
    proc: subprocess.CompletedProcess[str]
    evidence_root: Path

    @property
    def run_dir(self) -> Path:
        runs = sorted((self.evidence_root / "preflight").glob("*/"))
        assert len(runs) == 1, f"expected one bundle in {self.evidence_root}: {runs}\n{self.output[-3000:]}"
        return runs[0]

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    @property
    def record(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "record.json").read_text())

    def step(self, prefix: str) -> dict[str, Any]:
        return next(s for s in self.record["steps"] if s["name"].startswith(prefix))

    @property
    def check(self) -> dict[str, Any]:
        return self.step("set the planned cluster")["output"]

    def findings(self, check: str | None = None) -> list[dict[str, str]]:
        return [f for f in self.check["findings"] if check is None or f["check"] == check]


def run_preflight(tmp: Path, *extra: str, extra_vars: dict[str, Any] | None = None) -> PreflightRun:
    evidence = tmp / f"evidence-{uuid.uuid4().hex[:6]}"
    args = ["playbooks/preflight.yml", "-e", f"k8s_openstack_evidence_root={evidence}", *extra]
    if extra_vars:
        args += ["-e", json.dumps(extra_vars)]
    return PreflightRun(ansible_playbook(*args), evidence)


@pytest.fixture(scope="module")
def passing(tmp_path_factory: pytest.TempPathFactory, lab_cloud: openstack.connection.Connection) -> PreflightRun:
    """The lab as seeded, verbose (the secret-leak test greps its output)."""
    return run_preflight(tmp_path_factory.mktemp("preflight"), "-vvv")


# ------------------------------------------------------------------ the module against the services

def usage_by_the_services(admin: openstack.connection.Connection, user: openstack.connection.Connection,
                          project_id: str) -> dict[str, Any]:
    """Limits and usage read the services' own way (admin quota calls, the user's listings)."""
    compute = admin.compute.get_quota_set(project_id, usage=True)
    volumes = admin.block_storage.get_quota_set(project_id, usage=True)
    network = admin.network.get_quota(project_id, details=True)
    lb_quota = admin.load_balancer.get_quota(project_id)
    return {
        "compute.cores": (compute.cores, compute.usage["cores"]),
        "compute.instances": (compute.instances, len(list(user.compute.servers()))),
        "block_storage.gigabytes": (volumes.gigabytes, volumes.usage["gigabytes"]),
        "network.ports": (network.ports["limit"], len(list(user.network.ports(project_id=project_id)))),
        "network.floating_ips": (network.floating_ips["limit"], network.floating_ips["used"]),
        "load_balancer.load_balancers": (lb_quota.load_balancers, len(list(user.load_balancer.load_balancers()))),
        "load_balancer.listeners": (lb_quota.listeners, len(list(user.load_balancer.listeners()))),
    }


def test_module_reads_what_the_services_say(run_module: ModuleRunner, lab_cloud: openstack.connection.Connection,
                                            admin_conn: openstack.connection.Connection) -> None:
    project_id = str(lab_cloud.current_project_id)
    # Other suites share the project: compare only a reading taken while the usage stood still.
    for _attempt in range(5):
        before = usage_by_the_services(admin_conn, lab_cloud, project_id)
        result = run_module(cloud_capacity_info.main, {"cloud": USER_CLOUD})
        if usage_by_the_services(admin_conn, lab_cloud, project_id) == before:
            break
    else:
        pytest.fail("the project's usage kept changing while the module read it")
    assert result["changed"] is False and result["errors"] == {}, result.get("errors")
    assert result["project"]["id"] == project_id
    assert all(result["services"][s] for s in ("compute", "block_storage", "network", "load_balancer"))
    read = {key: (result["quotas"][key.split(".")[0]][key.split(".")[1]]["limit"],
                  result["quotas"][key.split(".")[0]][key.split(".")[1]]["in_use"]) for key in before}
    assert read == before
    assert result["quotas"]["compute"]["instances"]["in_use"] == len(result["servers"])
    assert result["quotas"]["load_balancer"]["load_balancers"]["in_use"] == len(result["load_balancers"])
    # The seed: flavors, the retired type, the Octavia offer, the nodes.
    assert {"lab.control", "lab.worker"} <= {f["name"] for f in result["flavors"]}
    types = {t["name"]: t for t in result["volume_types"]}
    assert {"standard", "fast-ssd", "legacy-hdd"} <= set(types)
    assert str(types["legacy-hdd"]["description"]).startswith("RETIRED:")
    assert "amphora" in {p["name"] for p in result["load_balancer_providers"]}
    assert "lb.small" in {f["name"] for f in result["load_balancer_flavors"]}
    assert {f"k8s-cluster-control-{i}" for i in (1, 2, 3)} <= set(result["servers"])


def test_module_reads_another_project_as_admin(run_module: ModuleRunner,
                                               lab_cloud: openstack.connection.Connection) -> None:
    mine = run_module(cloud_capacity_info.main, {"cloud": USER_CLOUD})
    theirs = run_module(cloud_capacity_info.main, {"cloud": ADMIN_CLOUD, "project": "k8s-cluster"})
    assert theirs["project"]["id"] == mine["project"]["id"]
    for service in ("compute", "block_storage", "network", "load_balancer"):
        assert {k: v["limit"] for k, v in theirs["quotas"][service].items()} == \
            {k: v["limit"] for k, v in mine["quotas"][service].items()}
    assert set(mine["servers"]) <= set(theirs["servers"])


def test_a_service_absent_from_the_catalog_is_reported_not_a_crash(run_module: ModuleRunner, lab_is_up: None) -> None:
    """openstacksdk hides a service when the cloud configuration says ``has_<service>: false``, as it would
    a cloud without Octavia: the module reports it absent and the plan's need for it as one finding."""
    entry = yaml.safe_load(CLOUDS_YAML.read_text())["clouds"][USER_CLOUD]
    plan = {"nodes": [{"role": "worker", "count": 1, "flavor": "lab.worker"}], "etcd_members": 3,
            "services": [{"namespace": "web", "name": "front", "ports": [80, 443]}], "octavia_provider": "amphora"}
    result = run_module(cloud_capacity_info.main, {"cloud": {**entry, "has_load_balancer": False}, "plan": plan})
    assert "failed" not in result, result.get("msg")
    assert result["services"]["load_balancer"] is False and result["services"]["identity"] is True
    assert "load_balancer" not in result["quotas"] and result["load_balancer_providers"] == []
    lb_findings = [f for f in result["preflight"]["findings"] if "load_balancer" in f["subject"]
                   or f["check"] == "octavia"]
    assert [(f["check"], f["subject"]) for f in lb_findings] == [("quota", "load_balancer"), ("octavia", "amphora")]
    assert "1 load_balancers, 2 listeners, 2 pools" in lb_findings[0]["message"]
    assert {r["status"] for r in result["preflight"]["rows"] if r["service"] == "load_balancer"} == {"absent"}
    assert entry["auth"]["password"] not in json.dumps(result)


def test_module_refuses_a_bad_plan_with_advice(run_module: ModuleRunner, lab_is_up: None) -> None:
    plan = {"nodes": [{"role": "worker", "count": 1, "flavor": "lab.worker"}], "etcd_members": 3,
            "pvcs": [{"name": "db", "size_gb": 1, "storage_class": "nowhere"}]}
    result = run_module(cloud_capacity_info.main, {"cloud": USER_CLOUD, "plan": plan})
    assert result["failed"] is True
    assert "the plan is not usable" in result["msg"] and "nowhere" in result["msg"]
    assert "Traceback" not in result["msg"]


def test_module_names_an_unknown_project(run_module: ModuleRunner, lab_is_up: None) -> None:
    result = run_module(cloud_capacity_info.main, {"cloud": ADMIN_CLOUD, "project": f"nope-{uuid.uuid4().hex[:6]}"})
    assert result["failed"] is True and "not found" in result["msg"]


# ------------------------------------------------------------------ the role

def test_passes_on_the_lab_as_seeded(passing: PreflightRun) -> None:
    assert passing.proc.returncode == 0, passing.output[-4000:]
    record = passing.record
    assert record["verdict"] == "pass" and record["measured"]["problems"] == 0
    assert passing.check["findings"] == []
    rows = {f"{r['service']}.{r['resource']}": r for r in passing.check["rows"]}
    # The seeded servers are the planned nodes: only the surge (1 x lab.worker) is demanded.
    assert rows["compute.instances"]["demand"] == 1
    assert "k8s-cluster-control-1" in " ".join(passing.check["demand_breakdown"])
    # Two Services (3 ports in all) that do not exist yet; PVCs 3 x 10 + 1 x 20 GiB.
    assert rows["load_balancer.load_balancers"]["demand"] == 2
    assert rows["load_balancer.listeners"]["demand"] == 3
    assert rows["block_storage.gigabytes"]["demand"] == 50
    assert all(r["status"] == "ok" for r in rows.values())
    assert "Preflight: PASS" in passing.output
    assert "| compute       | instances" in passing.output  # the table is printed


def test_evidence_bundle_holds_the_feature_map(passing: PreflightRun) -> None:
    run_dir = passing.run_dir
    files = {name: (run_dir / name).read_bytes() for name in ("record.json", "report.md", "junit.xml")}
    assert verify_manifest((run_dir / "SHA256SUMS").read_text(), files) == []
    step = passing.step("feature -> OpenStack service")
    features = {f["key"]: f for f in step["output"]["feature_map"]}
    assert {"node_lifecycle", "load_balancers", "block_storage", "identity", "secrets_encryption"} <= set(features)
    assert features["load_balancers"]["service"].startswith("Octavia")
    assert features["load_balancers"]["in_catalog"] is True
    assert features["block_storage"]["project"].startswith("k8s-cluster")
    assert features["identity"]["account"] == "k8s-cluster-cloud-provider"
    # The sign-off sheet is pinned by its hash in the record (which SHA256SUMS covers).
    signoff = (run_dir / "signoff.md").read_bytes()
    assert hashlib.sha256(signoff).hexdigest() == step["output"]["signoff_sha256"]
    text = signoff.decode()
    assert "| feature | consumer | OpenStack service | in catalog | project | account | owner | signed off by" in text
    assert "Barbican (key-manager)" in text and "Cinder CSI driver" in text
    assert "# Drill preflight: PASS" in files["report.md"].decode()


def test_no_secret_in_output_or_evidence(passing: PreflightRun) -> None:
    clouds = yaml.safe_load(CLOUDS_YAML.read_text())["clouds"]
    password = clouds[USER_CLOUD]["auth"]["password"]
    needle_is_real = bool(password) and password in CLOUDS_YAML.read_text()  # positive control (no secret shown)
    assert needle_is_real
    assert "-vvv" in " ".join(passing.proc.args)
    leaked = password in passing.output  # (a failure must not print the password)
    assert not leaked, "the cloud password is in the -vvv output"
    leaking = [path.name for path in passing.run_dir.iterdir() if password in path.read_text()]
    assert leaking == []


def test_check_mode_reports_the_same(passing: PreflightRun, tmp_path: Path) -> None:
    checked = run_preflight(tmp_path, "--check")
    assert checked.proc.returncode == 0, checked.output[-4000:]
    assert checked.record["verdict"] == passing.record["verdict"] == "pass"
    assert checked.check["findings"] == passing.check["findings"]
    # Limits and demand are the same (usage may move if other tests share the project at the same time).
    strip = [{k: r[k] for k in ("service", "resource", "limit", "demand", "status")} for r in checked.check["rows"]]
    assert strip == [{k: r[k] for k in ("service", "resource", "limit", "demand", "status")}
                     for r in passing.check["rows"]]
    assert "changed=0" in checked.output


@dataclass(frozen=True)
class QuotaCase:
    subject: str
    read: Callable[[openstack.connection.Connection, str], int]
    in_use: Callable[[openstack.connection.Connection, str], int]
    write: Callable[[openstack.connection.Connection, str, int], Any]


# Read, count and set each service's quota the service's own way (with the admin cloud).
QUOTA_CASES = [
    QuotaCase("compute.instances", lambda c, p: c.compute.get_quota_set(p).instances,
              lambda c, p: c.compute.get_quota_set(p, usage=True).usage["instances"],
              lambda c, p, v: c.compute.update_quota_set(p, instances=v)),
    QuotaCase("block_storage.gigabytes", lambda c, p: c.block_storage.get_quota_set(p).gigabytes,
              lambda c, p: c.block_storage.get_quota_set(p, usage=True).usage["gigabytes"],
              lambda c, p, v: c.block_storage.update_quota_set(p, gigabytes=v)),
    QuotaCase("network.floating_ips", lambda c, p: c.network.get_quota(p).floating_ips,
              lambda c, p: c.network.get_quota(p, details=True).floating_ips["used"],
              lambda c, p, v: c.network.update_quota(p, floating_ips=v)),
    QuotaCase("load_balancer.listeners", lambda c, p: c.load_balancer.get_quota(p).listeners,
              lambda c, p: len(list(c.load_balancer.listeners(project_id=p))),
              lambda c, p, v: c.load_balancer.update_quota(p, listeners=v)),
]


@pytest.mark.parametrize("case", QUOTA_CASES, ids=[c.subject for c in QUOTA_CASES])
def test_a_quota_too_small_fails_naming_it(case: QuotaCase, passing: PreflightRun, tmp_path: Path,
                                           lab_cloud: openstack.connection.Connection,
                                           admin_conn: openstack.connection.Connection) -> None:
    row = next(r for r in passing.check["rows"] if f"{r['service']}.{r['resource']}" == case.subject)
    assert row["demand"] >= 1, row
    project_id = str(lab_cloud.current_project_id)
    original = case.read(admin_conn, project_id)
    # One short of what the plan needs (never below what is in use, which some services refuse).
    lowered = case.in_use(admin_conn, project_id) + row["demand"] - 1
    try:
        case.write(admin_conn, project_id, lowered)
        assert case.read(admin_conn, project_id) == lowered
        failed = run_preflight(tmp_path)
    finally:
        case.write(admin_conn, project_id, original)
    assert case.read(admin_conn, project_id) == original
    assert failed.proc.returncode != 0
    assert failed.record["verdict"] == "fail"
    quota_findings = failed.findings("quota")
    assert [f["subject"] for f in quota_findings] == [case.subject], failed.check["findings_table"]
    assert "raise the quota by at least 1" in quota_findings[0]["message"]
    assert case.subject in failed.output and "Preflight FAILED, nothing was changed" in failed.output


@pytest.mark.parametrize("fast_type,expected", [
    (f"no-such-type-{uuid.uuid4().hex[:6]}", "does not exist"),
    ("legacy-hdd", "is retired"),
])
def test_a_bad_volume_type_fails_naming_it(fast_type: str, expected: str, tmp_path: Path,
                                           lab_cloud: openstack.connection.Connection) -> None:
    classes = [{"name": "standard", "volume_type": "standard"}, {"name": "fast", "volume_type": fast_type}]
    failed = run_preflight(tmp_path, extra_vars={"preflight_storage_classes": classes})
    assert failed.proc.returncode != 0
    assert [(f["subject"], f["severity"]) for f in failed.findings()] == [("fast", "error")]
    assert expected in failed.findings()[0]["message"] and fast_type in failed.findings()[0]["message"]
    assert fast_type in failed.output


def test_an_unknown_octavia_provider_fails_naming_it(tmp_path: Path,
                                                     lab_cloud: openstack.connection.Connection) -> None:
    failed = run_preflight(tmp_path, "-e", "preflight_octavia_provider=no-such-provider")
    assert failed.proc.returncode != 0
    assert [f["subject"] for f in failed.findings()] == ["provider no-such-provider"]
    assert "amphora" in failed.findings()[0]["message"]  # says what is available


def test_an_unknown_octavia_flavor_fails_naming_it(tmp_path: Path,
                                                   lab_cloud: openstack.connection.Connection) -> None:
    failed = run_preflight(tmp_path, "-e", "preflight_octavia_flavor=lb.huge")
    assert failed.proc.returncode != 0
    assert [f["subject"] for f in failed.findings()] == ["flavor lb.huge"]


def test_an_even_etcd_member_count_fails(tmp_path: Path, lab_cloud: openstack.connection.Connection) -> None:
    failed = run_preflight(tmp_path, "-e", "preflight_etcd_members=4")
    assert failed.proc.returncode != 0
    assert [(f["check"], f["severity"]) for f in failed.findings()] == [("etcd", "error")]
    assert "4 etcd members is even" in failed.output


def test_three_etcd_members_in_production_warn_but_pass(tmp_path: Path,
                                                        lab_cloud: openstack.connection.Connection) -> None:
    run = run_preflight(tmp_path, "-e", "preflight_environment=production")
    assert run.proc.returncode == 0, run.output[-3000:]
    assert [(f["check"], f["severity"]) for f in run.findings()] == [("etcd", "warning")]
    assert run.record["verdict"] == "pass" and run.record["measured"]["warnings"] == 1


def test_report_only_mode_records_the_failure_without_failing_the_play(
        tmp_path: Path, lab_cloud: openstack.connection.Connection) -> None:
    run = run_preflight(tmp_path, "-e", "preflight_etcd_members=2", "-e", "preflight_fail_on_problems=false")
    assert run.proc.returncode == 0, run.output[-3000:]
    assert run.record["verdict"] == "fail"
