"""The CCM stand-in's decisions (lab/provider/logic.py): cloud.conf, names, Node registration and
initialisation, load balancer layout and the steps that reach it."""

from __future__ import annotations

from typing import Any

import pytest

from lab.provider import logic
from lab.provider.logic import ActualPort, PortLayout, ServerInfo

CONF = """[Global]
auth-url = http://127.0.0.1:25000/v3
region = RegionOne
application-credential-id = abc
application-credential-secret = s3cret

[LoadBalancer]
lb-provider = amphora
create-monitor = true
floating-network-id = pub
subnet-id = sub
"""


def test_cloud_conf_parsed() -> None:
    conf = logic.parse_cloud_conf("# rendered\n" + CONF + "\n[BlockStorage]\nignore-volume-az = true\n")
    assert (conf.auth_url, conf.region, conf.application_credential_id, conf.application_credential_secret) == (
        "http://127.0.0.1:25000/v3", "RegionOne", "abc", "s3cret")
    assert (conf.floating_network_id, conf.subnet_id, conf.lb_provider, conf.create_monitor) == (
        "pub", "sub", "amphora", True)
    assert (conf.lb_method, conf.monitor_delay, conf.monitor_timeout, conf.monitor_max_retries) == (
        "ROUND_ROBIN", 5, 3, 1)
    assert "s3cret" not in repr(conf)


@pytest.mark.parametrize(("text", "message"), [
    ("", "lacks auth-url, region, application-credential-id, application-credential-secret"),
    ("[Global]\nauth-url = x\nregion = r\napplication-credential-id = i\n", "lacks application-credential-secret"),
    ("[Global\nbroken", "does not parse"),
    (CONF + "monitor-delay = soon\n", "not a duration"),
])
def test_cloud_conf_rejected(text: str, message: str) -> None:
    with pytest.raises(logic.CloudConfError, match=message):
        logic.parse_cloud_conf(text)


def test_a_cloud_conf_that_does_not_parse_is_not_quoted() -> None:
    """configparser quotes the bad line; here that is the secret's line (published in status and logs)."""
    with pytest.raises(logic.CloudConfError) as raised:
        logic.parse_cloud_conf("application-credential-secret = S3CRET-value\n[Global]\n")
    assert "S3CRET" not in str(raised.value) and "line 1" in str(raised.value)


@pytest.mark.parametrize(("extra", "expected"), [
    ("create-monitor = false\n", False), ("create-monitor = True\n", True), ("", True)])
def test_create_monitor(extra: str, expected: bool) -> None:
    text = CONF.replace("create-monitor = true\n", "") + extra if extra else CONF
    assert logic.parse_cloud_conf(text).create_monitor is expected


@pytest.mark.parametrize(("value", "seconds"), [("5s", 5), ("1m", 60), ("7", 7)])
def test_monitor_durations(value: str, seconds: int) -> None:
    assert logic.parse_cloud_conf(CONF + f"monitor-delay = {value}\n").monitor_delay == seconds


def test_template_hash_follows_the_pod_template_and_the_workload() -> None:
    deploy: dict[str, Any] = {"metadata": {"generation": 1, "uid": "u1"},
                              "spec": {"replicas": 1, "template": {"spec": {"a": 1}}}}
    first = logic.template_hash(deploy)
    deploy["spec"]["replicas"] = 3
    deploy["metadata"]["generation"] = 2
    assert logic.template_hash(deploy) == first
    recreated = {**deploy, "metadata": {"uid": "u2"}}
    assert logic.template_hash(recreated) != first  # deleted and created again: new pods
    deploy["spec"]["template"]["metadata"] = {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}
    assert logic.template_hash(deploy) != first
    assert logic.template_hash(None) == ""


@pytest.mark.parametrize(("cluster", "ns", "name", "lb", "desc", "fip"), [
    ("lab-k8s", "default", "web", "kube_service_lab-k8s_default_web",
     "Kubernetes external service default/web from cluster lab-k8s",
     "Floating IP for Kubernetes external service default/web from cluster lab-k8s"),
    ("kubernetes", "shop", "api", "kube_service_kubernetes_shop_api",
     "Kubernetes external service shop/api from cluster kubernetes",
     "Floating IP for Kubernetes external service shop/api from cluster kubernetes"),
])
def test_names_and_descriptions(cluster: str, ns: str, name: str, lb: str, desc: str, fip: str) -> None:
    assert logic.lb_name(cluster, ns, name) == lb
    assert logic.lb_description(cluster, ns, name) == desc
    assert logic.fip_description(cluster, ns, name) == fip
    assert logic.listener_name(1, lb) == f"listener_1_{lb}"
    assert logic.pool_name(0, lb) == f"pool_0_{lb}"
    assert logic.monitor_name(2, lb) == f"monitor_2_{lb}"


