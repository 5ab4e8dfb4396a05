"""The cloud-provider stand-ins (``python -m lab.provider``) against the REAL lab cloud and a lab Kubernetes API
server of this module's own (own etcd prefix), authenticated by an application credential this module creates
(and deletes): Node registration and lifecycle, LoadBalancer Services in Octavia with floating IPs, the leak
fault switch, Cinder CSI provisioning, attach, move and reattach with the data checked, and the credential
"restart" on a Deployment template change.

Every verdict is read back from the cloud (openstacksdk as the tenant) or the API; the timings are measured
and printed (run with ``-s``) and written to the provider's state dir (timings.json).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import openstack
import pytest
from k8s_fixtures import LabK8s, start_lab_k8s, stop_lab_k8s
from labtest import REPO, wait_for

from lab.provider import logic

Obj = dict[str, Any]
PROVIDER_PYTHON = Path(os.environ.get("LAB_HOME", REPO / ".lab")) / "venv" / "bin" / "python"
SERVICES_NS = "kube-system"


@dataclass
class World:
    k8s: LabK8s
    conn: Any  # openstacksdk's proxies are typed as unions of API versions
    cluster: str
    state_dir: Path
    proc: subprocess.Popen[bytes]
    log: Path
    credentials: list[tuple[str, str]]  # (id, secret) created by this module
    ids: dict[str, str]
    servers: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)

    def api(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        return self.k8s.raw(method, path, body, headers={"Content-Type": content_type})

    def get(self, path: str) -> Obj | None:
        code, body = self.api("GET", path)
        if code == 404:
            return None
        assert code == 200, (path, code, body)
        return dict(body)

    def create(self, path: str, body: Obj) -> Obj:
        code, created = self.api("POST", path, body)
        assert code in (200, 201), (path, code, created)
        return dict(created)

    def patch(self, path: str, body: Obj) -> Obj:
        code, patched = self.api("PATCH", path, body, "application/merge-patch+json")
        assert code == 200, (path, code, patched)
        return dict(patched)

    def delete(self, path: str) -> None:
        code, body = self.api("DELETE", path)
        assert code in (200, 202, 404), (path, code, body)

    def status(self) -> dict[str, str]:
        cm = self.get(f"/api/v1/namespaces/{SERVICES_NS}/configmaps/lab-cloud-provider") or {}
        return dict(cm.get("data") or {})

    def record(self, name: str, seconds: float) -> None:
        self.timings[name] = round(seconds, 2)
        print(f"\n[timing] {name}: {seconds:.2f}s")
        (self.state_dir / "timings.json").write_text(json.dumps(self.timings, indent=2) + "\n")

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])


def cloud_conf(world_ids: dict[str, str], auth_url: str, cred_id: str, secret: str) -> str:
    return f"""[Global]
auth-url = {auth_url}
region = RegionOne
application-credential-id = {cred_id}
application-credential-secret = {secret}

[LoadBalancer]
lb-provider = amphora
create-monitor = true
floating-network-id = {world_ids['public']}
subnet-id = {world_ids['subnet']}

