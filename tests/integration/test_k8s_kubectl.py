"""kubectl against the lab Kubernetes API server: get, get -l, apply, cordon, drain, rollout restart/status.

Each test checks what kubectl claims through the Python client (not only kubectl's own output). The
server is a real process on the lab's etcd; kubectl is the machine's /usr/bin/kubectl.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from k8s_fixtures import KUBECTL, LabK8s, api_client_for, apps_api, core_api, kubectl
from kubernetes import client


@pytest.fixture(autouse=True, scope="module")
def kubectl_present() -> None:
    """A missing kubectl fails; a skip would hide it."""
    if not Path(KUBECTL).exists():
        pytest.fail(f"no kubectl at {KUBECTL}: install kubectl <= 1.36 (or set KUBECTL); 1.37 sends protobuf, "
                    "which the lab API does not speak", pytrace=False)


@pytest.fixture(scope="module")
def kube(lab_k8s: LabK8s) -> Iterator[tuple[LabK8s, client.ApiClient]]:
    api = api_client_for(lab_k8s.kubeconfig)
    yield lab_k8s, api
    api.close()


@pytest.fixture
def ns(kube: tuple[LabK8s, client.ApiClient]) -> Iterator[str]:
    name = f"kc-{uuid.uuid4().hex[:8]}"
    core_api(kube[1]).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core_api(kube[1]).delete_namespace(name)


@pytest.fixture
def nodes(kube: tuple[LabK8s, client.ApiClient]) -> Iterator[list[str]]:
    """Two Ready worker Nodes of this test's own (deleted afterwards)."""
    core = core_api(kube[1])
    suffix = uuid.uuid4().hex[:6]
    names = [f"worker-{suffix}-1", f"worker-{suffix}-2"]
    for index, name in enumerate(names):
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "node-role.kubernetes.io/worker": "", "lab-test": suffix, "slot": str(index + 1)}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": f"10.20.0.{50 + index}"}]}})
    yield names
    for name in names:
        try:
            core.delete_node(name)
        except client.ApiException:
            pass


def ok(result: Any) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return str(result.stdout)


def wait_until(what: str, check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what}: not true after {timeout}s")


def manifest(ns: str, suffix: str, image: str = "registry.k8s.io/pause:3.9") -> str:
    docs = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns, "labels": {"app": "web"}},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                      "nodeSelector": {"lab-test": suffix},
                      "containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}],
                      "volumes": [{"name": "scratch", "emptyDir": {}}]}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": ns},
         "spec": {"selector": {"matchLabels": {"app": "agent"}},
                  "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
                      "nodeSelector": {"lab-test": suffix},
                      "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.9"}]}}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": ns},
         "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                  "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                      "nodeSelector": {"lab-test": suffix},
                      "containers": [{"name": "db", "image": "registry.k8s.io/pause:3.9"}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]}},
    ]
    return str(yaml.safe_dump_all(docs))


def test_get_nodes_and_label_selection(kube: tuple[LabK8s, client.ApiClient], nodes: list[str]) -> None:
    server, _api = kube
    out = ok(kubectl(server.kubeconfig, "get", "nodes"))
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split()[:3] == ["NAME", "STATUS", "ROLES"]
    for name in nodes:
        assert lines[name][1] == "Ready" and lines[name][2] == "worker"
    selected = ok(kubectl(server.kubeconfig, "get", "nodes", "-l", "slot=2", "-o", "name")).split()
    assert selected == [f"node/{nodes[1]}"]
    both = ok(kubectl(server.kubeconfig, "get", "no", "-l", f"lab-test={nodes[0].split('-')[1]},slot in (1,2)",
                      "-o", "jsonpath={.items[*].metadata.name}")).split()
    assert sorted(both) == sorted(nodes)
    failed = kubectl(server.kubeconfig, "get", "nodes", "no-such-node")
    assert failed.returncode != 0 and "NotFound" in failed.stderr


def test_get_watch_prints_rows(kube: tuple[LabK8s, client.ApiClient], ns: str, nodes: list[str]) -> None:
    """kubectl get -w: the watch events come as server-side table rows, like the list."""
    server, api = kube
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    watcher = subprocess.Popen([KUBECTL, "--kubeconfig", str(server.kubeconfig), "get", "pods", "-n", ns, "-w",
                                "--request-timeout=0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env)
    try:
        time.sleep(2)
        core_api(api).create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "watched"},
                                                 "spec": {"nodeName": nodes[0], "containers": [
                                                     {"name": "c", "image": "registry.k8s.io/pause:3.9"}]}})
        time.sleep(3)
    finally:
        watcher.terminate()
        output, _stderr = watcher.communicate(timeout=10)
    rows = [line.split() for line in output.splitlines() if line.startswith("watched")]
    assert rows, output
    assert rows[-1][1:3] == ["1/1", "Running"], output  # READY and STATUS columns, not a bare NAME/AGE


