"""The stand-ins' decisions as plain functions (plain data in, plan out), unit-tested with tables.

Names, descriptions, labels and annotations follow cloud-provider-openstack, the CSI sidecars and
kube-controller-manager (see docs/lab_provider.md for the sources); nothing here talks to a service.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

# ------------------------------------------------------------------ constants (upstream names)

CINDER_DRIVER = "cinder.csi.openstack.org"
PROVIDER_ID_PREFIX = "openstack:///"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
CSI_ZONE_LABEL = "topology.cinder.csi.openstack.org/zone"
EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
LB_ID_ANNOTATION = "loadbalancer.openstack.org/load-balancer-id"
KEEP_FIP_ANNOTATION = "loadbalancer.openstack.org/keep-floatingip"
LB_CLEANUP_FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
CLUSTER_METADATA_KEY = "cinder.csi.openstack.org/cluster"
PVC_NAME_KEY = "csi.storage.k8s.io/pvc/name"
PVC_NAMESPACE_KEY = "csi.storage.k8s.io/pvc/namespace"
PV_NAME_KEY = "csi.storage.k8s.io/pv/name"
PROVISIONER_FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"
PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection"
ATTACHER_FINALIZER = "external-attacher/cinder-csi-openstack-org"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
WRITE_ANNOTATION = "lab.deployopen.io/write"
SHA_ANNOTATION_PREFIX = "lab.deployopen.io/volume-sha256."
MAX_NAME = 255


# ------------------------------------------------------------------ cloud.conf


class CloudConfError(ValueError):
    """cloud.conf lacks what the stand-ins need; the message says what."""


@dataclass(frozen=True)
class CloudConf:
    auth_url: str
    region: str
    application_credential_id: str
    application_credential_secret: str = field(repr=False)
    floating_network_id: str = ""
    subnet_id: str = ""
    lb_provider: str = ""
    lb_method: str = "ROUND_ROBIN"
    create_monitor: bool = False
    monitor_delay: int = 5
    monitor_timeout: int = 3
    monitor_max_retries: int = 1
    monitor_max_retries_down: int = 3


def _bool(value: str) -> bool:
    return value.strip().lower() in ("true", "yes", "1", "on")


def _seconds(value: str) -> int:
    """Durations in cloud.conf are Go durations (``5s``, ``1m``) or plain seconds."""
    match = re.fullmatch(r"\s*(\d+)\s*(s|m)?\s*", value)
    if not match:
        raise CloudConfError(f"not a duration: {value!r}")
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1)


def parse_cloud_conf(text: str) -> CloudConf:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        # configparser quotes the offending line, which may hold the credential's secret: name the place only.
        line = getattr(exc, "lineno", None) or next((n for n, _text in getattr(exc, "errors", [])), None)
        raise CloudConfError(f"cloud.conf does not parse ({type(exc).__name__}"
                             + (f" at line {line})" if line else ")")) from None
    glob = parser["Global"] if parser.has_section("Global") else {}
    missing = [k for k in ("auth-url", "region", "application-credential-id", "application-credential-secret")
               if not str(glob.get(k, "")).strip()]
    if missing:
        raise CloudConfError(f"cloud.conf [Global] lacks {', '.join(missing)} (the stand-ins authenticate with an "
                             "application credential)")
    lb = parser["LoadBalancer"] if parser.has_section("LoadBalancer") else {}
    return CloudConf(
        auth_url=str(glob["auth-url"]).strip(), region=str(glob["region"]).strip(),
        application_credential_id=str(glob["application-credential-id"]).strip(),
        application_credential_secret=str(glob["application-credential-secret"]).strip(),
        floating_network_id=str(lb.get("floating-network-id", "")).strip(),
        subnet_id=str(lb.get("subnet-id", "")).strip(), lb_provider=str(lb.get("lb-provider", "")).strip(),
        lb_method=str(lb.get("lb-method", "ROUND_ROBIN")).strip() or "ROUND_ROBIN",
        create_monitor=_bool(str(lb.get("create-monitor", "false"))),
        monitor_delay=_seconds(str(lb.get("monitor-delay", "5"))),
        monitor_timeout=_seconds(str(lb.get("monitor-timeout", "3"))),
        monitor_max_retries=int(str(lb.get("monitor-max-retries", "1"))),
        monitor_max_retries_down=int(str(lb.get("monitor-max-retries-down", "3"))))


def template_hash(workload: dict[str, Any] | None) -> str:
    """What a pod restart depends on: the workload's pod template, and the workload itself (one deleted and
    created again, or another kind in its place, has new pods). No workload: empty."""
    if not workload:
        return ""
    template = (workload.get("spec") or {}).get("template") or {}
    identity = {"uid": (workload.get("metadata") or {}).get("uid", ""), "template": template}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


# ------------------------------------------------------------------ nodes (kubelet registration + CCM)


@dataclass(frozen=True)
class ServerInfo:
    id: str
    name: str
    status: str
    flavor: str
    zone: str
    fixed_ips: tuple[str, ...]
    floating_ips: tuple[str, ...] = ()
    role: str = ""


def server_info(server: dict[str, Any]) -> ServerInfo:
    """From a Nova server document (openstacksdk ``to_dict()``)."""
    fixed: list[str] = []
    floating: list[str] = []
    for addresses in (server.get("addresses") or {}).values():
        for address in addresses:
            (floating if address.get("OS-EXT-IPS:type") == "floating" else fixed).append(address["addr"])
    flavor = server.get("flavor") or {}
    return ServerInfo(id=server["id"], name=server["name"], status=server.get("status") or "",
                      flavor=str(flavor.get("original_name") or flavor.get("name") or flavor.get("id") or ""),
                      zone=str(server.get("availability_zone") or server.get("OS-EXT-AZ:availability_zone") or ""),
                      fixed_ips=tuple(fixed), floating_ips=tuple(floating),
                      role=str((server.get("metadata") or {}).get("k8s_role", "")))


def provider_id(server_id: str) -> str:
    return PROVIDER_ID_PREFIX + server_id


def server_id_of(node: dict[str, Any]) -> str:
    pid = str((node.get("spec") or {}).get("providerID") or "")
    return pid[len(PROVIDER_ID_PREFIX):] if pid.startswith(PROVIDER_ID_PREFIX) else ""


def registered_node(server: ServerInfo, now: str) -> dict[str, Any]:
    """The Node a kubelet started with ``--cloud-provider=external`` registers: hostname, the uninitialized
    taint, Ready (the lab has no containers to wait for); the cloud fields are the CCM's to set."""
    labels = {"kubernetes.io/hostname": server.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    taints = [{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}]
    if server.role == "control-plane":
        # What kubeadm puts on a control-plane node (the label keeps it out of load balancer pools).
        labels[CONTROL_PLANE_ROLE] = ""
        labels[EXCLUDE_LB_LABEL] = ""
        taints.append({"key": CONTROL_PLANE_ROLE, "effect": "NoSchedule"})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": server.name, "labels": labels,
                     "annotations": {"lab.deployopen.io/registered-by": "lab.provider (kubelet stand-in)"}},
        "spec": {"taints": taints},
        "status": {
            "addresses": [{"type": "Hostname", "address": server.name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status (lab stand-in)",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "nodeInfo": {"kubeletVersion": "v1.33.0-lab", "kubeProxyVersion": "v1.33.0-lab",
                         "operatingSystem": "linux", "architecture": "amd64", "containerRuntimeVersion": "lab://0",
                         "osImage": "lab-image", "kernelVersion": "lab", "machineID": server.id,
                         "systemUUID": server.id, "bootID": server.id},
        },
    }