[BlockStorage]
ignore-volume-az = true
"""


def put_cloud_config(world: World, cred_id: str, secret: str, auth_url: str) -> None:
    text = cloud_conf(world.ids, auth_url, cred_id, secret)
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cloud-config", "namespace": SERVICES_NS},
            "type": "Opaque", "data": {"cloud.conf": base64.b64encode(text.encode()).decode()}}
    if world.get(f"/api/v1/namespaces/{SERVICES_NS}/secrets/cloud-config") is None:
        world.create(f"/api/v1/namespaces/{SERVICES_NS}/secrets", body)
    else:
        world.patch(f"/api/v1/namespaces/{SERVICES_NS}/secrets/cloud-config", {"data": body["data"]})


def deployment(name: str, image: str) -> Obj:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": SERVICES_NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": name, "image": image}],
                         "tolerations": [{"operator": "Exists"}]}}}}


def new_credential(conn: Any, name: str) -> tuple[str, str]:
    cred = conn.identity.create_application_credential(conn.current_user_id, name=name,
                                                       description="lab.provider integration test")
    return str(cred.id), str(cred.secret)


def volume_settled(conn: Any, volume_id: str) -> bool:
    return bool(conn.block_storage.get_volume(volume_id).status in ("available", "error"))


def volume_gone(conn: Any, volume_id: str) -> bool:
    """Cinder answers 404 (find_volume would fall back to a name filter, which Cinder refuses to a tenant)."""
    try:
        conn.block_storage.get_volume(volume_id)
    except openstack.exceptions.NotFoundException:
        return True
    return False


def cleanup_cloud(conn: Any, cluster: str) -> list[str]:
    """Safety net: whatever of this cluster is still in the cloud goes (and is reported)."""
    left = []
    for lb in conn.load_balancer.load_balancers():
        if lb.name.startswith(f"kube_service_{cluster}_") and lb.provisioning_status != "PENDING_DELETE":
            left.append(f"load balancer {lb.name}")
            conn.load_balancer.delete_load_balancer(lb, cascade=True, ignore_missing=True)
    for fip in conn.network.ips():
        if (fip.description or "").endswith(f" from cluster {cluster}"):
            left.append(f"floating IP {fip.floating_ip_address}")
            conn.network.delete_ip(fip)
    for volume in conn.block_storage.volumes(details=True):
        if (volume.metadata or {}).get(logic.CLUSTER_METADATA_KEY) == cluster:
            left.append(f"volume {volume.id} ({volume.status})")
            for attachment in volume.attachments or []:
                conn.compute.delete_volume_attachment(attachment["server_id"], volume.id)
            try:
                wait_for(f"volume {volume.id} detached",
                         partial(volume_settled, conn, volume.id), 60)
                conn.block_storage.delete_volume(volume, ignore_missing=True)
            except AssertionError:
                left.append(f"volume {volume.id} NOT deleted")
    return left


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, user_conn: Any, keystone_url: str) -> Iterator[World]:
    if not PROVIDER_PYTHON.exists():
        pytest.fail(f"the services' venv is missing ({PROVIDER_PYTHON}): run `make lab-up`", pytrace=False)
    tag = uuid.uuid4().hex[:8]
    cluster = f"it-{tag}"
    base = tmp_path_factory.mktemp("provider")
    k8s = start_lab_k8s(base / "k8s")
    public = user_conn.network.find_network("public", ignore_missing=False)
    subnet = user_conn.network.find_subnet("k8s-cluster-subnet", ignore_missing=False)
    net = user_conn.network.find_network("k8s-cluster-net", ignore_missing=False)
    servers = {s.name: s for s in user_conn.compute.servers(details=True) if s.name.startswith("k8s-cluster-")}
    cred = new_credential(user_conn, f"it-provider-{tag}-a")
    state_dir = base / "state"
    state_dir.mkdir()
    log = base / "provider.log"
    world = World(k8s, user_conn, cluster, state_dir, None, log, [cred],  # type: ignore[arg-type]
                  {"public": public.id, "subnet": subnet.id, "net": net.id}, servers)
    put_cloud_config(world, cred[0], cred[1], keystone_url)
    for name in ("openstack-cloud-controller-manager", "csi-cinder-controllerplugin"):
        world.create(f"/apis/apps/v1/namespaces/{SERVICES_NS}/deployments",
                     deployment(name, f"registry.k8s.io/provider-os/{name}:v1.33.0"))
    code, listing = world.api("GET", "/api/v1/nodes")
    assert code == 200 and not listing["items"]
    world.ids["nodes_rv"] = listing["metadata"]["resourceVersion"]  # the Nodes' history starts here
    world.proc = start_provider(world)
    try:
        yield world
    finally:
        try:
            stop_provider(world)
        finally:
            leftovers = cleanup_cloud(user_conn, cluster)
            for server in user_conn.compute.servers():
                if server.name.startswith(f"k8s-cluster-it-{tag}"):
                    user_conn.compute.delete_server(server)
            for cred_id, _secret in world.credentials:
                try:
                    user_conn.identity.delete_application_credential(user_conn.current_user_id, cred_id)
                except openstack.exceptions.NotFoundException:
                    pass
            stop_lab_k8s(k8s)
            print(f"\n[provider log tail]\n{world.log_tail()}\n[timings] {json.dumps(world.timings)}")
            if leftovers:
                print(f"[cleanup] the stand-in had left: {leftovers}")


def start_provider(world: World) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    with open(world.log, "ab") as out:
        return subprocess.Popen(
            [str(PROVIDER_PYTHON), "-m", "lab.provider", "--kubeconfig", str(world.k8s.kubeconfig), "--cluster-name",
             world.cluster, "--state-dir", str(world.state_dir), "--interval", "1"],
            cwd=world.state_dir.parent, env={**env, "PYTHONPATH": str(REPO)}, stdout=out, stderr=subprocess.STDOUT)


def stop_provider(world: World) -> None:
    if world.proc.poll() is None:
        world.proc.terminate()
        world.proc.wait(30)


@pytest.fixture
def namespace(world: World) -> Iterator[str]:
    name = f"it-{uuid.uuid4().hex[:8]}"
    world.create("/api/v1/namespaces", {"metadata": {"name": name}})
    yield name


def node(world: World, name: str) -> Obj | None:
    return world.get(f"/api/v1/nodes/{name}")


def initialised(world: World, server: Any) -> Obj | None:
    found = node(world, server.name)
    if not found or found.get("spec", {}).get("providerID") != logic.provider_id(server.id):
        return None
    if any(t["key"] == logic.UNINITIALIZED_TAINT for t in found["spec"].get("taints") or []):
        return None
    return found


# ---------------------------------------------------------------------------------------------------------- nodes


def attached_or_none(attachment: Obj | None) -> Obj | None:
    """The VolumeAttachment once it reports attached (for wait_for)."""
    return attachment if attachment and (attachment.get("status") or {}).get("attached") else None


def published_or_none(status: Obj) -> Obj | None:
    """The stand-in's status once it names the credential in use (for wait_for)."""
    return status if status.get("ccm.application-credential-id") else None


