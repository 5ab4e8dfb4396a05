"""The cloud_provider_openstack role through ansible-playbook against the lab's real Keystone, Neutron and Cinder:
rendered files equal the reviewed golden files (after masking what each run measures: credential, network IDs,
checksum), the credential in them is real and authenticates, a re-run changes nothing, check mode writes
nothing, the secret never reaches the output, and every bad input is refused before anything is created."""

from __future__ import annotations

import configparser
import hashlib
import json
import re
import stat
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import openstack
import pytest
from labtest import REPO, ansible_playbook, delete_family, list_family

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._keystone import (
    authenticate_application_credential,
)

PLAYBOOK = "tests/integration/playbooks/cloud_provider_openstack.yml"
GOLDEN = REPO / "tests" / "integration" / "golden" / "cloud_provider_openstack"
# Golden files carry a .golden suffix: with their @@PLACEHOLDERS@@ they are not valid YAML for linters.
SUFFIX = ".golden"
SECRET_FILES = ("cloud.conf", "cloud-config-secret.yaml", "manila-csi-secret.yaml")
REVIEW_FILES = ("values-openstack-cloud-controller-manager.yaml", "values-openstack-cinder-csi.yaml",
                "values-openstack-manila-csi.yaml", "storageclasses.yaml")
# The role without Neutron and Cinder: no network lookups, no StorageClasses (for what only needs Keystone).
KEYSTONE_ONLY = {"cloud_provider_openstack_floating_network_name": "", "cloud_provider_openstack_subnet_name": "",
                 "cloud_provider_openstack_storage_classes": []}


def require_services(conn: openstack.connection.Connection, *service_types: str) -> None:
    """Fail, saying what to run, when a service is absent from Keystone's catalog: the lab has them all, and a
    skip would hide a missing service."""
    service_catalog = conn.config.get_service_catalog()
    assert service_catalog is not None, "no service catalog: is the connection authenticated?"
    catalog = {entry["type"] for entry in service_catalog.catalog}
    missing = [t for t in service_types if t not in catalog]
    if missing:
        pytest.fail(f"the lab's Keystone catalog has no {', '.join(missing)} service: this test needs them "
                    f"(catalog: {', '.join(sorted(catalog))}); run `make lab-up`", pytrace=False)


def vars_file(tmp: Path, name: str, values: dict[str, Any]) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(values))
    return f"@{path}"