def test_apply_create_unchanged_configure(kube: tuple[LabK8s, client.ApiClient], ns: str, nodes: list[str]) -> None:
    server, api = kube
    suffix = nodes[0].split("-")[1]
    first = ok(kubectl(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=manifest(ns, suffix)))
    assert "deployment.apps/web created" in first and "service/web created" in first
    again = ok(kubectl(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=manifest(ns, suffix)))
    assert "deployment.apps/web unchanged" in again and "service/web unchanged" in again
    changed = ok(kubectl(server.kubeconfig, "apply", "--validate=false", "-f", "-",
                         stdin=manifest(ns, suffix, image="registry.k8s.io/pause:3.10")))
    assert "deployment.apps/web configured" in changed
    deployment = apps_api(api).read_namespaced_deployment("web", ns)
    assert deployment.spec.template.spec.containers[0].image == "registry.k8s.io/pause:3.10"
    assert deployment.metadata.generation == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in deployment.metadata.annotations
    ok(kubectl(server.kubeconfig, "rollout", "status", "-n", ns, "deployment/web", "--timeout=30s"))
    pods = core_api(api).list_namespaced_pod(ns, label_selector="app=web").items
    assert len(pods) == 2 and {p.spec.containers[0].image for p in pods} == {"registry.k8s.io/pause:3.10"}


def test_cordon_and_drain(kube: tuple[LabK8s, client.ApiClient], ns: str, nodes: list[str]) -> None:
    server, api = kube
    core = core_api(api)
    suffix = nodes[0].split("-")[1]
    ok(kubectl(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=manifest(ns, suffix)))
    for workload in ("deployment/web", "daemonset/agent", "statefulset/db"):
        ok(kubectl(server.kubeconfig, "rollout", "status", "-n", ns, workload, "--timeout=30s"))
    target = nodes[0]
    ok(kubectl(server.kubeconfig, "cordon", target))
    assert core.read_node(target).spec.unschedulable is True
    assert "SchedulingDisabled" in ok(kubectl(server.kubeconfig, "get", "node", target))
    # Without --ignore-daemonsets kubectl refuses (the DaemonSet pod cannot be evicted for good).
    refused = kubectl(server.kubeconfig, "drain", target, "--delete-emptydir-data", "--timeout=20s")
    assert refused.returncode != 0 and "DaemonSet" in refused.stderr
    drained = ok(kubectl(server.kubeconfig, "drain", target, "--ignore-daemonsets", "--delete-emptydir-data",
                         "--timeout=60s"))
    assert f"node/{target} drained" in drained

    def on_target(selector: str) -> list[Any]:
        return [p for p in core.list_namespaced_pod(ns, label_selector=selector).items if p.spec.node_name == target]

    assert not on_target("app=web") and not on_target("app=db")
    assert len(on_target("app=agent")) == 1  # the DaemonSet's pod stays
    # The controllers replaced the evicted pods on the other node, and they run.
    wait_until("web and db back to full strength elsewhere", lambda: all(
        len([p for p in core.list_namespaced_pod(ns, label_selector=s).items
             if p.spec.node_name == nodes[1] and p.status.phase == "Running"]) == 2 for s in ("app=web", "app=db")))
    ok(kubectl(server.kubeconfig, "uncordon", target))
    assert not core.read_node(target).spec.unschedulable


def test_rollout_restart_and_status(kube: tuple[LabK8s, client.ApiClient], ns: str, nodes: list[str]) -> None:
    server, api = kube
    apps, core = apps_api(api), core_api(api)
    suffix = nodes[0].split("-")[1]
    ok(kubectl(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=manifest(ns, suffix)))
    ok(kubectl(server.kubeconfig, "rollout", "status", "-n", ns, "deployment/web", "--timeout=30s"))
    before = {p.metadata.uid for p in core.list_namespaced_pod(ns, label_selector="app=web").items}
    generation = apps.read_namespaced_deployment("web", ns).metadata.generation
    for workload in ("deployment/web", "daemonset/agent", "statefulset/db"):
        assert "restarted" in ok(kubectl(server.kubeconfig, "rollout", "restart", "-n", ns, workload))
    deployment = apps.read_namespaced_deployment("web", ns)
    assert "kubectl.kubernetes.io/restartedAt" in deployment.spec.template.metadata.annotations
    assert deployment.metadata.generation == generation + 1
    for workload in ("deployment/web", "daemonset/agent", "statefulset/db"):
        out = ok(kubectl(server.kubeconfig, "rollout", "status", "-n", ns, workload, "--timeout=60s"))
        assert "successfully rolled out" in out or "roll out complete" in out, out
    deployment = apps.read_namespaced_deployment("web", ns)
    assert deployment.status.observed_generation == deployment.metadata.generation
    after = core.list_namespaced_pod(ns, label_selector="app=web").items
    assert len(after) == 2 and not before & {p.metadata.uid for p in after}  # every pod replaced
    assert all(p.metadata.annotations["kubectl.kubernetes.io/restartedAt"] for p in after)


def test_rollout_status_times_out_when_pods_cannot_run(kube: tuple[LabK8s, client.ApiClient], ns: str) -> None:
    server, api = kube
    stuck = yaml.safe_dump(next(yaml.safe_load_all(manifest(ns, "no-node-has-this-label"))))
    ok(kubectl(server.kubeconfig, "apply", "--validate=false", "-f", "-", stdin=stuck))
    began = time.monotonic()
    result = kubectl(server.kubeconfig, "rollout", "status", "-n", ns, "deployment/web", "--timeout=3s")
    assert result.returncode != 0 and time.monotonic() - began < 30
    pods = core_api(api).list_namespaced_pod(ns, label_selector="app=web").items
    assert len(pods) == 2 and all(p.status.phase == "Pending" and not p.spec.node_name for p in pods)
