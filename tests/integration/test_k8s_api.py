"""The lab Kubernetes API server through the official ``kubernetes`` client (typed APIs and DynamicClient).

Every test runs against the lab server (a real process on the lab's real etcd) and again against a real
cluster when $KUBECONFIG names one (the ``real`` variant is skipped otherwise). Tests that need what only
the lab gives (its etcd, Nodes we may create, a token we can withhold) say so and skip on a real cluster.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from k8s_fixtures import (Cluster, api_client_for, apps_api, coordination_api, core_api, start_lab_k8s, stop_lab_k8s,
                          storage_api)
from kubernetes import client, dynamic, watch
from kubernetes.client import ApiException

Obj = dict[str, Any]


def status_of(exc: ApiException) -> Obj:
    body: Obj = json.loads(exc.body or "{}")
    return body


def meta(name: str, **labels: str) -> client.V1ObjectMeta:
    return client.V1ObjectMeta(name=name, labels=labels or None)


def pod_body(name: str, node: str | None = None, **labels: str) -> Obj:
    spec: Obj = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def deployment_body(name: str, replicas: int = 1, containers: list[Obj] | None = None) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": containers or [
                                      {"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}}


# ------------------------------------------------------------------ discovery and auth

def test_version_and_discovery(cluster: Cluster) -> None:
    version = client.VersionApi(cluster.api).get_code()
    assert version.major == "1" and version.git_version.startswith("v1.")
    assert version.build_date  # the client's model rejects a missing buildDate
    core = core_api(cluster.api).get_api_resources()
    assert core.group_version == "v1"
    by_name = {r.name: r for r in core.resources}
    assert by_name["pods"].namespaced and "po" in by_name["pods"].short_names
    assert not by_name["nodes"].namespaced and "no" in by_name["nodes"].short_names
    eviction = by_name["pods/eviction"]
    # kubectl drain only evicts when pods/eviction names its group and version.
    assert (eviction.group, eviction.version, eviction.kind) == ("policy", "v1", "Eviction")
    assert {"pods/status", "services/status", "nodes/status"} <= set(by_name)
    assert set(by_name["configmaps"].verbs) >= {"create", "get", "list", "watch", "patch", "update", "delete"}
    groups = {g.name: g for g in client.ApisApi(cluster.api).get_api_versions().groups}
    for group in ("apps", "batch", "storage.k8s.io", "coordination.k8s.io"):
        assert "v1" in [v.version for v in groups[group].versions], group
    apps = {r.name for r in apps_api(cluster.api).get_api_resources().resources}
    assert {"deployments", "daemonsets", "statefulsets", "deployments/status", "deployments/scale"} <= apps
    dyn = dynamic.DynamicClient(cluster.api)
    for api_version, kind in (("v1", "Namespace"), ("v1", "Node"), ("v1", "Pod"), ("v1", "Service"),
                              ("v1", "Endpoints"), ("v1", "Secret"), ("v1", "ConfigMap"),
                              ("v1", "PersistentVolume"), ("v1", "PersistentVolumeClaim"), ("v1", "Event"),
                              ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"), ("apps/v1", "StatefulSet"),
                              ("batch/v1", "Job"), ("storage.k8s.io/v1", "StorageClass"),
                              ("storage.k8s.io/v1", "VolumeAttachment"), ("coordination.k8s.io/v1", "Lease")):
        assert dyn.resources.get(api_version=api_version, kind=kind).kind == kind


def test_requests_without_the_token_get_401(cluster: Cluster) -> None:
    lab = cluster.require_lab("a real cluster may answer anonymous requests with 403 instead")
    code, body = lab.raw("GET", "/api/v1/namespaces", token=None)
    assert code == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    code, body = lab.raw("GET", "/api/v1/namespaces", token="not-the-token")
    assert code == 401
    code, body = lab.raw("GET", "/api/v1/namespaces")
    assert code == 200 and body["kind"] == "NamespaceList"
    # The kubeconfig the server wrote is what the client used: CA, server URL, token, context lab.
    kubeconfig = json.loads(lab.kubeconfig.read_text())
    assert kubeconfig["current-context"] == "lab"
    assert kubeconfig["clusters"][0]["cluster"]["server"] == lab.url
    assert base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]) == lab.ca.read_bytes()
    assert kubeconfig["users"][0]["user"]["token"] == lab.token


# ------------------------------------------------------------------ CRUD and metadata

def test_configmap_crud_and_metadata(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    created = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("cm1"), data={"a": "1"}))
    assert created.metadata.uid and created.metadata.creation_timestamp and created.metadata.resource_version
    got = core.read_namespaced_config_map("cm1", namespace)
    assert got.data == {"a": "1"} and got.metadata.uid == created.metadata.uid
    got.data["b"] = "2"
    replaced = core.replace_namespaced_config_map("cm1", namespace, got)
    assert replaced.data == {"a": "1", "b": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert replaced.metadata.uid == created.metadata.uid
    assert replaced.metadata.creation_timestamp == created.metadata.creation_timestamp
    patched = core.patch_namespaced_config_map("cm1", namespace, {"data": {"a": None, "c": "3"}},
                                               _content_type="application/merge-patch+json")
    assert patched.data == {"b": "2", "c": "3"}
    listed = core.list_namespaced_config_map(namespace)
    assert "cm1" in [i.metadata.name for i in listed.items] and listed.metadata.resource_version
    core.delete_namespaced_config_map("cm1", namespace)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("cm1", namespace)
    assert err.value.status == 404


def test_dry_run_stores_nothing(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    answer = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("dry"), data={"a": "1"}),
                                               dry_run="All")
    assert answer.metadata.name == "dry" and answer.data == {"a": "1"}
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("dry", namespace)
    assert err.value.status == 404
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("dry"), data={"a": "1"}))
    core.patch_namespaced_config_map("dry", namespace, {"data": {"a": "2"}}, dry_run="All",
                                     _content_type="application/merge-patch+json")
    core.delete_namespaced_config_map("dry", namespace, dry_run="All")
    assert core.read_namespaced_config_map("dry", namespace).data == {"a": "1"}


def test_generate_name(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    names = {core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(generate_name="gen-"))).metadata.name for _attempt in range(3)}
    assert len(names) == 3 and all(n.startswith("gen-") and len(n) == len("gen-") + 5 for n in names)


def test_each_kind_through_the_dynamic_client(cluster: Cluster, namespace: str) -> None:
    """create, get, list, patch, replace, delete for every namespaced kind the collection touches."""
    dyn = dynamic.DynamicClient(cluster.api)
    bodies: list[tuple[str, str, Obj]] = [
        ("v1", "Service", {"spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}}),
        ("v1", "Endpoints", {"subsets": []}),
        ("v1", "Secret", {"stringData": {"k": "v"}}),
        ("v1", "ConfigMap", {"data": {"k": "v"}}),
        ("v1", "PersistentVolumeClaim", {"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none",
                                                  "resources": {"requests": {"storage": "1Gi"}}}}),
        ("v1", "Event", {"involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": namespace},
                         "reason": "Test", "message": "m", "type": "Normal"}),
        ("apps/v1", "Deployment", deployment_body("dep", 0)),
        ("apps/v1", "StatefulSet", {**deployment_body("sts", 0), "kind": "StatefulSet"}),
        ("apps/v1", "DaemonSet", {"spec": {**deployment_body("ds")["spec"], "replicas": None}}),
        ("batch/v1", "Job", {"spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}}),
        ("coordination.k8s.io/v1", "Lease", {"spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}),
    ]
    for api_version, kind, extra in bodies:
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        body = {k: v for k, v in extra.items() if k not in ("metadata",)}
        if kind == "DaemonSet":
            body["spec"] = {k: v for k, v in body["spec"].items() if k != "replicas"}
            # No node carries this label: a real cluster runs no pod for it.
            body["spec"]["template"]["spec"]["nodeSelector"] = {"lab-test/nowhere": "true"}
        name = f"{kind.lower()}-x"
        body.update(apiVersion=api_version, kind=kind, metadata={"name": name, "labels": {"t": "1"}})
        created = resource.create(body=body, namespace=namespace)
        assert created.metadata.name == name and created.metadata.uid, kind
        if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            assert created.metadata.generation == 1, kind
        assert resource.get(name=name, namespace=namespace).metadata.uid == created.metadata.uid
        assert name in [i.metadata.name for i in resource.get(namespace=namespace, label_selector="t=1").items]
        patched = resource.patch(name=name, namespace=namespace, body={"metadata": {"labels": {"p": "yes"}}},
                                 content_type="application/merge-patch+json")
        assert patched.metadata.labels["p"] == "yes", kind
        current = resource.get(name=name, namespace=namespace).to_dict()
        current["metadata"].setdefault("annotations", {})["replaced"] = "yes"
        replaced = resource.replace(body=current, namespace=namespace)
        assert replaced.metadata.annotations["replaced"] == "yes", kind
        resource.delete(name=name, namespace=namespace)
        with pytest.raises(ApiException) as err:
            resource.get(name=name, namespace=namespace)
        assert err.value.status == 404, kind


def test_cluster_scoped_kinds_with_typed_apis(cluster: Cluster) -> None:
    cluster.require_lab("creates Nodes, PersistentVolumes and VolumeAttachments")
    core, storage = core_api(cluster.api), storage_api(cluster.api)
    suffix = uuid.uuid4().hex[:6]
    node = core.create_node(client.V1Node(metadata=meta(f"node-{suffix}", zone="a")))
    assert node.metadata.uid and node.api_version == "v1"
    pv = core.create_persistent_volume(client.V1PersistentVolume(metadata=meta(f"pv-{suffix}"), spec=client.V1PersistentVolumeSpec(
        capacity={"storage": "1Gi"}, access_modes=["ReadWriteOnce"],
        csi=client.V1CSIPersistentVolumeSource(driver="cinder.csi.openstack.org", volume_handle="vol-1"))))
    assert pv.spec.persistent_volume_reclaim_policy == "Retain" and pv.status.phase == "Available"
    sc = storage.create_storage_class(client.V1StorageClass(metadata=meta(f"sc-{suffix}"),
                                                            provisioner="cinder.csi.openstack.org"))
    assert sc.reclaim_policy == "Delete" and sc.volume_binding_mode == "Immediate"
    va = storage.create_volume_attachment(client.V1VolumeAttachment(
        metadata=meta(f"va-{suffix}"), spec=client.V1VolumeAttachmentSpec(
            attacher="cinder.csi.openstack.org", node_name=f"node-{suffix}",
            source=client.V1VolumeAttachmentSource(persistent_volume_name=f"pv-{suffix}"))))
    assert va.status.attached is False
    va.status = client.V1VolumeAttachmentStatus(attached=True, attachment_metadata={"devicePath": "/dev/vdb"})
    assert storage.replace_volume_attachment_status(f"va-{suffix}", va).status.attached is True
    lease = coordination_api(cluster.api).create_namespaced_lease("kube-node-lease", client.V1Lease(
        metadata=meta(f"node-{suffix}"), spec=client.V1LeaseSpec(holder_identity=f"node-{suffix}",
                                                                 lease_duration_seconds=40)))
    assert lease.spec.holder_identity == f"node-{suffix}"
    for delete, name in ((storage.delete_volume_attachment, f"va-{suffix}"), (storage.delete_storage_class, f"sc-{suffix}"),
                         (core.delete_persistent_volume, f"pv-{suffix}"), (core.delete_node, f"node-{suffix}")):
        delete(name)
    coordination_api(cluster.api).delete_namespaced_lease(f"node-{suffix}", "kube-node-lease")
    assert f"node-{suffix}" not in [n.metadata.name for n in core.list_node().items]


def test_objects_live_in_etcd_like_kube_apiserver(cluster: Cluster, namespace: str) -> None:
    lab = cluster.require_lab("reads the lab's etcd")
    core = core_api(cluster.api)
    cm = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("stored"), data={"k": "v"}))
    svc = core.create_namespaced_service(namespace, client.V1Service(metadata=meta("web"), spec=client.V1ServiceSpec(
        ports=[client.V1ServicePort(port=80)])))
    for key, obj in ((f"/configmaps/{namespace}/stored", cm), (f"/services/specs/{namespace}/web", svc),
                     (f"/namespaces/{namespace}", core.read_namespace(namespace))):
        stored = lab.etcd_value(key)
        assert stored is not None, key
        value, mod_revision = stored
        document = json.loads(value)
        assert document["metadata"]["uid"] == obj.metadata.uid
        assert "resourceVersion" not in document["metadata"]  # kube-apiserver does not store it either
        assert str(mod_revision) == obj.metadata.resource_version
    assert svc.spec.cluster_ip.startswith("10.") and svc.spec.ports[0].target_port == 80


# ------------------------------------------------------------------ errors

def test_error_codes_are_status_objects(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("missing", namespace)
    status = status_of(err.value)
    assert (err.value.status, status["kind"], status["status"], status["reason"]) == (404, "Status", "Failure", "NotFound")
    assert status["details"]["name"] == "missing" and status["details"]["kind"] == "configmaps"
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("dup")))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("dup")))
    assert (err.value.status, status_of(err.value)["reason"]) == (409, "AlreadyExists")
    for bad in (client.V1ObjectMeta(name="Not_A_Name"), client.V1ObjectMeta()):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=bad))
        status = status_of(err.value)
        assert (err.value.status, status["reason"]) == (422, "Invalid")
        assert status["details"]["causes"][0]["field"] == "metadata.name"
    with pytest.raises(ApiException) as err:
        apps_api(cluster.api).create_namespaced_deployment(namespace, {
            **deployment_body("bad"), "spec": {**deployment_body("bad")["spec"], "selector": {"matchLabels": {"app": "other"}}}})
    assert (err.value.status, status_of(err.value)["reason"]) == (422, "Invalid")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(f"{namespace}-absent", client.V1ConfigMap(metadata=meta("x")))
    assert err.value.status == 404 and "namespaces" in status_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(namespace, label_selector="a in (")
    assert err.value.status == 400


def test_optimistic_concurrency(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("occ"), data={"n": "0"}))
    first = core.read_namespaced_config_map("occ", namespace)
    second = core.read_namespaced_config_map("occ", namespace)
    first.data["n"] = "1"
    core.replace_namespaced_config_map("occ", namespace, first)
    second.data["n"] = "2"
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("occ", namespace, second)
    assert (err.value.status, status_of(err.value)["reason"]) == (409, "Conflict")
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("occ", namespace, {"metadata": {"resourceVersion": second.metadata.resource_version},
                                                            "data": {"n": "3"}},
                                         _content_type="application/merge-patch+json")
    assert err.value.status == 409
    assert core.read_namespaced_config_map("occ", namespace).data == {"n": "1"}
    # A delete with a stale precondition is refused too.
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("occ", namespace, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version=second.metadata.resource_version)))
    assert err.value.status == 409
    # Without a resourceVersion an update is unconditional.
    core.replace_namespaced_config_map("occ", namespace, client.V1ConfigMap(metadata=meta("occ"), data={"n": "4"}))
    assert core.read_namespaced_config_map("occ", namespace).data == {"n": "4"}


def test_a_refused_namespace_delete_keeps_its_content(cluster: Cluster, namespace: str) -> None:
    """The lab API empties a namespace at once on delete: only after the delete's preconditions held."""
    core = core_api(cluster.api)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("kept"), data={"n": "1"}))
    with pytest.raises(ApiException) as err:
        core.delete_namespace(namespace, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="00000000-0000-0000-0000-000000000000")))
    assert err.value.status == 409
    assert core.read_namespaced_config_map("kept", namespace).data == {"n": "1"}