def node_addresses(server: ServerInfo) -> list[dict[str, str]]:
    return ([{"type": "InternalIP", "address": ip} for ip in server.fixed_ips]
            + [{"type": "ExternalIP", "address": ip} for ip in server.floating_ips]
            + [{"type": "Hostname", "address": server.name}])


def initialised_node(node: dict[str, Any], server: ServerInfo, region: str, now: str = "") -> dict[str, Any] | None:
    """The CCM's cloud-node controller on one Node: providerID, addresses, zone/region/instance-type labels
    (and the Cinder CSI node plugin's topology label), the uninitialized taint removed. And what a server that
    is not ACTIVE means: its kubelet stops posting status (Ready Unknown, kube-controller-manager's
    ``node.kubernetes.io/unreachable:NoSchedule``) and, when SHUTOFF, the CCM's
    ``node.cloudprovider.kubernetes.io/shutdown`` taint. None: nothing to do."""
    new = json.loads(json.dumps(node))
    spec = new.setdefault("spec", {})
    meta = new.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    if not spec.get("providerID"):
        spec["providerID"] = provider_id(server.id)
    wanted_labels = {INSTANCE_TYPE_LABEL: server.flavor, ZONE_LABEL: server.zone, REGION_LABEL: region,
                     CSI_ZONE_LABEL: server.zone}
    labels.update({k: v for k, v in wanted_labels.items() if v})
    if any(t.get("key") == UNINITIALIZED_TAINT for t in spec.get("taints") or []):
        spec["taints"] = [t for t in spec["taints"] if t.get("key") != UNINITIALIZED_TAINT]
    down = server.status != "ACTIVE"
    managed = {SHUTDOWN_TAINT, UNREACHABLE_TAINT}
    current = spec.get("taints") or []
    wanted = ([{"key": SHUTDOWN_TAINT, "effect": "NoSchedule"}] if server.status == "SHUTOFF" else []) + (
        [{"key": UNREACHABLE_TAINT, "effect": "NoSchedule"}] if down else [])
    if sorted(t["key"] for t in current if t.get("key") in managed) != sorted(t["key"] for t in wanted):
        spec["taints"] = [t for t in current if t.get("key") not in managed] + wanted
    status = new.setdefault("status", {})
    status["addresses"] = node_addresses(server)
    conditions = status.setdefault("conditions", [])
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    wanted_ready = "Unknown" if down else "True"
    if ready is None or ready.get("status") != wanted_ready:
        replacement = {"type": "Ready", "status": wanted_ready, "lastHeartbeatTime": now, "lastTransitionTime": now,
                       "reason": "NodeStatusUnknown" if down else "KubeletReady",
                       "message": f"Kubelet stopped posting node status (server {server.status})" if down
                       else "kubelet is posting ready status (lab stand-in)"}
        status["conditions"] = [c for c in conditions if c.get("type") != "Ready"] + [replacement]
    return None if new == node else new