def test_long_names_are_cut_to_255() -> None:
    name = logic.lb_name("c", "n" * 63, "s" * 250)
    assert len(name) == 255 and name.startswith("kube_service_c_")
    assert len(logic.listener_name(0, name)) == 255


SERVER = {"id": "srv-1", "name": "k8s-cluster-worker-1", "status": "ACTIVE", "availability_zone": "nova",
          "flavor": {"original_name": "lab.worker"}, "metadata": {"k8s_role": "worker"},
          "addresses": {"k8s-cluster-net": [{"addr": "10.20.0.5", "OS-EXT-IPS:type": "fixed"},
                                            {"addr": "203.0.113.9", "OS-EXT-IPS:type": "floating"}]}}


def test_server_info() -> None:
    info = logic.server_info(SERVER)
    assert info == ServerInfo("srv-1", "k8s-cluster-worker-1", "ACTIVE", "lab.worker", "nova", ("10.20.0.5",),
                              ("203.0.113.9",), "worker")


@pytest.mark.parametrize(("role", "taints", "excluded"), [
    ("worker", [logic.UNINITIALIZED_TAINT], False),
    ("control-plane", [logic.UNINITIALIZED_TAINT, logic.CONTROL_PLANE_ROLE], True),
])
def test_registered_node(role: str, taints: list[str], excluded: bool) -> None:
    info = logic.server_info({**SERVER, "metadata": {"k8s_role": role}})
    node = logic.registered_node(info, "2026-01-01T00:00:00Z")
    assert [t["key"] for t in node["spec"]["taints"]] == taints
    assert "providerID" not in node["spec"]  # the CCM's to set
    assert node["status"]["addresses"] == [{"type": "Hostname", "address": "k8s-cluster-worker-1"}]
    assert (logic.EXCLUDE_LB_LABEL in node["metadata"]["labels"]) is excluded
    assert logic.node_ready(node)


def test_initialised_node_sets_cloud_fields_once() -> None:
    info = logic.server_info(SERVER)
    node = logic.registered_node(info, "t")
    done = logic.initialised_node(node, info, "RegionOne")
    assert done is not None
    assert done["spec"]["providerID"] == "openstack:///srv-1"
    assert done["spec"]["taints"] == []
    labels = done["metadata"]["labels"]
    assert (labels[logic.INSTANCE_TYPE_LABEL], labels[logic.ZONE_LABEL], labels[logic.REGION_LABEL],
            labels[logic.CSI_ZONE_LABEL]) == ("lab.worker", "nova", "RegionOne", "nova")
    assert done["status"]["addresses"] == [{"type": "InternalIP", "address": "10.20.0.5"},
                                           {"type": "ExternalIP", "address": "203.0.113.9"},
                                           {"type": "Hostname", "address": "k8s-cluster-worker-1"}]
    assert logic.initialised_node(done, info, "RegionOne") is None  # idempotent: nothing left to do
    assert logic.server_id_of(done) == "srv-1"


@pytest.mark.parametrize(("status", "ready", "taints"), [
    ("ACTIVE", "True", []),
    ("SHUTOFF", "Unknown", [logic.SHUTDOWN_TAINT, logic.UNREACHABLE_TAINT]),
    ("ERROR", "Unknown", [logic.UNREACHABLE_TAINT]),
    ("SUSPENDED", "Unknown", [logic.UNREACHABLE_TAINT]),
])
def test_server_state_on_the_node(status: str, ready: str, taints: list[str]) -> None:
    info = logic.server_info(SERVER)
    node = logic.initialised_node(logic.registered_node(info, "t"), info, "R")
    assert node is not None
    node["spec"]["taints"] = [{"key": "team", "value": "a", "effect": "NoSchedule"}]  # someone else's: kept
    down = logic.server_info({**SERVER, "status": status})
    changed = logic.initialised_node(node, down, "R", "now")
    current = changed if changed is not None else node
    assert [c["status"] for c in current["status"]["conditions"] if c["type"] == "Ready"] == [ready]
    assert [t["key"] for t in current["spec"]["taints"]] == ["team", *taints]
    assert (changed is None) is (status == "ACTIVE")
    # and back: the server ACTIVE again clears what its state added
    back = logic.initialised_node(current, info, "R", "later")
    after = back if back is not None else current
    assert [t["key"] for t in after["spec"]["taints"]] == ["team"]
    assert logic.node_ready(after)
    assert logic.initialised_node(after, info, "R", "again") is None