def test_concurrent_patches_all_land(cluster: Cluster, namespace: str) -> None:
    """Server-side retries of patches: ten writers at once, no update lost."""
    core = core_api(cluster.api)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("race"), data={}))
    errors: list[Exception] = []

    def writer(n: int) -> None:
        try:
            core.patch_namespaced_config_map("race", namespace, {"data": {f"k{n}": str(n)}},
                                             _content_type="application/merge-patch+json")
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert core.read_namespaced_config_map("race", namespace).data == {f"k{n}": str(n) for n in range(10)}


# ------------------------------------------------------------------ selectors

LABELLED = {"a": {"tier": "web", "env": "prod"}, "b": {"tier": "web", "env": "dev"},
            "c": {"tier": "db", "env": "prod"}, "d": {"other": "x"}}


@pytest.mark.parametrize(("selector", "expected"), [
    ("tier=web", {"a", "b"}),
    ("tier==web", {"a", "b"}),
    ("tier!=web", {"c", "d"}),
    ("env in (prod,staging)", {"a", "c"}),
    ("env notin (prod)", {"b", "d"}),
    ("tier", {"a", "b", "c"}),
    ("!tier", {"d"}),
    ("tier=web,env=prod", {"a"}),
    ("tier in (web,db),env!=dev", {"a", "c"}),
])
def test_label_selectors(cluster: Cluster, namespace: str, selector: str, expected: set[str]) -> None:
    core = core_api(cluster.api)
    for name, labels in LABELLED.items():
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta(name, **labels)))
    found = {i.metadata.name for i in core.list_namespaced_config_map(namespace, label_selector=selector).items}
    assert found == expected