@dataclass
class NodePlan:
    register: list[ServerInfo] = field(default_factory=list)
    initialise: list[tuple[str, ServerInfo]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)


def plan_nodes(servers: Iterable[ServerInfo], nodes: Iterable[dict[str, Any]], prefix: str,
               region: str) -> NodePlan:
    """Kubelet registration (a Node per ACTIVE server of the cluster), CCM initialisation (Nodes whose cloud
    fields are not what the server says) and the CCM's node-lifecycle rule (a Node whose server is gone goes)."""
    plan = NodePlan()
    all_servers = list(servers)
    ours = [s for s in all_servers if s.name.startswith(prefix) and s.status == "ACTIVE"]
    by_id = {s.id: s for s in all_servers}
    by_name = {s.name: s for s in all_servers}
    node_list = list(nodes)
    node_names = {n["metadata"]["name"] for n in node_list}
    for server in sorted(ours, key=lambda s: s.name):
        if server.name not in node_names:
            plan.register.append(server)
    for node in node_list:
        name = node["metadata"]["name"]
        sid = server_id_of(node)
        found = by_id.get(sid) if sid else by_name.get(name)
        if found is None:
            if sid or name.startswith(prefix):
                plan.delete.append(name)
            continue
        if found.status in ("DELETED", "SOFT_DELETED"):
            plan.delete.append(name)
            continue
        if initialised_node(node, found, region) is not None:
            plan.initialise.append((name, found))
    return plan