def server(name: str, sid: str, status: str = "ACTIVE") -> ServerInfo:
    return ServerInfo(sid, name, status, "lab.worker", "nova", ("10.20.0.9",))


def initialised(info: ServerInfo) -> dict[str, Any]:
    done = logic.initialised_node(logic.registered_node(info, "t"), info, "R")
    assert done is not None
    return done


@pytest.mark.parametrize(("servers", "nodes", "register", "initialise", "delete"), [
    # a new server of the cluster: the kubelet registers it
    ([server("k8s-cluster-worker-1", "a")], [], ["k8s-cluster-worker-1"], [], []),
    # not ACTIVE yet, or not the cluster's: nothing
    ([server("k8s-cluster-worker-1", "a", "BUILD"), server("bastion", "b")], [], [], [], []),
    # registered but not initialised: the CCM initialises it
    ([server("k8s-cluster-worker-1", "a")], [logic.registered_node(server("k8s-cluster-worker-1", "a"), "t")],
     [], ["k8s-cluster-worker-1"], []),
    # initialised and current: nothing
    ([server("k8s-cluster-worker-1", "a")], [initialised(server("k8s-cluster-worker-1", "a"))], [], [], []),
    # the server is gone: the Node goes
    ([], [initialised(server("k8s-cluster-worker-1", "a"))], [], [], ["k8s-cluster-worker-1"]),
    # a Node whose provider id names a deleted server, even with a same-named new server
    ([server("k8s-cluster-worker-1", "new")], [initialised(server("k8s-cluster-worker-1", "old"))], [], [],
     ["k8s-cluster-worker-1"]),
    # a foreign Node (no provider id, other name): left alone
    ([], [{"metadata": {"name": "laptop"}, "spec": {}}], [], [], []),
])
def test_plan_nodes(servers: list[ServerInfo], nodes: list[dict[str, Any]], register: list[str],
                    initialise: list[str], delete: list[str]) -> None:
    plan = logic.plan_nodes(servers, nodes, "k8s-cluster-", "R")
    assert [s.name for s in plan.register] == register
    assert [n for n, _s in plan.initialise] == initialise
    assert plan.delete == delete


def lb_node(name: str, ip: str, ready: bool = True, labels: dict[str, str] | None = None,
            provider: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"providerID": "openstack:///x"} if provider else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "addresses": [{"type": "InternalIP", "address": ip}]}}


def test_lb_backends() -> None:
    nodes = [lb_node("w1", "10.0.0.1"), lb_node("w2", "10.0.0.2", ready=False),
             lb_node("c1", "10.0.0.3", labels={logic.EXCLUDE_LB_LABEL: ""}), lb_node("w3", "10.0.0.4", provider=False),
             lb_node("w0", "10.0.0.5")]
    assert logic.lb_backends(nodes) == [("w0", "10.0.0.5"), ("w1", "10.0.0.1")]


def service(ports: list[dict[str, Any]], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "ns", "annotations": annotations or {}},
            "spec": {"type": "LoadBalancer", "ports": ports}}


