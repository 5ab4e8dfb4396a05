"""`site.yml` on the lab inventory - the `make lab` path - runs every play against the real lab cloud:
preflight passes (evidence written), the cloud-provider and Barbican KMS files are rendered and the
cloud-provider Secrets and StorageClasses applied to the lab Kubernetes API, and the drill rotates the
credential the cloud-provider role deployed."""

from __future__ import annotations

import base64
import configparser
import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from k8s_fixtures import KUBECTL
from labtest import LAB_HOME, ansible_playbook

pytestmark = pytest.mark.usefixtures("lab_is_up")


def newest_record(root: Path, drill: str) -> dict[str, object]:
    runs = sorted((root / drill).iterdir())
    assert runs, f"no evidence for {drill} under {root}"
    return dict(json.loads((runs[-1] / "record.json").read_text()))


def test_site_on_the_lab(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    proc = ansible_playbook("playbooks/site.yml", "-e", f"k8s_openstack_evidence_root={evidence}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert newest_record(evidence, "preflight")["verdict"] == "pass"
    assert newest_record(evidence, "credential-rotation")["verdict"] == "pass"
    provider = LAB_HOME / "k8s" / "cloud-provider-openstack"
    for name in ("cloud.conf", "cloud-config-secret.yaml", "storageclasses.yaml",
                 "values-openstack-cloud-controller-manager.yaml"):
        assert (provider / name).is_file(), name
    # The drill rotated the credential that cloud_provider_openstack deployed, in that role's cloud.conf.
    conf = configparser.ConfigParser()
    conf.read(provider / "cloud.conf")
    assert conf["Global"]["application-credential-id"]
    assert conf["LoadBalancer"]["lb-provider"] == "amphora"
    # Applied to the lab Kubernetes API: the cloud-config Secret holds that same cloud.conf, and the classes exist.
    kubeconfig = str(LAB_HOME / "kubeconfig")
    secret = json.loads(subprocess.run([KUBECTL, f"--kubeconfig={kubeconfig}", "-n", "kube-system", "get", "secret",
                                        "cloud-config", "-o", "json"], capture_output=True, text=True, check=True).stdout)
    # Compared by hash: an assertion message must not print the credential's secret.
    applied = hashlib.sha256(base64.b64decode(secret["data"]["cloud.conf"])).hexdigest()
    assert applied == hashlib.sha256((provider / "cloud.conf").read_bytes()).hexdigest(), \
        "the cloud-config Secret does not hold the rotated cloud.conf"
    classes = json.loads(subprocess.run([KUBECTL, f"--kubeconfig={kubeconfig}", "get", "storageclass", "-o", "json"],
                                        capture_output=True, text=True, check=True).stdout)
    assert {"standard", "fast-ssd"} <= {item["metadata"]["name"] for item in classes["items"]}
    kms = LAB_HOME / "k8s" / "barbican-kms"
    names_the_key = "key-id" in (kms / "cloud.conf").read_text()  # (no file content in a failure: it holds a password)
    assert names_the_key
    assert "k8s:enc" not in (kms / "encryption-config.yaml").read_text()
    assert "name: barbican" in (kms / "encryption-config.yaml").read_text()