def test_field_selectors(cluster: Cluster, namespace: str) -> None:
    cluster.require_lab("binds pods to nodes that do not exist and sets their phase")
    core = core_api(cluster.api)
    for name, node in (("p1", "n-a"), ("p2", "n-b"), ("p3", "n-a")):
        core.create_namespaced_pod(namespace, pod_body(name, node))
    # No such nodes: no kubelet starts them. Set one phase through the status subresource.
    core.patch_namespaced_pod_status("p3", namespace, {"status": {"phase": "Failed"}})

    def names(selector: str, all_namespaces: bool = False) -> set[str]:
        pods = (core.list_pod_for_all_namespaces(field_selector=selector) if all_namespaces
                else core.list_namespaced_pod(namespace, field_selector=selector))
        return {p.metadata.name for p in pods.items}

    assert names("spec.nodeName=n-a") == {"p1", "p3"}
    assert names("spec.nodeName=n-a,status.phase=Pending") == {"p1"}
    assert names("status.phase!=Pending") == {"p3"}
    assert names("metadata.name=p2") == {"p2"}
    assert names(f"metadata.namespace={namespace},spec.nodeName=n-b", all_namespaces=True) == {"p2"}
    with pytest.raises(ApiException) as err:
        names("spec.noSuchField=x")
    assert err.value.status == 400