def run_role(out: Path, family: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # Render only: the lab cluster's Secrets (which its cloud-provider stand-ins use) are not the tests' to
    # overwrite with throwaway credentials; site.yml's test covers applying to the lab Kubernetes API.
    return ansible_playbook(PLAYBOOK, "-e", f"cloud_provider_openstack_output_dir={out}",
                            "-e", f"cloud_provider_openstack_credential_name={family}",
                            "-e", "cloud_provider_openstack_kubeconfig=", *extra)


def recap_changed(proc: subprocess.CompletedProcess[str]) -> int:
    match = re.search(r"lab-deployer\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", proc.stdout)
    assert match, proc.stdout[-3000:]
    return int(match.group(1))


def configured(out: Path) -> tuple[str, str]:
    parser = configparser.ConfigParser()
    parser.read(out / "cloud.conf")
    return parser["Global"]["application-credential-id"], parser["Global"]["application-credential-secret"]


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@dataclass
class Deployment:
    first: subprocess.CompletedProcess[str]
    second: subprocess.CompletedProcess[str]
    out: Path
    family: str
    files_after_first: dict[str, bytes]


@pytest.fixture(scope="module")
def deployed(lab_is_up: None, user_conn: openstack.connection.Connection,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The role on the lab inventory twice: the first run verbose (for the leak test), then the re-run."""
    require_services(user_conn, "network", "volumev3")
    family = f"it-cpo-{uuid.uuid4().hex[:8]}"
    out = tmp_path_factory.mktemp("cpo") / "out"
    try:
        first = run_role(out, family, "-vvv")
        files = snapshot(out) if out.exists() else {}
        second = run_role(out, family, "--diff")
        yield Deployment(first, second, out, family, files)
    finally:
        delete_family(user_conn, family)


def test_happy_path_files_equal_the_reviewed_goldens(deployed: Deployment,
                                                     user_conn: openstack.connection.Connection,
                                                     keystone_url: str) -> None:
    assert deployed.first.returncode == 0, deployed.first.stdout[-4000:]
    cred_id, secret = configured(deployed.out)
    # The credential is the family's only member in Keystone, and its secret really authenticates.
    assert [c.id for c in list_family(user_conn, deployed.family)] == [cred_id]
    outcome = authenticate_application_credential(keystone_url, cred_id, secret)
    assert outcome.authenticated and outcome.project_id == user_conn.current_project_id
    # Measured independently of the role: the IDs the names in the inventory stand for, the checksum of the file.
    network = user_conn.network.find_network("public", ignore_missing=False)
    subnet = user_conn.network.find_subnet("k8s-cluster-subnet", ignore_missing=False)
    checksum = hashlib.sha256((deployed.out / "cloud.conf").read_bytes()).hexdigest()
    masks = {cred_id: "@@CREDENTIAL_ID@@", secret: "@@CREDENTIAL_SECRET@@", network.id: "@@FLOATING_NETWORK_ID@@",
             subnet.id: "@@SUBNET_ID@@", checksum: "@@CLOUD_CONF_SHA256@@"}
    assert len(set(masks)) == 5 and all(len(value) >= 20 for value in masks)
    golden_names = sorted(p.name.removesuffix(SUFFIX) for p in GOLDEN.iterdir())
    assert sorted(p.name for p in deployed.out.iterdir()) == golden_names == sorted(SECRET_FILES + REVIEW_FILES)
    for name in golden_names:
        rendered = (deployed.out / name).read_text()
        for value, placeholder in masks.items():
            rendered = rendered.replace(value, placeholder)
        assert rendered == (GOLDEN / (name + SUFFIX)).read_text(), f"{name} differs from its golden file"


def test_file_modes_keep_the_secret_private(deployed: Deployment) -> None:
    assert deployed.first.returncode == 0, deployed.first.stdout[-3000:]
    assert stat.S_IMODE(deployed.out.stat().st_mode) == 0o700
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in deployed.out.iterdir()}
    assert modes == {**{n: 0o600 for n in SECRET_FILES}, **{n: 0o644 for n in REVIEW_FILES}}
    secret = configured(deployed.out)[1]
    assert sorted(n for n in modes if secret in (deployed.out / n).read_text()) == sorted(
        ["cloud.conf", "cloud-config-secret.yaml", "manila-csi-secret.yaml"])


def test_second_run_changes_nothing(deployed: Deployment, user_conn: openstack.connection.Connection) -> None:
    assert deployed.second.returncode == 0, deployed.second.stdout[-3000:]
    assert recap_changed(deployed.second) == 0
    assert deployed.files_after_first and snapshot(deployed.out) == deployed.files_after_first
    assert len(list_family(user_conn, deployed.family)) == 1
    assert "Ensure the configured credential is as declared" in deployed.second.stdout


def test_secret_never_reaches_the_output(deployed: Deployment) -> None:
    secret = configured(deployed.out)[1]
    assert len(secret) >= 20  # positive control: a real secret was written
    assert "ESTABLISH LOCAL CONNECTION" in deployed.first.stdout  # the first run was really verbose
    places = {"first run -vvv stdout": deployed.first.stdout, "first run stderr": deployed.first.stderr,
              "second run --diff stdout": deployed.second.stdout, "second run stderr": deployed.second.stderr}
    assert [name for name, text in places.items() if secret in text] == []


def test_check_mode_on_the_deployment_predicts_no_change(deployed: Deployment) -> None:
    before = snapshot(deployed.out)
    proc = run_role(deployed.out, deployed.family, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert recap_changed(proc) == 0
    assert snapshot(deployed.out) == before


def test_check_mode_writes_nothing_and_predicts(tmp_path: Path, user_conn: openstack.connection.Connection) -> None:
    require_services(user_conn, "network", "volumev3")
    family = f"it-cpo-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    try:
        proc = run_role(out, family, "--check", "--diff")
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert f"Would create and prove {family}-" in proc.stdout
        assert recap_changed(proc) >= 6  # credential, folder, cloud.conf, 2 Secrets, values, StorageClasses
        assert "+  name: standard" in proc.stdout  # --diff shows the non-secret files
        assert not out.exists()
        assert list_family(user_conn, family) == []
    finally:
        delete_family(user_conn, family)


def test_rotation_is_blue_green_and_rolls_the_pods(tmp_path: Path, user_conn: openstack.connection.Connection,
                                                   keystone_url: str) -> None:
    family = f"it-cpo-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    keystone_only = vars_file(tmp_path, "keystone-only", KEYSTONE_ONLY)
    try:
        first = run_role(out, family, "-e", keystone_only)
        assert first.returncode == 0, first.stdout[-3000:]
        old_id, old_secret = configured(out)
        old_values = (out / "values-openstack-cinder-csi.yaml").read_text()
        rotated = run_role(out, family, "-e", keystone_only, "-e", "cloud_provider_openstack_rotate_credential=true",
                           "--diff")
        assert rotated.returncode == 0, rotated.stdout[-3000:]
        new_id, new_secret = configured(out)
        assert new_id != old_id and new_secret != old_secret
        # --diff shows the changed checksum of the values files, never a secret.
        assert "+        checksum/cloud-config: " in rotated.stdout
        assert old_secret not in rotated.stdout + rotated.stderr and new_secret not in rotated.stdout + rotated.stderr
        # Blue/green: the predecessor stays (the cluster uses it until the new files are applied).
        assert sorted(c.id for c in list_family(user_conn, family)) == sorted([old_id, new_id])
        assert authenticate_application_credential(keystone_url, new_id, new_secret).authenticated
        assert authenticate_application_credential(keystone_url, old_id, old_secret).authenticated
        checksum = hashlib.sha256((out / "cloud.conf").read_bytes()).hexdigest()
        new_values = (out / "values-openstack-cinder-csi.yaml").read_text()
        assert new_values != old_values and new_values.count(f"checksum/cloud-config: {checksum}") == 2
        # The next plain run keeps the successor.
        again = run_role(out, family, "-e", keystone_only)
        assert again.returncode == 0 and recap_changed(again) == 0, again.stdout[-3000:]
        assert configured(out) == (new_id, new_secret)
        # Rotating with retirement keeps the newest two.
        retiring = run_role(out, family, "-e", keystone_only, "-e", "cloud_provider_openstack_rotate_credential=true",
                            "-e", "cloud_provider_openstack_retire_predecessors=true")
        assert retiring.returncode == 0, retiring.stdout[-3000:]
        assert sorted(c.id for c in list_family(user_conn, family)) == sorted([new_id, configured(out)[0]])
    finally:
        delete_family(user_conn, family)


def test_a_lost_cloud_conf_is_refused_not_papered_over(tmp_path: Path,
                                                       user_conn: openstack.connection.Connection) -> None:
    family = f"it-cpo-{uuid.uuid4().hex[:8]}"
    keystone_only = vars_file(tmp_path, "keystone-only", KEYSTONE_ONLY)
    try:
        first = run_role(tmp_path / "out", family, "-e", keystone_only)
        assert first.returncode == 0, first.stdout[-3000:]
        members = [c.id for c in list_family(user_conn, family)]
        proc = run_role(tmp_path / "elsewhere", family, "-e", keystone_only)
        assert proc.returncode != 0
        assert "cloud.conf holds no credential" in proc.stdout
        assert "cloud_provider_openstack_rotate_credential=true" in proc.stdout
        assert [c.id for c in list_family(user_conn, family)] == members
        assert not (tmp_path / "elsewhere").exists()
    finally:
        delete_family(user_conn, family)


LONG_CLUSTER = ".".join(["c" * 60] * 2)  # a valid DNS name of 121 characters


@pytest.mark.parametrize("case,overrides,message", [
    ("default cluster name", {"cloud_provider_openstack_cluster_name": "kubernetes"},
     "cluster name 'kubernetes' is a default"),
    ("kubespray default", {"cloud_provider_openstack_cluster_name": "cluster.local"},
     "cluster name 'cluster.local' is a default"),
    ("underscore", {"cloud_provider_openstack_cluster_name": "lab_k8s"}, "cluster name 'lab_k8s' contains '_'"),
    ("not a DNS name", {"cloud_provider_openstack_cluster_name": "Lab-K8s"}, "is not a DNS name"),
    ("load balancer name over 255", {"cloud_provider_openstack_cluster_name": LONG_CLUSTER,
                                     "cloud_provider_openstack_expected_services": [
                                         {"namespace": "n" * 63, "name": "s" * 63}]},
     "characters long; the cloud provider cuts it at 255"),
    ("two default classes", {"cloud_provider_openstack_storage_classes": [
        {"name": "a", "volume_type": "standard", "default": True},
        {"name": "b", "volume_type": "fast-ssd", "default": True}]},
     "more than one default storage class: a, b"),
    ("ovn without SOURCE_IP_PORT", {"cloud_provider_openstack_load_balancer": {"lb-provider": "ovn"}},
     "lb-provider ovn balances only by SOURCE_IP_PORT"),
    ("ovn with ROUND_ROBIN", {"cloud_provider_openstack_load_balancer": {"lb-provider": "ovn",
                                                                         "lb-method": "ROUND_ROBIN"}},
     "set lb-method to SOURCE_IP_PORT (it is ROUND_ROBIN)"),
])
def test_bad_input_is_refused_before_anything_happens(case: str, overrides: dict[str, Any], message: str,
                                                      tmp_path: Path, lab_is_up: None,
                                                      user_conn: openstack.connection.Connection) -> None:
    family = f"it-cpo-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    try:
        proc = run_role(out, family, "-e", vars_file(tmp_path, "case", overrides))
        assert proc.returncode != 0, f"{case}: accepted"
        assert message in proc.stdout, proc.stdout[-3000:]
        assert "Check the cluster name" in proc.stdout  # refused by the first step, before the cloud is asked
        assert not out.exists() and list_family(user_conn, family) == []
    finally:
        delete_family(user_conn, family)


@pytest.mark.parametrize("case,overrides,message", [
    ("missing volume type", {"cloud_provider_openstack_storage_classes": [
        {"name": "standard", "volume_type": "standard", "default": True},
        {"name": "gold", "volume_type": "gold-nvme"}]},
     "storage class 'gold': Cinder volume type 'gold-nvme' does not exist in the cloud"),
    ("retired by description", {"cloud_provider_openstack_storage_classes": [
        {"name": "legacy", "volume_type": "legacy-hdd"}]},
     "storage class 'legacy': Cinder volume type 'legacy-hdd' is retired (RETIRED:"),
    ("retired by the inventory", {"cloud_provider_openstack_retired_volume_types": ["fast-ssd"]},
     "storage class 'fast-ssd': Cinder volume type 'fast-ssd' is retired (listed in"),
])
def test_storage_classes_on_missing_or_retired_types_are_refused(case: str, overrides: dict[str, Any], message: str,
                                                                 tmp_path: Path,
                                                                 user_conn: openstack.connection.Connection) -> None:
    require_services(user_conn, "volumev3")
    # Positive control: the lab really has these types, and legacy-hdd is the retired one.
    types = {t.name: t.description or "" for t in user_conn.block_storage.types()}
    assert {"standard", "fast-ssd", "legacy-hdd"} <= set(types) and types["legacy-hdd"].startswith("RETIRED:")
    family = f"it-cpo-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    values = {"cloud_provider_openstack_floating_network_name": "", "cloud_provider_openstack_subnet_name": "",
              **overrides}
    try:
        proc = run_role(out, family, "-e", vars_file(tmp_path, "case", values))
        assert proc.returncode != 0, f"{case}: accepted"
        assert message in proc.stdout, proc.stdout[-3000:]
        assert not out.exists() and list_family(user_conn, family) == []
    finally:
        delete_family(user_conn, family)


def test_unknown_floating_network_is_refused(tmp_path: Path, user_conn: openstack.connection.Connection) -> None:
    require_services(user_conn, "network")
    family = f"it-cpo-{uuid.uuid4().hex[:8]}"
    values = {**KEYSTONE_ONLY, "cloud_provider_openstack_floating_network_name": "no-such-network"}
    try:
        proc = run_role(tmp_path / "out", family, "-e", vars_file(tmp_path, "case", values))
        assert proc.returncode != 0
        assert "floating network 'no-such-network': no network of that name is visible to the project" in proc.stdout
        assert not (tmp_path / "out").exists() and list_family(user_conn, family) == []
    finally:
        delete_family(user_conn, family)


def test_goldens_hold_no_real_secret() -> None:
    """The golden files are reviewed by people: only placeholders where the credential goes."""
    texts = {p.name.removesuffix(SUFFIX): p.read_text() for p in GOLDEN.iterdir()}
    assert texts["cloud.conf"].count("@@CREDENTIAL_SECRET@@") == 1
    assert not any(re.search(r"[0-9a-f]{32}", text) for text in texts.values())
