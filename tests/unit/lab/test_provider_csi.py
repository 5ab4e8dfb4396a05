"""The Cinder CSI stand-in's decisions (lab/provider/logic.py): sizes, provisioning, PV, attachments, data."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from lab.provider import logic


@pytest.mark.parametrize(("quantity", "gib"), [
    ("1Gi", 1), ("1500Mi", 2), ("1G", 1), ("2Ti", 2048), ("100Mi", 1), ("1073741824", 1), ("1073741825", 2),
    ("0.5Gi", 1), ("10Gi", 10)])
def test_size_gib(quantity: str, gib: int) -> None:
    assert logic.size_gib(quantity) == gib


@pytest.mark.parametrize("quantity", ["", "1 GB", "ten", "1Xi"])
def test_bad_quantity(quantity: str) -> None:
    with pytest.raises(ValueError, match="not a storage quantity"):
        logic.quantity_bytes(quantity)


def sc(mode: str = "Immediate", provisioner: str = logic.CINDER_DRIVER, **params: str) -> dict[str, Any]:
    return {"metadata": {"name": "fast"}, "provisioner": provisioner, "parameters": params or {"type": "fast-ssd"},
            "reclaimPolicy": "Delete", "volumeBindingMode": mode}


def pvc(name: str = "data", volume: str = "", deleting: bool = False, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": "u-1", "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "now"
    return {"metadata": meta, "spec": {"storageClassName": "fast", "volumeName": volume,
                                       "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "3Gi"}}}}


def pod(name: str, claim: str, node: str = "", phase: str = "Running", ns: str = "ns",
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "annotations": annotations or {}},
            "spec": {"nodeName": node, "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("claim", "storage_class", "pods", "wanted", "why"), [
    (pvc(), sc(), [], True, ""),
    (pvc(volume="pvc-x"), sc(), [], False, "bound"),
    (pvc(deleting=True), sc(), [], False, "being deleted"),
    (pvc(), None, [], False, "not found"),
    (pvc(), sc(provisioner="manila.csi.openstack.org"), [], False, "is not cinder.csi.openstack.org's"),
    (pvc(), sc("WaitForFirstConsumer"), [], False, "waiting for first consumer"),
    (pvc(), sc("WaitForFirstConsumer"), [pod("p", "data")], False, "waiting for first consumer"),  # not scheduled
    (pvc(), sc("WaitForFirstConsumer"), [pod("p", "data", "w1")], True, ""),
    (pvc(), sc("WaitForFirstConsumer"), [pod("p", "data", "w1", ns="other")], False, "waiting"),
    (pvc(), sc("WaitForFirstConsumer"), [pod("p", "data", "w1", phase="Succeeded")], False, "waiting"),
    (pvc(annotations={logic.SELECTED_NODE_ANNOTATION: "w2"}), sc("WaitForFirstConsumer"), [], True, ""),
])
def test_needs_provisioning(claim: dict[str, Any], storage_class: dict[str, Any] | None, pods: list[dict[str, Any]],
                            wanted: bool, why: str) -> None:
    ok, reason = logic.needs_provisioning(claim, storage_class, pods)
    assert ok is wanted and why in reason


def test_volume_request() -> None:
    request = logic.volume_request(pvc(), sc(type="fast-ssd", availability="nova"), "lab-k8s")
    assert request == {"name": "pvc-u-1", "size": 3, "volume_type": "fast-ssd", "availability_zone": "nova",
                       "metadata": {"cinder.csi.openstack.org/cluster": "lab-k8s",
                                    "csi.storage.k8s.io/pvc/name": "data",
                                    "csi.storage.k8s.io/pvc/namespace": "ns",
                                    "csi.storage.k8s.io/pv/name": "pvc-u-1"}}
    assert "volume_type" not in logic.volume_request(pvc(), sc(**{"csi.storage.k8s.io/fstype": "xfs"}), "c")


def test_pv_body() -> None:
    body = logic.pv_body(pvc(), sc(**{"type": "fast-ssd", "csi.storage.k8s.io/fstype": "xfs"}), "vol-1", 3, "nova")
    spec = body["spec"]
    assert body["metadata"]["name"] == "pvc-u-1"
    assert body["metadata"]["finalizers"] == [logic.PROVISIONER_FINALIZER]
    assert spec["csi"]["driver"] == "cinder.csi.openstack.org" and spec["csi"]["volumeHandle"] == "vol-1"
    assert spec["csi"]["fsType"] == "xfs"
    assert spec["claimRef"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "data",
                                "namespace": "ns", "uid": "u-1"}
    assert (spec["capacity"], spec["persistentVolumeReclaimPolicy"], spec["storageClassName"]) == (
        {"storage": "3Gi"}, "Delete", "fast")
    term = spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": logic.CSI_ZONE_LABEL, "operator": "In", "values": ["nova"]}
    assert "nodeAffinity" not in logic.pv_body(pvc(), sc(), "vol-1", 3, "")["spec"]


def test_va_name_is_kube_controller_managers() -> None:
    expected = "csi-" + hashlib.sha256(b"vol-1cinder.csi.openstack.orgnode-a").hexdigest()
    assert logic.va_name("vol-1", logic.CINDER_DRIVER, "node-a") == expected


def pv(name: str, handle: str, driver: str = logic.CINDER_DRIVER) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"csi": {"driver": driver, "volumeHandle": handle}}}


def bound(name: str, volume: str, ns: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"volumeName": volume}}


PVS = [pv("pv-a", "vol-a"), pv("pv-m", "share-m", driver="manila.csi.openstack.org")]
CLAIMS = [bound("a", "pv-a"), bound("m", "pv-m"), bound("pending", "")]


@pytest.mark.parametrize(("pods", "wanted"), [
    ([pod("p", "a", "w1")], {("pv-a", "w1")}),
    ([pod("p", "a", "")], set()),                                  # not scheduled yet
    ([pod("p", "a", "w1", phase="Succeeded")], set()),             # finished: the volume may detach
    ([pod("p", "m", "w1")], set()),                                # not Cinder's
    ([pod("p", "pending", "w1")], set()),                          # claim not bound
    ([pod("p", "a", "w1", ns="other")], set()),                    # another namespace's claim "a"
    ([pod("p", "a", "w1"), pod("q", "a", "w2")], {("pv-a", "w1"), ("pv-a", "w2")}),
])
def test_desired_attachments(pods: list[dict[str, Any]], wanted: set[tuple[str, str]]) -> None:
    assert logic.desired_attachments(pods, CLAIMS, PVS) == wanted


def va(pv_name: str, node: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"va-{pv_name}-{node}"}
    if deleting:
        meta["deletionTimestamp"] = "now"
    return {"metadata": meta, "spec": {"attacher": logic.CINDER_DRIVER, "nodeName": node,
                                       "source": {"persistentVolumeName": pv_name}}}


@pytest.mark.parametrize(("wanted", "vas", "create", "delete"), [
    ({("pv-a", "w1")}, [], [("pv-a", "w1")], []),
    ({("pv-a", "w1")}, [va("pv-a", "w1")], [], []),
    # the pod moved: the new node's attachment is created, the old one deleted
    ({("pv-a", "w2")}, [va("pv-a", "w1")], [("pv-a", "w2")], ["va-pv-a-w1"]),
    # already being deleted: not deleted again
    (set(), [va("pv-a", "w1", deleting=True)], [], []),
    # a PV unknown to Cinder CSI: nothing to create
    ({("pv-zzz", "w1")}, [], [], []),
])
def test_plan_attachments(wanted: set[tuple[str, str]], vas: list[dict[str, Any]], create: list[tuple[str, str]],
                          delete: list[str]) -> None:
    to_create, to_delete = logic.plan_attachments(wanted, PVS, vas)
    assert [(b["spec"]["source"]["persistentVolumeName"], b["spec"]["nodeName"]) for b in to_create] == create
    for body in to_create:
        assert body["spec"]["attacher"] == logic.CINDER_DRIVER
        assert body["metadata"]["name"] == logic.va_name("vol-a", logic.CINDER_DRIVER, body["spec"]["nodeName"])
    assert to_delete == delete


def test_attached_servers_and_annotations() -> None:
    assert logic.attached_servers({"attachments": [{"server_id": "s1"}, {"server_id": None}]}) == {"s1"}
    assert logic.attached_servers({}) == set()
    assert logic.sha_annotation("db") == "lab.deployopen.io/volume-sha256.db"
    assert logic.write_key("p1", "db", "x") == logic.write_key("p1", "db", "x")
    assert logic.write_key("p1", "db", "x") != logic.write_key("p2", "db", "x")
    assert logic.write_key("p1", "db", "x") != logic.write_key("p1", "db", "y")


def test_claim_class_and_pod_claims() -> None:
    legacy = {"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "old"}}, "spec": {}}
    assert logic.claim_class(legacy) == "old"
    assert logic.claim_class(pvc()) == "fast"
    assert logic.pod_claims(pod("p", "a")) == ["a"]
    assert logic.pod_claims({"spec": {"volumes": [{"name": "x", "emptyDir": {}}]}}) == []