# ------------------------------------------------------------------ watch

def test_watch_with_timeout_and_resume(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    start_rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("w1", watched="yes")))
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("w2")))
    core.patch_namespaced_config_map("w1", namespace, {"data": {"x": "1"}}, _content_type="application/merge-patch+json")
    core.delete_namespaced_config_map("w1", namespace)
    began = time.monotonic()
    events = [(e["type"], e["object"].metadata.name, e["object"].metadata.resource_version)
              for e in watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=start_rv,
                                            timeout_seconds=2)]
    elapsed = time.monotonic() - began
    assert [(t, n) for t, n, _rv in events] == [("ADDED", "w1"), ("ADDED", "w2"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    assert 1.5 <= elapsed < 8, elapsed  # the server ended the stream at timeoutSeconds
    # Resume after the MODIFIED event: only what came later.
    resumed = [(e["type"], e["object"].metadata.name)
               for e in watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=events[2][2],
                                             timeout_seconds=1)]
    assert resumed == [("DELETED", "w1")]
    # A label selector filters the stream.
    selected = [(e["type"], e["object"].metadata.name)
                for e in watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=start_rv,
                                              label_selector="watched=yes", timeout_seconds=1)]
    assert selected == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_watch_sees_live_changes(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    seen: list[tuple[str, str]] = []

    def consume() -> None:
        for event in watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=4):
            seen.append((event["type"], event["object"].metadata.name))

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(1)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("live")))
    thread.join(15)
    assert not thread.is_alive()
    assert ("ADDED", "live") in seen


