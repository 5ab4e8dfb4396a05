"""The kinds the lab API server serves: discovery data, etcd layout, defaults and validation."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    storage: str  # etcd path segment(s) under the prefix, as kube-apiserver lays them out
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    generation: bool = False
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = tuple(VERBS)

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


RESOURCES: list[ResourceType] = [
    ResourceType("", "v1", "Namespace", "namespaces", "namespace", False, "namespaces", ("ns",), ("status",)),
    ResourceType("", "v1", "Node", "nodes", "node", False, "minions", ("no",), ("status",)),
    ResourceType("", "v1", "Pod", "pods", "pod", True, "pods", ("po",), ("status", "eviction"), categories=("all",)),
    ResourceType("", "v1", "Service", "services", "service", True, "services/specs", ("svc",), ("status",),
                 categories=("all",)),
    ResourceType("", "v1", "Endpoints", "endpoints", "endpoints", True, "services/endpoints", ("ep",)),
    ResourceType("", "v1", "Secret", "secrets", "secret", True, "secrets"),
    ResourceType("", "v1", "ConfigMap", "configmaps", "configmap", True, "configmaps", ("cm",)),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", True, "serviceaccounts", ("sa",)),
    ResourceType("", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", False, "persistentvolumes",
                 ("pv",), ("status",)),
    ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", True,
                 "persistentvolumeclaims", ("pvc",), ("status",)),
    ResourceType("", "v1", "Event", "events", "event", True, "events", ("ev",)),
    ResourceType("apps", "v1", "Deployment", "deployments", "deployment", True, "deployments", ("deploy",),
                 ("status", "scale"), True, ("all",)),
    ResourceType("apps", "v1", "DaemonSet", "daemonsets", "daemonset", True, "daemonsets", ("ds",), ("status",), True,
                 ("all",)),
    ResourceType("apps", "v1", "StatefulSet", "statefulsets", "statefulset", True, "statefulsets", ("sts",),
                 ("status", "scale"), True, ("all",)),
    ResourceType("batch", "v1", "Job", "jobs", "job", True, "jobs", (), ("status",), True, ("all",)),
    ResourceType("storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass", False, "storageclasses",
                 ("sc",)),
    ResourceType("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", "volumeattachment", False,
                 "volumeattachments", (), ("status",)),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", "lease", True, "leases"),
]

GROUPS: dict[str, list[str]] = {}
for _rt in RESOURCES:
    if _rt.group and _rt.version not in GROUPS.setdefault(_rt.group, []):
        GROUPS[_rt.group].append(_rt.version)

BY_PATH: dict[tuple[str, str, str], ResourceType] = {(r.group, r.version, r.plural): r for r in RESOURCES}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return BY_PATH.get((group, version, plural))


def by_kind(kind: str) -> ResourceType:
    return next(r for r in RESOURCES if r.kind == kind)


SUBRESOURCE_KINDS = {"status": None, "eviction": ("policy", "v1", "Eviction", ["create"]),
                     "scale": ("autoscaling", "v1", "Scale", ["get", "patch", "update"])}


def api_resource_list(group: str, version: str) -> dict[str, Any]:
    """The APIResourceList of one group version (kubectl drain looks for pods/eviction here)."""
    items: list[dict[str, Any]] = []
    for rt in RESOURCES:
        if (rt.group, rt.version) != (group, version):
            continue
        entry: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                                 "kind": rt.kind, "verbs": list(rt.verbs)}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        items.append(entry)
        for sub in rt.subresources:
            spec = SUBRESOURCE_KINDS[sub]
            if spec is None:
                items.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                              "kind": rt.kind, "verbs": ["get", "patch", "update"]})
            else:
                g, v, kind, verbs = spec
                items.append({"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                              "group": g, "version": v, "kind": kind, "verbs": verbs})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": items}


def api_group_list() -> dict[str, Any]:
    groups = []
    for name, versions in GROUPS.items():
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        groups.append({"name": name, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


# ------------------------------------------------------------------ validation


class Invalid(ValueError):
    """Field errors (the API answers 422 Invalid with ``details.causes``)."""

    def __init__(self, causes: list[tuple[str, str, str]]) -> None:
        # (reason e.g. FieldValueRequired, field path, message)
        super().__init__("; ".join(f"{f}: {m}" for _r, f, m in causes))
        self.causes = causes


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Kinds whose names must be DNS labels (kube-apiserver's ValidateNamespaceName / ValidateServiceName).
LABEL_NAMED = {"Namespace", "Service"}


def name_problems(kind: str, name: str) -> list[str]:
    if kind in LABEL_NAMED:
        if len(name) > 63 or not DNS_LABEL.match(name):
            return ["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                    "must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')"]
        return []
    if len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        return ["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'example.com')"]
    return []


def _label_causes(labels: Any, path: str) -> list[tuple[str, str, str]]:
    causes: list[tuple[str, str, str]] = []
    if labels is None:
        return causes
    if not isinstance(labels, dict):
        return [("FieldValueInvalid", path, "must be a map of strings")]
    for key, value in labels.items():
        prefix, _slash, name = key.rpartition("/")
        if not QUALIFIED_NAME.match(name) or len(name) > 63 or (prefix and not DNS_SUBDOMAIN.match(prefix)):
            causes.append(("FieldValueInvalid", f"{path}", f"Invalid value: {key!r}: name part must consist of "
                           "alphanumeric characters, '-', '_' or '.'"))
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            causes.append(("FieldValueInvalid", f"{path}", f"Invalid value: {value!r}: a valid label must be an "
                           "empty string or consist of alphanumeric characters, '-', '_' or '.'"))
    return causes


def _pod_spec_causes(spec: Any, path: str) -> list[tuple[str, str, str]]:
    if not isinstance(spec, dict):
        return [("FieldValueRequired", path, "Required value")]
    causes = []
    containers = spec.get("containers")
    if not containers:
        causes.append(("FieldValueRequired", f"{path}.containers", "Required value"))
    for index, container in enumerate(containers or []):
        if not isinstance(container, dict) or not container.get("name"):
            causes.append(("FieldValueRequired", f"{path}.containers[{index}].name", "Required value"))
        elif not DNS_LABEL.match(str(container["name"])):
            causes.append(("FieldValueInvalid", f"{path}.containers[{index}].name",
                           f"Invalid value: {container['name']!r}: a lowercase RFC 1123 label"))
        if isinstance(container, dict) and not container.get("image"):
            causes.append(("FieldValueRequired", f"{path}.containers[{index}].image", "Required value"))
    return causes


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Raise Invalid with kube-apiserver-like field paths for what the kinds here must have."""
    from .selectors import labels_match, selector_from_label_selector

    meta = obj.get("metadata") or {}
    causes: list[tuple[str, str, str]] = []
    name = meta.get("name") or ""
    if not name:
        causes.append(("FieldValueRequired", "metadata.name", "name or generateName is required"))
    else:
        causes += [("FieldValueInvalid", "metadata.name", f"Invalid value: {name!r}: {p}") for p in name_problems(rt.kind, name)]
    causes += _label_causes(meta.get("labels"), "metadata.labels")
    spec = obj.get("spec") or {}
    if rt.kind == "Pod":
        causes += _pod_spec_causes(obj.get("spec"), "spec")
    elif rt.kind in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        template = spec.get("template") or {}
        causes += _pod_spec_causes(template.get("spec"), "spec.template.spec")
        selector = spec.get("selector")
        if rt.kind != "Job" and not selector:
            causes.append(("FieldValueRequired", "spec.selector", "Required value"))
        elif selector and not labels_match(selector_from_label_selector(selector),
                                           (template.get("metadata") or {}).get("labels") or {}):
            causes.append(("FieldValueInvalid", "spec.template.metadata.labels",
                           "Invalid value: `selector` does not match template `labels`"))
        if rt.kind in ("Deployment", "StatefulSet") and int(spec.get("replicas", 1) or 0) < 0:
            causes.append(("FieldValueInvalid", "spec.replicas", "must be greater than or equal to 0"))
    elif rt.kind == "Secret":
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                causes.append(("FieldValueInvalid", f"data[{key}]", "Invalid value: <secret contents redacted>: "
                               "illegal base64 data"))
    elif rt.kind == "StorageClass" and not obj.get("provisioner"):
        causes.append(("FieldValueRequired", "provisioner", "Required value"))
    elif rt.kind == "VolumeAttachment":
        for required in ("attacher", "nodeName", "source"):
            if not spec.get(required):
                causes.append(("FieldValueRequired", f"spec.{required}", "Required value"))
    elif rt.kind == "Service":
        for index, port in enumerate(spec.get("ports") or []):
            if not isinstance(port, dict) or not isinstance(port.get("port"), int) or not 0 < port["port"] < 65536:
                causes.append(("FieldValueInvalid", f"spec.ports[{index}].port", "must be between 1 and 65535"))
        if spec.get("type") not in (None, "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
            causes.append(("FieldValueNotSupported", "spec.type", f"Unsupported value: {spec.get('type')!r}"))
    elif rt.kind == "Event" and not obj.get("involvedObject"):
        causes.append(("FieldValueRequired", "involvedObject", "Required value"))
    if causes:
        raise Invalid(causes)


# ------------------------------------------------------------------ defaults (what kube-apiserver's defaulting fills in)

def _default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if not isinstance(container, dict):
            continue
        image = str(container.get("image", ""))
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        container.setdefault("imagePullPolicy", "IfNotPresent" if tagged and not image.endswith(":latest") else "Always")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def _default_rolling_update(spec: dict[str, Any], field: str, rolling: dict[str, Any]) -> None:
    """A workload's update strategy defaults to RollingUpdate with the kind's ``rollingUpdate`` parameters."""
    strategy = spec.setdefault(field, {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        strategy.setdefault("rollingUpdate", rolling)


def _default_template(spec: dict[str, Any]) -> None:
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {})
    _default_pod_spec(template.setdefault("spec", {}))


def apply_defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {}) if rt.kind in SPEC_KINDS else obj.get("spec")
    meta = obj["metadata"]
    if rt.kind == "Namespace":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        assert spec is not None
        spec.setdefault("finalizers", ["kubernetes"])
    elif rt.kind == "Pod":
        assert spec is not None
        _default_pod_spec(spec)
    elif rt.kind == "Deployment":
        assert spec is not None
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        _default_rolling_update(spec, "strategy", {"maxSurge": "25%", "maxUnavailable": "25%"})
        _default_template(spec)
    elif rt.kind == "DaemonSet":
        assert spec is not None
        _default_rolling_update(spec, "updateStrategy", {"maxUnavailable": 1, "maxSurge": 0})
        spec.setdefault("revisionHistoryLimit", 10)
        _default_template(spec)
    elif rt.kind == "StatefulSet":
        assert spec is not None
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("revisionHistoryLimit", 10)
        _default_rolling_update(spec, "updateStrategy", {"partition": 0})
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
        _default_template(spec)
    elif rt.kind == "Job":
        assert spec is not None
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        _default_template(spec)
        if not spec.get("manualSelector"):
            uid = meta["uid"]
            extra = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": meta["name"],
                     "controller-uid": uid, "job-name": meta["name"]}
            spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
            spec["template"]["metadata"].setdefault("labels", {}).update(extra)
    elif rt.kind == "Service":
        assert spec is not None
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    elif rt.kind == "Secret":
        obj.setdefault("type", "Opaque")
        string_data = obj.pop("stringData", None) or {}
        if string_data:
            data = obj.setdefault("data", {})
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
    elif rt.kind == "StorageClass":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif rt.kind == "PersistentVolume":
        assert spec is not None
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
    elif rt.kind == "PersistentVolumeClaim":
        assert spec is not None
        spec.setdefault("volumeMode", "Filesystem")


SPEC_KINDS = {"Namespace", "Pod", "Deployment", "DaemonSet", "StatefulSet", "Job", "Service", "PersistentVolume",
              "PersistentVolumeClaim", "VolumeAttachment", "Node", "Lease"}


def initial_status(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The status an object starts with (None: keep what the client sent)."""
    statuses: dict[str, dict[str, Any]] = {
        "Namespace": {"phase": "Active"},
        "Pod": {"phase": "Pending", "qosClass": "BestEffort"},
        "Service": {"loadBalancer": {}},
        "PersistentVolumeClaim": {"phase": "Pending"},
        # No PV controller: a new volume is Available at once (its first step on a real cluster).
        "PersistentVolume": {"phase": "Available"},
        "Deployment": {},
        "DaemonSet": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                      "numberReady": 0},
        "StatefulSet": {"replicas": 0, "availableReplicas": 0},
        "Job": {},
        "VolumeAttachment": {"attached": False},
    }
    return statuses.get(rt.kind)