def test_nodes_registered_and_initialised(world: World) -> None:
    started = time.monotonic()
    for name, server in sorted(world.servers.items()):
        found = wait_for(f"Node {name} initialised", partial(initialised, world, server), 90)
        flavor = world.conn.compute.get_server(server.id).flavor
        fixed = [a["addr"] for addrs in server.addresses.values() for a in addrs if a.get("OS-EXT-IPS:type") == "fixed"]
        labels = found["metadata"]["labels"]
        assert labels[logic.INSTANCE_TYPE_LABEL] == flavor["original_name"]
        assert labels[logic.ZONE_LABEL] == server.availability_zone
        assert {"type": "InternalIP", "address": fixed[0]} in found["status"]["addresses"]
        assert {"type": "Hostname", "address": name} in found["status"]["addresses"]
        assert (logic.CONTROL_PLANE_ROLE in labels) == ("control" in name)
    world.record("nodes_initialised", time.monotonic() - started)
    # The Nodes' history from before the stand-in started: registered tainted by the "kubelet", then initialised.
    code, text = world.api("GET", f"/api/v1/nodes?watch=true&resourceVersion={world.ids['nodes_rv']}&timeoutSeconds=1")
    assert code == 200
    events = [json.loads(line) for line in str(text).splitlines() if line.strip()]
    for name, server in world.servers.items():
        history = [e for e in events if e["object"]["metadata"]["name"] == name]
        first = history[0]
        assert first["type"] == "ADDED"
        assert logic.UNINITIALIZED_TAINT in [t["key"] for t in first["object"]["spec"]["taints"]]
        assert "providerID" not in first["object"]["spec"]
        assert any(e["object"]["spec"].get("providerID") == logic.provider_id(server.id) for e in history[1:])


def test_node_removed_when_server_deleted(world: World) -> None:
    conn = world.conn
    tag = world.cluster.split("-", 1)[1]
    flavor = conn.compute.find_flavor("lab.worker", ignore_missing=False)
    image = conn.image.find_image("lab-image", ignore_missing=False)
    server = conn.compute.create_server(name=f"k8s-cluster-it-{tag}-w", flavor_id=flavor.id, image_id=image.id,
                                        networks=[{"uuid": world.ids["net"]}])
    try:
        server = conn.compute.wait_for_server(server, wait=120)
        found = wait_for("throwaway Node initialised", lambda: initialised(world, server), 60)
        assert found["metadata"]["labels"][logic.INSTANCE_TYPE_LABEL] == "lab.worker"
        # Shut off: its kubelet goes silent (Ready Unknown) and the CCM taints it; started again: cleared.
        conn.compute.stop_server(server)

        def node_state() -> tuple[str, list[str]]:
            current = node(world, server.name) or {}
            ready = [c["status"] for c in (current.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
            return (ready[0] if ready else "", sorted(t["key"] for t in (current.get("spec") or {}).get("taints") or []))

        wait_for("Node of a SHUTOFF server tainted and not Ready", lambda: node_state() == (
            "Unknown", sorted([logic.SHUTDOWN_TAINT, logic.UNREACHABLE_TAINT])), 90)
        conn.compute.start_server(server)
        wait_for("Node Ready again", lambda: node_state() == ("True", []), 90)
        conn.compute.delete_server(server)
        started = time.monotonic()
        wait_for("Node removed after its server is gone", lambda: node(world, server.name) is None, 90)
        world.record("node_removed_after_server_delete", time.monotonic() - started)
    finally:
        conn.compute.delete_server(server, ignore_missing=True)
    for seeded in world.servers.values():
        assert node(world, seeded.name) is not None, "a seeded server's Node went away"


# ---------------------------------------------------------------------------------------------------------- LBs


def lb_service(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "selector": {"app": name},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                               {"name": "https", "port": 443, "targetPort": 8443}]}}


def ingress_of(world: World, ns: str, name: str) -> str:
    svc = world.get(f"/api/v1/namespaces/{ns}/services/{name}") or {}
    ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return str(ingress[0].get("ip", "")) if ingress else ""


def workers_ready(world: World) -> list[Any]:
    workers = [s for n, s in sorted(world.servers.items()) if "worker" in n]
    for server in workers:
        wait_for(f"Node {server.name} initialised", partial(initialised, world, server), 90)
    return workers