def test_watch_from_a_compacted_revision_is_410(cluster: Cluster, namespace: str) -> None:
    lab = cluster.require_lab("compacts the lab's etcd")
    core = core_api(cluster.api)
    old_rv = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta("old"))).metadata.resource_version
    for value in ("b", "c"):
        core.patch_namespaced_config_map("old", namespace, {"data": {"a": value}},
                                         _content_type="application/merge-patch+json")
    # Compact the lab etcd's history up to now (what etcd's auto-compaction does on a real cluster).
    lab.etcd.compact(lab.etcd.revision())
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=old_rv, timeout_seconds=2))
    assert err.value.status == 410


def test_abandoned_watches_are_released(cluster: Cluster, namespace: str) -> None:
    """A client that goes away mid-watch frees the server's threads and etcd watch long before timeoutSeconds."""
    lab = cluster.require_lab("counts the server process's threads")
    tasks = Path(f"/proc/{lab.proc.pid}/task")
    baseline = len(list(tasks.iterdir()))
    context = ssl.create_default_context(cafile=str(lab.ca))
    connections = []
    for _connection in range(4):
        conn = http.client.HTTPSConnection("127.0.0.1", int(lab.url.rsplit(":", 1)[1]), context=context, timeout=10)
        conn.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=600",
                     headers={"Authorization": f"Bearer {lab.token}"})
        assert conn.getresponse().status == 200
        connections.append(conn)
    assert len(list(tasks.iterdir())) >= baseline + 4  # a handler (and a reader) per watch
    for conn in connections:
        conn.close()
    deadline = time.monotonic() + 15
    while len(list(tasks.iterdir())) > baseline and time.monotonic() < deadline:
        time.sleep(0.25)
    assert len(list(tasks.iterdir())) <= baseline