# ------------------------------------------------------------------ load balancers


def cut(name: str) -> str:
    return name[:MAX_NAME]


def lb_name(cluster: str, namespace: str, name: str) -> str:
    return cut(f"kube_service_{cluster}_{namespace}_{name}")


def lb_description(cluster: str, namespace: str, name: str) -> str:
    return f"Kubernetes external service {namespace}/{name} from cluster {cluster}"


def fip_description(cluster: str, namespace: str, name: str) -> str:
    return f"Floating IP for Kubernetes external service {namespace}/{name} from cluster {cluster}"


def listener_name(index: int, lb: str) -> str:
    return cut(f"listener_{index}_{lb}")


def pool_name(index: int, lb: str) -> str:
    return cut(f"pool_{index}_{lb}")


def monitor_name(index: int, lb: str) -> str:
    return cut(f"monitor_{index}_{lb}")


def is_lb_service(service: dict[str, Any]) -> bool:
    return (service.get("spec") or {}).get("type") == "LoadBalancer"


def keeps_floating_ip(service: dict[str, Any]) -> bool:
    return _bool(str((service.get("metadata", {}).get("annotations") or {}).get(KEEP_FIP_ANNOTATION, "false")))


def node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def internal_ip(node: dict[str, Any]) -> str:
    addresses = (node.get("status") or {}).get("addresses") or []
    for wanted in ("InternalIP", "ExternalIP"):
        for address in addresses:
            if address.get("type") == wanted:
                return str(address["address"])
    return ""