def test_lb_service_created_and_deleted(world: World, namespace: str) -> None:
    workers = workers_ready(world)
    for seeded in world.servers.values():
        wait_for(f"Node {seeded.name}", partial(initialised, world, seeded), 90)
    # Another Service's load balancer beside it: each LB must hold only its own listeners and pools.
    other = lb_service("other")
    other["spec"]["ports"] = [{"name": "alt", "port": 8080, "targetPort": 8080}]
    world.create(f"/api/v1/namespaces/{namespace}/services", other)
    wait_for("ingress IP of the other Service", lambda: ingress_of(world, namespace, "other"), 120)
    started = time.monotonic()
    svc = world.create(f"/api/v1/namespaces/{namespace}/services", lb_service("web"))
    address = wait_for("ingress IP", lambda: ingress_of(world, namespace, "web"), 120)
    world.record("lb_service_to_ingress", time.monotonic() - started)
    other_id = (world.get(f"/api/v1/namespaces/{namespace}/services/other") or {})["metadata"]["annotations"][
        logic.LB_ID_ANNOTATION]
    assert [x.protocol_port for x in world.conn.load_balancer.listeners(load_balancer_id=other_id)
            if other_id in {ref["id"] for ref in x.load_balancers}] == [8080]
    svc = world.get(f"/api/v1/namespaces/{namespace}/services/web") or {}
    lb_id = svc["metadata"]["annotations"][logic.LB_ID_ANNOTATION]
    lb = world.conn.load_balancer.get_load_balancer(lb_id)
    name = f"kube_service_{world.cluster}_{namespace}_web"
    assert (lb.name, lb.provisioning_status, lb.provider) == (name, "ACTIVE", "amphora")
    assert lb.description == f"Kubernetes external service {namespace}/web from cluster {world.cluster}"
    assert lb.tags == [name]
    assert lb.vip_subnet_id == world.ids["subnet"]
    listeners = sorted(world.conn.load_balancer.listeners(load_balancer_id=lb_id), key=lambda x: x.protocol_port)
    assert [(x.name, x.protocol, x.protocol_port) for x in listeners] == [
        (f"listener_0_{name}", "TCP", 80), (f"listener_1_{name}", "TCP", 443)]
    node_ports = {p["port"]: p["nodePort"] for p in svc["spec"]["ports"]}
    worker_ips = {}
    for server in workers:
        found = node(world, server.name) or {}
        worker_ips[server.name] = logic.internal_ip(found)
    for index, listener in enumerate(listeners):
        pools = [p for p in world.conn.load_balancer.pools(loadbalancer_id=lb_id)
                 if listener.id in {x["id"] for x in p.listeners or []}]
        assert [p.name for p in pools] == [f"pool_{index}_{name}"]
        members = {(m.name, m.address, m.protocol_port) for m in world.conn.load_balancer.members(pools[0].id)}
        # Control-plane Nodes carry kubeadm's exclude-from-external-load-balancers label: workers only.
        assert members == {(n, ip, node_ports[listener.protocol_port]) for n, ip in worker_ips.items()}
        monitor = world.conn.load_balancer.get_health_monitor(pools[0].health_monitor_id)
        assert (monitor.name, monitor.type, monitor.delay, monitor.timeout) == (f"monitor_{index}_{name}", "TCP", 5, 3)
    fips = list(world.conn.network.ips(floating_ip_address=address))
    assert len(fips) == 1
    assert fips[0].floating_network_id == world.ids["public"]
    assert fips[0].description == f"Floating IP for Kubernetes external service {namespace}/web from cluster {world.cluster}"
    assert fips[0].port_id is None  # Octavia's noop network driver makes no VIP port to associate it with
    fip_id = fips[0].id
    code, events = world.api("GET", f"/api/v1/namespaces/{namespace}/events")
    assert code == 200
    reasons = [e["reason"] for e in events["items"] if e["involvedObject"]["name"] == "web"]
    assert {"EnsuringLoadBalancer", "EnsuredLoadBalancer"} <= set(reasons), reasons

    started = time.monotonic()
    world.delete(f"/api/v1/namespaces/{namespace}/services/web")
    wait_for("load balancer deleted", lambda: world.conn.load_balancer.find_load_balancer(lb_id) is None, 90)
    wait_for("floating IP deleted", lambda: world.conn.network.find_ip(fip_id) is None, 30)
    wait_for("Service gone from the API (finalizer removed)",
             lambda: world.get(f"/api/v1/namespaces/{namespace}/services/web") is None, 30)
    world.record("lb_service_delete_to_cloud_clean", time.monotonic() - started)
    assert world.conn.load_balancer.get_load_balancer(other_id).provisioning_status == "ACTIVE"  # untouched
    world.delete(f"/api/v1/namespaces/{namespace}/services/other")
    wait_for("the other load balancer deleted", lambda: world.conn.load_balancer.find_load_balancer(other_id) is None, 90)


def pool_members(world: World, lb_id: str) -> set[tuple[str, str, int]]:
    members: set[tuple[str, str, int]] = set()
    for pool in world.conn.load_balancer.pools(loadbalancer_id=lb_id):
        members |= {(m.name, m.address, m.protocol_port) for m in world.conn.load_balancer.members(pool.id)}
    return members