# ------------------------------------------------------------------ patch types

def test_patch_types(cluster: Cluster, namespace: str) -> None:
    apps = apps_api(cluster.api)
    body = deployment_body("patched", 0, containers=[
        {"name": "app", "image": "registry.k8s.io/pause:3.9", "env": [{"name": "A", "value": "1"}],
         "ports": [{"containerPort": 8080}]},
        {"name": "sidecar", "image": "registry.k8s.io/pause:3.9"}])
    apps.create_namespaced_deployment(namespace, body)
    # Strategic merge: the containers list merges by name, env by name, ports by containerPort.
    smp = {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "B", "value": "2"}], "ports": [{"containerPort": 9090}]}]}}}}
    result = apps.patch_namespaced_deployment("patched", namespace, smp,
                                              _content_type="application/strategic-merge-patch+json")
    containers = {c.name: c for c in result.spec.template.spec.containers}
    assert set(containers) == {"app", "sidecar"}
    assert [(e.name, e.value) for e in containers["app"].env] == [("A", "1"), ("B", "2")]
    assert sorted(p.container_port for p in containers["app"].ports) == [8080, 9090]
    assert result.metadata.generation == 2
    # A merge patch replaces the list (and a list without an image is invalid, as on a real cluster).
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("patched", namespace, smp, _content_type="application/merge-patch+json")
    assert err.value.status == 422 and "image" in status_of(err.value)["message"]
    smp["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    result = apps.patch_namespaced_deployment("patched", namespace, smp, _content_type="application/merge-patch+json")
    assert [c.name for c in result.spec.template.spec.containers] == ["app"]
    assert [e.name for e in result.spec.template.spec.containers[0].env] == ["B"]
    # kubectl rollout restart's patch: a template annotation.
    result = apps.patch_namespaced_deployment("patched", namespace, {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}},
        _content_type="application/strategic-merge-patch+json")
    assert result.spec.template.metadata.annotations == {"kubectl.kubernetes.io/restartedAt": "now"}
    # $patch: delete removes one item by its merge key.
    result = apps.patch_namespaced_deployment("patched", namespace, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "B", "$patch": "delete"}]}]}}}},
        _content_type="application/strategic-merge-patch+json")
    assert not result.spec.template.spec.containers[0].env
    # JSON patch, including a failing test operation (422).
    result = apps.patch_namespaced_deployment("patched", namespace, [
        {"op": "add", "path": "/metadata/labels", "value": {"via": "json-patch"}},
        {"op": "replace", "path": "/spec/replicas", "value": 0}])
    assert result.metadata.labels == {"via": "json-patch"}
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("patched", namespace, [
            {"op": "test", "path": "/metadata/labels/via", "value": "something-else"},
            {"op": "remove", "path": "/metadata/labels"}])
    assert err.value.status == 422
    assert apps.read_namespaced_deployment("patched", namespace).metadata.labels == {"via": "json-patch"}