def test_desired_layout() -> None:
    svc = service([{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP", "nodePort": 30053}])
    layout = logic.desired_layout(svc, [("w1", "10.0.0.1")], create_monitor=True)
    assert layout == [PortLayout(0, "TCP", 80, 30080, (("w1", "10.0.0.1", 30080),), True),
                      PortLayout(1, "UDP", 53, 30053, (("w1", "10.0.0.1", 30053),), True)]
    off = service([{"port": 80, "nodePort": 1}], {"loadbalancer.openstack.org/enable-health-monitor": "false"})
    assert logic.desired_layout(off, [], create_monitor=True)[0].monitor is False
    assert logic.monitor_type("UDP") == "UDP-CONNECT" and logic.monitor_type("TCP") == "TCP"


def test_fully_populated_listeners() -> None:
    desired = [PortLayout(0, "TCP", 80, 30080, (("w1", "10.0.0.1", 30080),), True),
               PortLayout(1, "UDP", 53, 30053, (), False)]
    tree = logic.fully_populated_listeners(desired, "kube_service_c_n_s", "ROUND_ROBIN", "sub", (5, 3, 1, 3))
    assert tree == [
        {"name": "listener_0_kube_service_c_n_s", "protocol": "TCP", "protocol_port": 80, "default_pool": {
            "name": "pool_0_kube_service_c_n_s", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
            "members": [{"name": "w1", "address": "10.0.0.1", "protocol_port": 30080, "subnet_id": "sub"}],
            "healthmonitor": {"name": "monitor_0_kube_service_c_n_s", "type": "TCP", "delay": 5, "timeout": 3,
                              "max_retries": 1, "max_retries_down": 3}}},
        {"name": "listener_1_kube_service_c_n_s", "protocol": "UDP", "protocol_port": 53, "default_pool": {
            "name": "pool_1_kube_service_c_n_s", "protocol": "UDP", "lb_algorithm": "ROUND_ROBIN", "members": []}}]
    # no subnet-id in cloud.conf: Octavia takes the VIP subnet for the members
    assert "subnet_id" not in logic.fully_populated_listeners(desired, "lb", "ROUND_ROBIN", "", (5, 3, 1, 3))[0][
        "default_pool"]["members"][0]


PORT80 = PortLayout(0, "TCP", 80, 30080, (("w1", "10.0.0.1", 30080), ("w2", "10.0.0.2", 30080)), True)


@pytest.mark.parametrize(("desired", "actual", "ops"), [
    ([PORT80], {}, ["create_listener", "create_pool", "create_member", "create_member", "create_monitor"]),
    ([PORT80], {("TCP", 80): ActualPort("l", "p", {("10.0.0.1", 30080): "m1", ("10.0.0.2", 30080): "m2"}, "hm")}, []),
    # a node left, another came
    ([PORT80], {("TCP", 80): ActualPort("l", "p", {("10.0.0.1", 30080): "m1", ("10.0.0.9", 30080): "m9"}, "hm")},
     ["delete_member", "create_member"]),
    # monitor switched off
    ([PortLayout(0, "TCP", 80, 30080, (), False)], {("TCP", 80): ActualPort("l", "p", {}, "hm")}, ["delete_monitor"]),
    # a port removed from the Service
    ([], {("TCP", 443): ActualPort("l4", "p4")}, ["delete_listener"]),
    # a listener without pool (interrupted ensure)
    ([PortLayout(0, "TCP", 80, 30080, (), False)], {("TCP", 80): ActualPort("l")}, ["create_pool"]),
])
def test_plan_lb(desired: list[PortLayout], actual: dict[tuple[str, int], ActualPort], ops: list[str]) -> None:
    assert [step["op"] for step in logic.plan_lb(desired, actual)] == ops


@pytest.mark.parametrize(("lb", "deletable", "why"), [
    ({"id": "1", "name": "kube_service_c_n_s", "tags": ["kube_service_c_n_s"], "provisioning_status": "ACTIVE"},
     True, ""),
    ({"id": "1", "name": "kube_service_c_n_s", "tags": ["kube_service_c_n_s", "kube_service_c_n_other"],
      "provisioning_status": "ACTIVE"}, False, "shared with kube_service_c_n_other"),
    ({"id": "1", "name": "my-own-lb", "tags": [], "provisioning_status": "ACTIVE"}, False, "is not named"),
    ({"id": "1", "name": "kube_service_c_n_s", "tags": [], "provisioning_status": "PENDING_UPDATE"}, False,
     "PENDING_UPDATE"),
])
def test_lb_deletable(lb: dict[str, Any], deletable: bool, why: str) -> None:
    ok, reason = logic.lb_deletable(lb, "kube_service_c_n_s")
    assert ok is deletable and why in reason


@pytest.mark.parametrize(("description", "keep", "deletable"), [
    ("Floating IP for Kubernetes external service n/s from cluster c", False, True),
    ("Floating IP for Kubernetes external service n/s from cluster c", True, False),
    ("my floating ip", False, False),
])
def test_fip_deletable(description: str, keep: bool, deletable: bool) -> None:
    wanted = logic.fip_description("c", "n", "s")
    assert logic.fip_deletable({"description": description}, wanted, keep) is deletable


@pytest.mark.parametrize(("annotations", "keep"), [
    ({}, False), ({logic.KEEP_FIP_ANNOTATION: "true"}, True), ({logic.KEEP_FIP_ANNOTATION: "false"}, False)])
def test_keeps_floating_ip(annotations: dict[str, str], keep: bool) -> None:
    assert logic.keeps_floating_ip(service([], annotations)) is keep


def test_ingress_status() -> None:
    assert logic.ingress_status("203.0.113.5") == {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}]}}
    assert logic.ingress_status("") == {"loadBalancer": {}}