def lb_backends(nodes: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """(node name, address) of every Node that may carry load-balancer traffic: Ready, initialised, an
    address, not labelled out."""
    backends = []
    for node in nodes:
        meta = node.get("metadata") or {}
        if meta.get("deletionTimestamp") or EXCLUDE_LB_LABEL in (meta.get("labels") or {}):
            continue
        if not node_ready(node) or not server_id_of(node):
            continue
        if any(t.get("key") == UNINITIALIZED_TAINT for t in (node.get("spec") or {}).get("taints") or []):
            continue
        address = internal_ip(node)
        if address:
            backends.append((meta["name"], address))
    return sorted(backends)


@dataclass(frozen=True)
class PortLayout:
    index: int
    protocol: str
    port: int
    node_port: int
    members: tuple[tuple[str, str, int], ...]  # (node name, address, node port)
    monitor: bool


def desired_layout(service: dict[str, Any], backends: list[tuple[str, str]], create_monitor: bool) -> list[PortLayout]:
    """One listener, pool, member set and (with create-monitor) health monitor per Service port, as the CCM
    builds them: members are every backend node's address on the port's nodePort."""
    layout = []
    annotations = service.get("metadata", {}).get("annotations") or {}
    monitor = _bool(annotations.get("loadbalancer.openstack.org/enable-health-monitor", str(create_monitor)))
    for index, port in enumerate((service.get("spec") or {}).get("ports") or []):
        node_port = int(port.get("nodePort") or 0)
        members = tuple((name, address, node_port) for name, address in backends) if node_port else ()
        layout.append(PortLayout(index, str(port.get("protocol") or "TCP"), int(port["port"]), node_port, members,
                                 monitor))
    return layout


@dataclass
class ActualPort:
    listener_id: str
    pool_id: str = ""
    members: dict[tuple[str, int], str] = field(default_factory=dict)  # (address, port) -> member id
    monitor_id: str = ""


def plan_lb(desired: list[PortLayout], actual: dict[tuple[str, int], ActualPort]) -> list[dict[str, Any]]:
    """Steps that turn the load balancer's children into the desired layout, in an order Octavia accepts
    (one change at a time, the LB ACTIVE between them)."""
    steps: list[dict[str, Any]] = []
    wanted_keys = {(p.protocol, p.port) for p in desired}
    for key, current in sorted(actual.items()):
        if key not in wanted_keys:
            steps.append({"op": "delete_listener", "listener_id": current.listener_id, "pool_id": current.pool_id})
    for port in desired:
        current_port = actual.get((port.protocol, port.port))
        if current_port is None:
            steps.append({"op": "create_listener", "index": port.index, "protocol": port.protocol, "port": port.port})
            steps.append({"op": "create_pool", "index": port.index, "protocol": port.protocol, "port": port.port})
            steps += [{"op": "create_member", "port": port.port, "protocol": port.protocol, "name": name,
                       "address": address, "member_port": node_port} for name, address, node_port in port.members]
            if port.monitor:
                steps.append({"op": "create_monitor", "index": port.index, "protocol": port.protocol,
                              "port": port.port})
            continue
        if not current_port.pool_id:
            steps.append({"op": "create_pool", "index": port.index, "protocol": port.protocol, "port": port.port})
        wanted_members = {(address, node_port): name for name, address, node_port in port.members}
        for member_key, member_id in sorted(current_port.members.items()):
            if member_key not in wanted_members:
                steps.append({"op": "delete_member", "pool_id": current_port.pool_id, "member_id": member_id})
        for (address, node_port), name in sorted(wanted_members.items()):
            if (address, node_port) not in current_port.members:
                steps.append({"op": "create_member", "port": port.port, "protocol": port.protocol, "name": name,
                              "address": address, "member_port": node_port})
        if port.monitor and not current_port.monitor_id:
            steps.append({"op": "create_monitor", "index": port.index, "protocol": port.protocol, "port": port.port})
        elif not port.monitor and current_port.monitor_id:
            steps.append({"op": "delete_monitor", "monitor_id": current_port.monitor_id})
    return steps


def fully_populated_listeners(desired: list[PortLayout], lb: str, lb_method: str, subnet_id: str,
                              monitor: tuple[int, int, int, int]) -> list[dict[str, Any]]:
    """The listener tree of a fully populated create (one Octavia call builds LB, listeners, pools, members
    and monitors, as the CCM does when the provider allows it). monitor = delay, timeout, retries, retries down."""
    listeners = []
    for port in desired:
        pool: dict[str, Any] = {
            "name": pool_name(port.index, lb), "protocol": port.protocol, "lb_algorithm": lb_method,
            "members": [{"name": cut(name), "address": address, "protocol_port": node_port,
                         **({"subnet_id": subnet_id} if subnet_id else {})} for name, address, node_port in port.members]}
        if port.monitor:
            delay, timeout, retries, retries_down = monitor
            pool["healthmonitor"] = {"name": monitor_name(port.index, lb), "type": monitor_type(port.protocol),
                                     "delay": delay, "timeout": timeout, "max_retries": retries,
                                     "max_retries_down": retries_down}
        listeners.append({"name": listener_name(port.index, lb), "protocol": port.protocol,
                          "protocol_port": port.port, "default_pool": pool})
    return listeners


def monitor_type(protocol: str) -> str:
    return "UDP-CONNECT" if protocol == "UDP" else "TCP"


def lb_deletable(lb: dict[str, Any], name: str) -> tuple[bool, str]:
    """The CCM deletes only its own load balancer: named ``kube_service_*`` and no other Service's tag on it;
    never one in a PENDING_* state (immutable)."""
    if not str(lb.get("name", "")).startswith("kube_service_") or lb.get("name") != name:
        return False, f"load balancer {lb.get('id')} is not named {name}"
    others = [t for t in lb.get("tags") or [] if t.startswith("kube_service_") and t != name]
    if others:
        return False, f"load balancer {lb.get('id')} is shared with {', '.join(sorted(others))}"
    if str(lb.get("provisioning_status", "")).startswith("PENDING_"):
        return False, f"load balancer {lb.get('id')} is {lb.get('provisioning_status')}: retried later"
    return True, ""


def fip_deletable(fip: dict[str, Any], description: str, keep: bool) -> bool:
    return not keep and fip.get("description") == description


def ingress_status(address: str) -> dict[str, Any]:
    return {"loadBalancer": {"ingress": [{"ip": address}]}} if address else {"loadBalancer": {}}


# ------------------------------------------------------------------ Cinder CSI


_UNITS = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "P": 1000**5,
          "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5}


def quantity_bytes(quantity: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kMGTP]i?|)\s*", str(quantity))
    if not match:
        raise ValueError(f"not a storage quantity: {quantity!r}")
    return math.ceil(float(match.group(1)) * _UNITS[match.group(2)])