def test_status_subresource_changes_only_status(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    core.create_namespaced_service(namespace, client.V1Service(metadata=meta("st"), spec=client.V1ServiceSpec(
        ports=[client.V1ServicePort(port=80)])))
    condition = {"type": "LabTest", "status": "True", "reason": "Testing", "message": "m",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    # Through /status: the status changes, a label in the same request does not.
    result = core.patch_namespaced_service_status("st", namespace, {"metadata": {"labels": {"sneaky": "1"}},
                                                                    "status": {"conditions": [condition]}},
                                                  _content_type="application/merge-patch+json")
    assert result.status.conditions[0].type == "LabTest"
    assert not (result.metadata.labels or {}).get("sneaky")
    # Through the main resource: spec/metadata change, status does not.
    result = core.patch_namespaced_service("st", namespace, {"metadata": {"labels": {"visible": "1"}},
                                                             "status": {"conditions": None}},
                                           _content_type="application/merge-patch+json")
    assert result.metadata.labels["visible"] == "1" and result.status.conditions[0].type == "LabTest"


def test_scale_subresource(cluster: Cluster, namespace: str) -> None:
    apps = apps_api(cluster.api)
    apps.create_namespaced_deployment(namespace, deployment_body("scaled", 0))
    scale = apps.read_namespaced_deployment_scale("scaled", namespace)
    assert scale.spec.replicas == 0 and scale.status.selector == "app=scaled"
    apps.patch_namespaced_deployment_scale("scaled", namespace, {"spec": {"replicas": 2}},
                                           _content_type="application/merge-patch+json")
    assert apps.read_namespaced_deployment("scaled", namespace).spec.replicas == 2
    assert apps.read_namespaced_deployment_scale("scaled", namespace).spec.replicas == 2
    apps.patch_namespaced_deployment_scale("scaled", namespace, {"spec": {"replicas": 0}},
                                           _content_type="application/merge-patch+json")
    assert apps.read_namespaced_deployment("scaled", namespace).spec.replicas == 0


def test_finalizers_hold_deletion(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(
        name="held", finalizers=["lab.deployopen.io/test"])))
    core.delete_namespaced_config_map("held", namespace)
    held = core.read_namespaced_config_map("held", namespace)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}},
                                     _content_type="application/merge-patch+json")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("held", namespace)
    assert err.value.status == 404


def test_delete_collection_by_label(cluster: Cluster, namespace: str) -> None:
    core = core_api(cluster.api)
    for name, labels in LABELLED.items():
        core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=meta(name, **labels)))
    core.delete_collection_namespaced_config_map(namespace, label_selector="tier=web")
    left = {i.metadata.name for i in core.list_namespaced_config_map(namespace).items} & set(LABELLED)
    assert left == {"c", "d"}


# ------------------------------------------------------------------ eviction and the lab's controllers

def test_eviction_deletes_the_pod(cluster: Cluster, namespace: str) -> None:
    cluster.require_lab("the pod never runs: its node does not exist")
    core = core_api(cluster.api)
    core.create_namespaced_pod(namespace, pod_body("evictee", "n-none"))
    core.create_namespaced_pod_eviction("evictee", namespace, client.V1Eviction(
        metadata=client.V1ObjectMeta(name="evictee", namespace=namespace)))
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("evictee", namespace)
    assert err.value.status == 404