def test_lb_follows_nodes_and_type_change(world: World, namespace: str) -> None:
    workers = workers_ready(world)
    svc = lb_service("follow")
    svc["spec"]["ports"] = svc["spec"]["ports"][:1]
    world.create(f"/api/v1/namespaces/{namespace}/services", svc)
    address = wait_for("ingress IP", lambda: ingress_of(world, namespace, "follow"), 120)
    lb_id = (world.get(f"/api/v1/namespaces/{namespace}/services/follow") or {})["metadata"]["annotations"][
        logic.LB_ID_ANNOTATION]
    assert {m[0] for m in pool_members(world, lb_id)} == {w.name for w in workers}
    excluded = workers[-1].name
    world.patch(f"/api/v1/nodes/{excluded}", {"metadata": {"labels": {logic.EXCLUDE_LB_LABEL: "true"}}})
    try:
        wait_for("member of the excluded node removed",
                 lambda: {m[0] for m in pool_members(world, lb_id)} == {w.name for w in workers[:-1]}, 60)
    finally:
        world.patch(f"/api/v1/nodes/{excluded}", {"metadata": {"labels": {logic.EXCLUDE_LB_LABEL: None}}})
    wait_for("member back", lambda: {m[0] for m in pool_members(world, lb_id)} == {w.name for w in workers}, 60)
    # No longer a LoadBalancer: the LB and its FIP go, the Service stays without ingress or LB annotation.
    world.patch(f"/api/v1/namespaces/{namespace}/services/follow", {"spec": {"type": "ClusterIP"}})
    wait_for("load balancer deleted", lambda: world.conn.load_balancer.find_load_balancer(lb_id) is None, 90)
    wait_for("floating IP deleted", lambda: not list(world.conn.network.ips(floating_ip_address=address)), 30)
    wait_for("ingress cleared", lambda: not ingress_of(world, namespace, "follow"), 30)

    def released() -> Obj | None:
        found = world.get(f"/api/v1/namespaces/{namespace}/services/follow") or {}
        return None if logic.LB_CLEANUP_FINALIZER in (found["metadata"].get("finalizers") or []) else found

    remaining = wait_for("load-balancer-cleanup finalizer removed", released, 30)
    assert logic.LB_ID_ANNOTATION not in (remaining["metadata"].get("annotations") or {})


def test_leak_switch_leaves_lb_and_fip_behind(world: World, namespace: str) -> None:
    workers_ready(world)
    world.create(f"/api/v1/namespaces/{namespace}/services", lb_service("leaky"))
    address = wait_for("ingress IP", lambda: ingress_of(world, namespace, "leaky"), 120)
    svc = world.get(f"/api/v1/namespaces/{namespace}/services/leaky") or {}
    lb_id = svc["metadata"]["annotations"][logic.LB_ID_ANNOTATION]
    faults = world.state_dir / "faults.json"
    faults.write_text(json.dumps({"leak_load_balancers": True, "leak_floating_ips": True}))
    try:
        world.delete(f"/api/v1/namespaces/{namespace}/services/leaky")
        wait_for("Service gone from the API", lambda: world.get(f"/api/v1/namespaces/{namespace}/services/leaky") is None, 30)
        time.sleep(3)  # several passes: nothing comes back for them
        lb = world.conn.load_balancer.find_load_balancer(lb_id)
        assert lb is not None and lb.provisioning_status == "ACTIVE", "the leak switch did not leave the LB"
        fips = list(world.conn.network.ips(floating_ip_address=address))
        assert len(fips) == 1, "the leak switch did not leave the floating IP"
        assert "leak_load_balancers" in world.log.read_text()
    finally:
        faults.unlink()
        world.conn.load_balancer.delete_load_balancer(lb_id, cascade=True, ignore_missing=True)
        for fip in world.conn.network.ips(floating_ip_address=address):
            world.conn.network.delete_ip(fip)


def test_service_deleted_while_stopped_is_cleaned_up_after_restart(world: World, namespace: str) -> None:
    """What it created is in its state dir: a Service that vanished while it was down still loses its LB."""
    workers_ready(world)
    world.create(f"/api/v1/namespaces/{namespace}/services", lb_service("ghost"))
    address = wait_for("ingress IP", lambda: ingress_of(world, namespace, "ghost"), 120)
    lb_id = (world.get(f"/api/v1/namespaces/{namespace}/services/ghost") or {})["metadata"]["annotations"][
        logic.LB_ID_ANNOTATION]
    stop_provider(world)
    try:
        # Someone strips the finalizer and deletes the Service while the stand-in is down.
        world.patch(f"/api/v1/namespaces/{namespace}/services/ghost", {"metadata": {"finalizers": None}})
        world.delete(f"/api/v1/namespaces/{namespace}/services/ghost")
        assert world.get(f"/api/v1/namespaces/{namespace}/services/ghost") is None
        assert world.conn.load_balancer.find_load_balancer(lb_id) is not None
    finally:
        started = time.monotonic()
        world.proc = start_provider(world)
    wait_for("load balancer deleted after the restart",
             lambda: world.conn.load_balancer.find_load_balancer(lb_id) is None, 90)
    wait_for("floating IP deleted after the restart",
             lambda: not list(world.conn.network.ips(floating_ip_address=address)), 30)
    world.record("restart_to_orphan_cleanup", time.monotonic() - started)