def size_gib(quantity: str) -> int:
    """Cinder sizes are whole GiB: the CSI driver rounds the request up (at least 1)."""
    return max(1, math.ceil(quantity_bytes(quantity) / 1024**3))


def pv_name_for(pvc: dict[str, Any]) -> str:
    """external-provisioner's volume name: ``pvc-<claim uid>`` (the PV's and the Cinder volume's name)."""
    return f"pvc-{pvc['metadata']['uid']}"


def claim_class(pvc: dict[str, Any]) -> str:
    return str((pvc.get("spec") or {}).get("storageClassName")
               or (pvc.get("metadata", {}).get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
               or "")


def pods_using_claim(pods: Iterable[dict[str, Any]], namespace: str, claim: str) -> list[dict[str, Any]]:
    found = []
    for pod in pods:
        if pod["metadata"].get("namespace") != namespace:
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if claim in pod_claims(pod):
            found.append(pod)
    return found


def pod_claims(pod: dict[str, Any]) -> list[str]:
    return [str(v["persistentVolumeClaim"]["claimName"]) for v in (pod.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and v.get("persistentVolumeClaim", {}).get("claimName")]


def selected_node(pvc: dict[str, Any], pods: Iterable[dict[str, Any]]) -> str:
    """WaitForFirstConsumer: the node of the first scheduled pod using the claim (the scheduler's
    ``volume.kubernetes.io/selected-node`` annotation when set)."""
    annotated = (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)
    if annotated:
        return str(annotated)
    users = [p for p in pods_using_claim(pods, pvc["metadata"]["namespace"], pvc["metadata"]["name"])
             if (p.get("spec") or {}).get("nodeName")]
    return str(users[0]["spec"]["nodeName"]) if users else ""


def needs_provisioning(pvc: dict[str, Any], storage_class: dict[str, Any] | None,
                       pods: Iterable[dict[str, Any]]) -> tuple[bool, str]:
    """Should external-provisioner provision this claim now? (bool, why not)."""
    if pvc["metadata"].get("deletionTimestamp"):
        return False, "claim is being deleted"
    if (pvc.get("spec") or {}).get("volumeName"):
        return False, "claim is bound"
    if storage_class is None:
        return False, f"storage class {claim_class(pvc)!r} not found"
    if storage_class.get("provisioner") != CINDER_DRIVER:
        return False, f"storage class {storage_class['metadata']['name']} is not {CINDER_DRIVER}'s"
    if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not selected_node(pvc, pods):
        return False, "waiting for first consumer to be created before binding"
    return True, ""


def volume_request(pvc: dict[str, Any], storage_class: dict[str, Any], cluster: str) -> dict[str, Any]:
    """Cinder CSI's CreateVolume for this claim: name, size, type from the class's ``type`` parameter,
    metadata with the cluster id and the claim identity (external-provisioner ``--extra-create-metadata``)."""
    name = pv_name_for(pvc)
    request = ((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}
    params = storage_class.get("parameters") or {}
    body: dict[str, Any] = {
        "name": name, "size": size_gib(str(request.get("storage", "1Gi"))),
        "metadata": {CLUSTER_METADATA_KEY: cluster, PVC_NAME_KEY: pvc["metadata"]["name"],
                     PVC_NAMESPACE_KEY: pvc["metadata"]["namespace"], PV_NAME_KEY: name}}
    if params.get("type"):
        body["volume_type"] = str(params["type"])
    if params.get("availability"):
        body["availability_zone"] = str(params["availability"])
    return body


def pv_body(pvc: dict[str, Any], storage_class: dict[str, Any], volume_id: str, gib: int, zone: str) -> dict[str, Any]:
    params = storage_class.get("parameters") or {}
    spec: dict[str, Any] = {
        "capacity": {"storage": f"{gib}Gi"},
        "accessModes": list((pvc.get("spec") or {}).get("accessModes") or ["ReadWriteOnce"]),
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "storageClassName": storage_class["metadata"]["name"],
        "volumeMode": (pvc.get("spec") or {}).get("volumeMode") or "Filesystem",
        "csi": {"driver": CINDER_DRIVER, "volumeHandle": volume_id,
                "fsType": str(params.get("csi.storage.k8s.io/fstype") or "ext4"),
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": f"lab-{CINDER_DRIVER}"}},
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": pvc["metadata"]["name"],
                     "namespace": pvc["metadata"]["namespace"], "uid": pvc["metadata"]["uid"]},
    }
    if zone:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": CSI_ZONE_LABEL, "operator": "In", "values": [zone]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv_name_for(pvc), "annotations": {"pv.kubernetes.io/provisioned-by": CINDER_DRIVER},
                         "finalizers": [PROVISIONER_FINALIZER]},
            "spec": spec}


def va_name(volume_handle: str, attacher: str, node: str) -> str:
    """kube-controller-manager's VolumeAttachment name: ``csi-`` + sha256(volume handle, driver, node)."""
    return "csi-" + hashlib.sha256(f"{volume_handle}{attacher}{node}".encode()).hexdigest()


def desired_attachments(pods: Iterable[dict[str, Any]], pvcs: Iterable[dict[str, Any]],
                        pvs: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """The attach/detach controller: (PV name, node) for every scheduled, not finished pod using a bound claim
    whose PV is Cinder CSI's."""
    pv_by_name = {pv["metadata"]["name"]: pv for pv in pvs}
    claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in pvcs}
    wanted: set[tuple[str, str]] = set()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for claim_name in pod_claims(pod):
            claim = claims.get((pod["metadata"]["namespace"], claim_name))
            volume = ((claim or {}).get("spec") or {}).get("volumeName")
            pv = pv_by_name.get(volume or "")
            if pv and ((pv.get("spec") or {}).get("csi") or {}).get("driver") == CINDER_DRIVER:
                wanted.add((pv["metadata"]["name"], node))
    return wanted


def plan_attachments(wanted: set[tuple[str, str]], pvs: Iterable[dict[str, Any]],
                     vas: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """VolumeAttachments to create and to delete (by name)."""
    handles = {pv["metadata"]["name"]: pv["spec"]["csi"]["volumeHandle"] for pv in pvs
               if ((pv.get("spec") or {}).get("csi") or {}).get("driver") == CINDER_DRIVER}
    existing = {}
    for va in vas:
        spec = va.get("spec") or {}
        if spec.get("attacher") != CINDER_DRIVER:
            continue
        existing[(spec.get("source", {}).get("persistentVolumeName"), spec.get("nodeName"))] = va
    create = []
    for pv_name, node in sorted(wanted):
        if (pv_name, node) not in existing and pv_name in handles:
            create.append({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                           "metadata": {"name": va_name(handles[pv_name], CINDER_DRIVER, node)},
                           "spec": {"attacher": CINDER_DRIVER, "nodeName": node,
                                    "source": {"persistentVolumeName": pv_name}}})
    delete = sorted(va["metadata"]["name"] for key, va in existing.items()
                    if key not in wanted and not va["metadata"].get("deletionTimestamp"))
    return create, delete


def attached_servers(volume: dict[str, Any]) -> set[str]:
    return {str(a.get("server_id")) for a in volume.get("attachments") or [] if a.get("server_id")}


def sha_annotation(claim: str) -> str:
    return SHA_ANNOTATION_PREFIX + claim


def write_key(pod_uid: str, claim: str, value: str) -> str:
    """One write = one (pod, claim, value): a pod appends its value once; a new pod (or a new value) writes again."""
    return f"{pod_uid}/{claim}/{hashlib.sha256(value.encode()).hexdigest()[:16]}"