def test_deployment_controller_runs_pods_on_schedulable_nodes(cluster: Cluster, namespace: str) -> None:
    cluster.require_lab("creates Nodes")
    core, apps = core_api(cluster.api), apps_api(cluster.api)
    suffix = uuid.uuid4().hex[:6]
    nodes = [f"ctl-{suffix}-1", f"ctl-{suffix}-2"]
    for node in nodes:
        core.create_node(client.V1Node(metadata=meta(node), spec=client.V1NodeSpec(unschedulable=node.endswith("-2"))))
    try:
        apps.create_namespaced_deployment(namespace, deployment_body("ctl", 3))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            deployment = apps.read_namespaced_deployment("ctl", namespace)
            if (deployment.status.available_replicas or 0) == 3:
                break
            time.sleep(0.3)
        assert deployment.status.observed_generation == deployment.metadata.generation
        assert (deployment.status.replicas, deployment.status.updated_replicas, deployment.status.ready_replicas) == (3, 3, 3)
        pods = core.list_namespaced_pod(namespace, label_selector="app=ctl").items
        assert len(pods) == 3
        for pod in pods:
            assert pod.spec.node_name == nodes[0]  # never the cordoned node
            assert pod.status.phase == "Running"
            owner = pod.metadata.owner_references[0]
            assert (owner.kind, owner.name, owner.controller) == ("Deployment", "ctl", True)
        # Deleting the Deployment takes its pods (the garbage collector's job).
        apps.delete_namespaced_deployment("ctl", namespace)
        deadline = time.monotonic() + 20
        while core.list_namespaced_pod(namespace, label_selector="app=ctl").items and time.monotonic() < deadline:
            time.sleep(0.3)
        assert not core.list_namespaced_pod(namespace, label_selector="app=ctl").items
    finally:
        for node in nodes:
            core.delete_node(node)


def test_no_kubelet_leaves_pod_status_to_another_process(tmp_path: Path, lab_etcd: Any) -> None:
    """With --no-kubelet the scheduler still binds pods, but only a status write makes them run."""
    server = start_lab_k8s(tmp_path, extra=["--no-kubelet"])
    try:
        api = api_client_for(server.kubeconfig)
        core = core_api(api)
        core.create_node(client.V1Node(metadata=meta("only-node")))
        core.create_namespaced_pod("default", pod_body("waiting"))
        deadline = time.monotonic() + 15
        while not core.read_namespaced_pod("waiting", "default").spec.node_name and time.monotonic() < deadline:
            time.sleep(0.3)
        time.sleep(2)  # time for a kubelet stand-in to act, if one ran
        pod = core.read_namespaced_pod("waiting", "default")
        assert pod.spec.node_name == "only-node" and pod.status.phase == "Pending"
        core.patch_namespaced_pod_status("waiting", "default", {"status": {"phase": "Running"}})
        assert core.read_namespaced_pod("waiting", "default").status.phase == "Running"
        api.close()
    finally:
        stop_lab_k8s(server)


def test_pods_of_a_removed_node_come_back_elsewhere(tmp_path: Path, lab_etcd: Any) -> None:
    """Pod GC: a Deployment's pod on a deleted Node is deleted after the quarantine and replaced elsewhere."""
    server = start_lab_k8s(tmp_path, extra=["--pod-gc-seconds", "4"])
    try:
        api = api_client_for(server.kubeconfig)
        core, apps = core_api(api), apps_api(api)
        core.create_node(client.V1Node(metadata=meta("first")))
        apps.create_namespaced_deployment("default", deployment_body("moving", 1))

        def pod_nodes() -> list[tuple[str, str]]:
            return [(p.spec.node_name, p.status.phase)
                    for p in core.list_namespaced_pod("default", label_selector="app=moving").items]

        deadline = time.monotonic() + 15
        while pod_nodes() != [("first", "Running")] and time.monotonic() < deadline:
            time.sleep(0.3)
        assert pod_nodes() == [("first", "Running")]
        core.delete_node("first")
        core.create_node(client.V1Node(metadata=meta("second")))
        time.sleep(1)
        assert pod_nodes() == [("first", "Running")]  # still in quarantine
        deadline = time.monotonic() + 20
        while pod_nodes() != [("second", "Running")] and time.monotonic() < deadline:
            time.sleep(0.3)
        assert pod_nodes() == [("second", "Running")]
        api.close()
    finally:
        stop_lab_k8s(server)