# ---------------------------------------------------------------------------------------------------------- CSI


def storage_class(name: str, mode: str = "Immediate") -> Obj:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": logic.CINDER_DRIVER, "parameters": {"type": "fast-ssd"}, "reclaimPolicy": "Delete",
            "volumeBindingMode": mode}


def claim(name: str, cls: str, size: str = "1Gi") -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                     "resources": {"requests": {"storage": size}}}}


def pod(name: str, claim_name: str, node_name: str, write: str | None = None) -> Obj:
    annotations = {logic.WRITE_ANNOTATION: write} if write is not None else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations},
            "spec": {"nodeName": node_name, "containers": [{"name": "app", "image": "busybox:1.36"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def pvc_phase(world: World, ns: str, name: str) -> str:
    found = world.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}") or {}
    return str((found.get("status") or {}).get("phase", ""))


def attached_to(world: World, volume_id: str) -> set[str]:
    volume = world.conn.block_storage.get_volume(volume_id)
    return {a["server_id"] for a in volume.attachments or []} if volume.status == "in-use" else set()


def va_for(world: World, pv: str, node_name: str) -> Obj | None:
    code, listing = world.api("GET", "/apis/storage.k8s.io/v1/volumeattachments")
    assert code == 200
    return next((va for va in listing["items"] if va["spec"]["source"].get("persistentVolumeName") == pv
                 and va["spec"]["nodeName"] == node_name), None)


def test_pvc_provisioned_bound_and_reclaimed(world: World, namespace: str) -> None:
    cls = f"it-immediate-{world.cluster}"
    world.create("/apis/storage.k8s.io/v1/storageclasses", storage_class(cls))
    try:
        started = time.monotonic()
        pvc = world.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim("data", cls, "1500Mi"))
        wait_for("claim Bound", lambda: pvc_phase(world, namespace, "data") == "Bound", 90)
        world.record("pvc_to_bound", time.monotonic() - started)
        bound = world.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data") or {}
        pv_name = bound["spec"]["volumeName"]
        assert pv_name == f"pvc-{pvc['metadata']['uid']}"
        pv = world.get(f"/api/v1/persistentvolumes/{pv_name}") or {}
        assert pv["spec"]["csi"]["driver"] == logic.CINDER_DRIVER
        assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
        assert pv["status"]["phase"] == "Bound"
        volume = world.conn.block_storage.get_volume(pv["spec"]["csi"]["volumeHandle"])
        assert (volume.name, volume.size, volume.volume_type, volume.status) == (pv_name, 2, "fast-ssd", "available")
        assert volume.metadata == {logic.CLUSTER_METADATA_KEY: world.cluster, logic.PVC_NAME_KEY: "data",
                                   logic.PVC_NAMESPACE_KEY: namespace, logic.PV_NAME_KEY: pv_name}
        world.delete(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data")
        wait_for("volume deleted (reclaim Delete)",
                 partial(volume_gone, world.conn, volume.id), 90)
        wait_for("PV gone", lambda: world.get(f"/api/v1/persistentvolumes/{pv_name}") is None, 30)
        # A claim deleted at once (perhaps while its volume is being created) leaves no volume behind.
        world.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim("quick", cls))
        time.sleep(1)
        world.delete(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/quick")
        wait_for("no volume left for a claim deleted at once", lambda: not claim_volumes(world, namespace, "quick"), 60)
    finally:
        world.delete(f"/apis/storage.k8s.io/v1/storageclasses/{cls}")


def claim_volumes(world: World, namespace: str, name: str) -> list[Any]:
    return [v for v in world.conn.block_storage.volumes(details=True)
            if (v.metadata or {}).get(logic.CLUSTER_METADATA_KEY) == world.cluster
            and (v.metadata or {}).get(logic.PVC_NAME_KEY) == name
            and (v.metadata or {}).get(logic.PVC_NAMESPACE_KEY) == namespace]


def test_leak_switch_leaves_volume_behind(world: World, namespace: str) -> None:
    cls = f"it-leak-{world.cluster}"
    world.create("/apis/storage.k8s.io/v1/storageclasses", storage_class(cls))
    faults = world.state_dir / "faults.json"
    try:
        world.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim("leak", cls))
        wait_for("claim Bound", lambda: pvc_phase(world, namespace, "leak") == "Bound", 90)
        pv_name = (world.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/leak") or {})["spec"]["volumeName"]
        faults.write_text(json.dumps({"leak_volumes": True}))
        world.delete(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/leak")
        wait_for("PV gone", lambda: world.get(f"/api/v1/persistentvolumes/{pv_name}") is None, 30)
        time.sleep(2)
        left = claim_volumes(world, namespace, "leak")
        assert [(v.name, v.status) for v in left] == [(pv_name, "available")], "the leak switch did not leave the volume"
    finally:
        faults.unlink(missing_ok=True)
        for volume in claim_volumes(world, namespace, "leak"):
            world.conn.block_storage.delete_volume(volume, ignore_missing=True)
        world.delete(f"/apis/storage.k8s.io/v1/storageclasses/{cls}")


def test_attach_move_reattach_keeps_data(world: World, namespace: str) -> None:
    workers = workers_ready(world)
    first, second = workers[0], workers[1]
    cls = f"it-wffc-{world.cluster}"
    world.create("/apis/storage.k8s.io/v1/storageclasses", storage_class(cls, "WaitForFirstConsumer"))
    try:
        world.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim("db", cls))
        time.sleep(2)
        assert pvc_phase(world, namespace, "db") == "Pending", "WaitForFirstConsumer provisioned without a consumer"
        payload = f"row-{uuid.uuid4().hex}\n"
        started = time.monotonic()
        world.create(f"/api/v1/namespaces/{namespace}/pods", pod("db-0", "db", first.name, payload))
        wait_for("claim Bound", lambda: pvc_phase(world, namespace, "db") == "Bound", 90)
        pv_name = (world.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/db") or {})["spec"]["volumeName"]
        volume_id = (world.get(f"/api/v1/persistentvolumes/{pv_name}") or {})["spec"]["csi"]["volumeHandle"]
        va = wait_for("VolumeAttachment attached", lambda: attached_or_none(va_for(world, pv_name, first.name)), 90)
        assert va["spec"]["attacher"] == logic.CINDER_DRIVER
        assert va["metadata"]["name"] == logic.va_name(volume_id, logic.CINDER_DRIVER, first.name)
        assert attached_to(world, volume_id) == {first.id}
        key = logic.sha_annotation("db")
        expected = hashlib.sha256(payload.encode()).hexdigest()

        def reported(name: str) -> str:
            found = world.get(f"/api/v1/namespaces/{namespace}/pods/{name}") or {}
            return str((found["metadata"].get("annotations") or {}).get(key, ""))

        assert wait_for("data sha256 reported", lambda: reported("db-0"), 60) == expected
        world.record("pod_pvc_to_attached_and_data", time.monotonic() - started)

        # Drain: the pod goes (eviction), the replacement runs on another node.
        code, body = world.api("POST", f"/api/v1/namespaces/{namespace}/pods/db-0/eviction",
                               {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "db-0"}})
        assert code in (200, 201), body
        started = time.monotonic()
        world.create(f"/api/v1/namespaces/{namespace}/pods", pod("db-1", "db", second.name))
        wait_for("detached from the first node", lambda: va_for(world, pv_name, first.name) is None, 90)
        wait_for("attached to the second node", lambda: attached_to(world, volume_id) == {second.id}, 90)
        assert wait_for("data sha256 reported after reattach", lambda: reported("db-1"), 60) == expected
        world.record("reattach_to_data_readable", time.monotonic() - started)
        va2 = va_for(world, pv_name, second.name) or {}
        assert (va2.get("status") or {}).get("attached") is True

        world.delete(f"/api/v1/namespaces/{namespace}/pods/db-1")
        wait_for("detached after the last pod", lambda: attached_to(world, volume_id) == set(), 90)
        world.delete(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/db")
        wait_for("volume deleted", partial(volume_gone, world.conn, volume_id), 90)
    finally:
        world.delete(f"/apis/storage.k8s.io/v1/storageclasses/{cls}")


# ---------------------------------------------------------------------------------------------------------- rotation


def test_credential_rotation_needs_a_rollout(world: World, namespace: str, keystone_url: str) -> None:
    workers_ready(world)
    old_id = world.credentials[0][0]
    wait_for("status published", lambda: world.status().get("ccm.application-credential-id") == old_id
             and world.status().get("csi.application-credential-id") == old_id, 30)
    new_id, new_secret = new_credential(world.conn, f"it-provider-{world.cluster.split('-', 1)[1]}-b")
    world.credentials.append((new_id, new_secret))
    put_cloud_config(world, new_id, new_secret, keystone_url)
    time.sleep(3)  # three passes: the cached credential stays (the real pods cache cloud.conf too)
    status = world.status()
    assert (status["ccm.application-credential-id"], status["csi.application-credential-id"]) == (old_id, old_id)
    restarts = {c: int(status[f"{c}.restarts"]) for c in ("ccm", "csi")}
    started = time.monotonic()
    roll(world)
    wait_for("both components restarted with the new credential",
             lambda: world.status().get("ccm.application-credential-id") == new_id
             and world.status().get("csi.application-credential-id") == new_id, 30)
    world.record("rollout_to_new_credential", time.monotonic() - started)
    status = world.status()
    assert {c: int(status[f"{c}.restarts"]) for c in ("ccm", "csi")} == {c: n + 1 for c, n in restarts.items()}
    assert secret_absent(world, new_secret)
    # The old credential dies: new operations must still succeed, so they use the new one.
    world.conn.identity.delete_application_credential(world.conn.current_user_id, old_id)
    world.credentials.remove(world.credentials[0])
    world.create(f"/api/v1/namespaces/{namespace}/services", lb_service("canary"))
    wait_for("canary ingress with the new credential", lambda: ingress_of(world, namespace, "canary"), 120)
    cls = f"it-canary-{world.cluster}"
    world.create("/apis/storage.k8s.io/v1/storageclasses", storage_class(cls))
    try:
        world.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim("canary", cls))
        wait_for("canary claim Bound with the new credential", lambda: pvc_phase(world, namespace, "canary") == "Bound", 90)
        world.delete(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/canary")
        world.delete(f"/api/v1/namespaces/{namespace}/services/canary")
        wait_for("canary Service cleaned up",
                 lambda: world.get(f"/api/v1/namespaces/{namespace}/services/canary") is None, 60)
        wait_for("canary volume deleted", lambda: not [
            v for v in world.conn.block_storage.volumes(details=True)
            if (v.metadata or {}).get(logic.CLUSTER_METADATA_KEY) == world.cluster], 90)
    finally:
        world.delete(f"/apis/storage.k8s.io/v1/storageclasses/{cls}")


def roll(world: World) -> None:
    """``kubectl rollout restart`` of both Deployments (the template annotation it sets)."""
    stamp = f"{time.time():.6f}"
    for name in ("openstack-cloud-controller-manager", "csi-cinder-controllerplugin"):
        world.patch(f"/apis/apps/v1/namespaces/{SERVICES_NS}/deployments/{name}", {"spec": {"template": {"metadata": {
            "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}})


def test_refused_credential_keeps_the_running_one(world: World, keystone_url: str) -> None:
    """A rollout whose new pods cannot authenticate leaves the old pods (and their credential) running."""
    status = wait_for("status published", lambda: published_or_none(world.status()), 30)
    running_id = status["ccm.application-credential-id"]
    running = next(c for c in world.credentials if c[0] == running_id)
    restarts = {c: int(status[f"{c}.restarts"]) for c in ("ccm", "csi")}
    put_cloud_config(world, running_id, "not-the-secret", keystone_url)
    roll(world)
    wait_for("both new pods refused", lambda: all("cannot authenticate" in world.status().get(f"{c}.error", "")
                                                  for c in ("ccm", "csi")), 30)
    status = world.status()
    assert (status["ccm.application-credential-id"], status["csi.application-credential-id"]) == (running_id, running_id)
    assert {c: int(status[f"{c}.restarts"]) for c in ("ccm", "csi")} == restarts
    assert "not-the-secret" not in json.dumps(status) and "not-the-secret" not in world.log.read_text()
    # The operator puts the right Secret back: the crash-looping new pods start with it.
    started = time.monotonic()
    put_cloud_config(world, running[0], running[1], keystone_url)
    wait_for("new pods started", lambda: all(int(world.status().get(f"{c}.restarts", 0)) == restarts[c] + 1
                                             for c in ("ccm", "csi")), 30)
    world.record("refused_rollout_recovery", time.monotonic() - started)
    status = world.status()
    assert (status["ccm.error"], status["csi.error"]) == ("", "")
    assert secret_absent(world, running[1])


def secret_absent(world: World, secret: str) -> bool:
    """No credential secret in what the stand-in publishes or logs."""
    published = json.dumps(world.status()) + (world.state_dir / "status.json").read_text()
    return secret not in published and secret not in world.log.read_text()


def test_ccm_as_a_daemonset_restarts_on_its_template(world: World) -> None:
    """Upstream ships the CCM as a DaemonSet: with no Deployment of that name, the DaemonSet's template counts."""
    status = wait_for("status published", lambda: published_or_none(world.status()), 30)
    restarts = int(status["ccm.restarts"])
    name = "openstack-cloud-controller-manager"
    world.delete(f"/apis/apps/v1/namespaces/{SERVICES_NS}/deployments/{name}")
    daemonset = deployment(name, f"registry.k8s.io/provider-os/{name}:v1.33.0")
    daemonset["kind"] = "DaemonSet"
    del daemonset["spec"]["replicas"]
    world.create(f"/apis/apps/v1/namespaces/{SERVICES_NS}/daemonsets", daemonset)
    wait_for("the CCM restarted for the DaemonSet",
             lambda: int(world.status().get("ccm.restarts", 0)) == restarts + 1, 30)
    roll_ds = {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}
    world.patch(f"/apis/apps/v1/namespaces/{SERVICES_NS}/daemonsets/{name}", roll_ds)
    wait_for("the CCM restarted on the DaemonSet's template change",
             lambda: int(world.status().get("ccm.restarts", 0)) == restarts + 2, 30)
    assert world.status()["ccm.error"] == ""
