"""Server-side printing (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``): the columns
``kubectl get`` shows for the common kinds, NAME and AGE for the rest."""

from __future__ import annotations

import datetime
from typing import Any, Callable

from .resources import ResourceType

Column = tuple[str, str, int, Callable[[dict[str, Any]], Any]]  # name, type, priority (1 = -o wide), cell


def human_age(timestamp: str | None, now: datetime.datetime | None = None) -> str:
    """kubectl's short duration (``45s``, ``3m12s``, ``17m``, ``5h3m``, ``30h``, ``12d``)."""
    if not timestamp:
        return "<unknown>"
    then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    seconds = int(((now or datetime.datetime.now(datetime.timezone.utc)) - then).total_seconds())
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _node_status(node: dict[str, Any]) -> str:
    ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Ready"), None)
    text = {"True": "Ready", "False": "NotReady"}.get(str(ready), "Unknown")
    return text + (",SchedulingDisabled" if (node.get("spec") or {}).get("unschedulable") else "")


def _roles(node: dict[str, Any]) -> str:
    roles = sorted(k.split("/", 1)[1] for k in (node.get("metadata", {}).get("labels") or {})
                   if k.startswith("node-role.kubernetes.io/"))
    return ",".join(roles) or "<none>"


def _pod_ready(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("spec") or {}


AGE: Column = ("Age", "string", 0, lambda o: human_age(o["metadata"].get("creationTimestamp")))
COLUMNS: dict[str, list[Column]] = {
    "Node": [("Status", "string", 0, _node_status), ("Roles", "string", 0, _roles), AGE,
             ("Version", "string", 0, lambda o: (_status(o).get("nodeInfo") or {}).get("kubeletVersion", "")),
             ("Internal-IP", "string", 1, lambda o: next((a["address"] for a in _status(o).get("addresses") or []
                                                          if a.get("type") == "InternalIP"), "<none>"))],
    "Pod": [("Ready", "string", 0, _pod_ready),
            ("Status", "string", 0, lambda o: "Terminating" if o["metadata"].get("deletionTimestamp")
             else _status(o).get("phase", "Pending")),
            ("Restarts", "string", 0, lambda o: str(sum(s.get("restartCount", 0)
                                                        for s in _status(o).get("containerStatuses") or []))),
            ("IP", "string", 1, lambda o: _status(o).get("podIP") or "<none>"),
            ("Node", "string", 1, lambda o: _spec(o).get("nodeName") or "<none>")],
    "Deployment": [("Ready", "string", 0, lambda o: f"{_status(o).get('readyReplicas', 0)}/{_spec(o).get('replicas', 1)}"),
                   ("Up-to-date", "integer", 0, lambda o: _status(o).get("updatedReplicas", 0)),
                   ("Available", "integer", 0, lambda o: _status(o).get("availableReplicas", 0))],
    "DaemonSet": [("Desired", "integer", 0, lambda o: _status(o).get("desiredNumberScheduled", 0)),
                  ("Current", "integer", 0, lambda o: _status(o).get("currentNumberScheduled", 0)),
                  ("Ready", "integer", 0, lambda o: _status(o).get("numberReady", 0)),
                  ("Up-to-date", "integer", 0, lambda o: _status(o).get("updatedNumberScheduled", 0)),
                  ("Available", "integer", 0, lambda o: _status(o).get("numberAvailable", 0))],
    "StatefulSet": [("Ready", "string", 0, lambda o: f"{_status(o).get('readyReplicas', 0)}/{_spec(o).get('replicas', 1)}")],
    "Service": [("Type", "string", 0, lambda o: _spec(o).get("type", "ClusterIP")),
                ("Cluster-IP", "string", 0, lambda o: _spec(o).get("clusterIP") or "<none>"),
                ("External-IP", "string", 0, lambda o: ",".join(i.get("ip") or i.get("hostname", "") for i in
                                                                (_status(o).get("loadBalancer") or {}).get("ingress") or [])
                 or ("<pending>" if _spec(o).get("type") == "LoadBalancer" else "<none>")),
                ("Port(s)", "string", 0, lambda o: ",".join(
                    f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/{p.get('protocol', 'TCP')}"
                    for p in _spec(o).get("ports") or []) or "<none>")],
    "Namespace": [("Status", "string", 0, lambda o: _status(o).get("phase", "Active"))],
    "Secret": [("Type", "string", 0, lambda o: o.get("type", "Opaque")),
               ("Data", "integer", 0, lambda o: len(o.get("data") or {}))],
    "ConfigMap": [("Data", "integer", 0, lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}))],
    "PersistentVolumeClaim": [("Status", "string", 0, lambda o: _status(o).get("phase", "")),
                              ("Volume", "string", 0, lambda o: _spec(o).get("volumeName", "")),
                              ("StorageClass", "string", 0, lambda o: _spec(o).get("storageClassName") or "<unset>")],
    "PersistentVolume": [("Capacity", "string", 0, lambda o: (_spec(o).get("capacity") or {}).get("storage", "")),
                         ("Status", "string", 0, lambda o: _status(o).get("phase", "")),
                         ("Claim", "string", 0, lambda o: "/".join(filter(None, [
                             (_spec(o).get("claimRef") or {}).get("namespace"),
                             (_spec(o).get("claimRef") or {}).get("name")])))],
    "StorageClass": [("Provisioner", "string", 0, lambda o: o.get("provisioner", "")),
                     ("ReclaimPolicy", "string", 0, lambda o: o.get("reclaimPolicy", "")),
                     ("VolumeBindingMode", "string", 0, lambda o: o.get("volumeBindingMode", ""))],
    "VolumeAttachment": [("Attacher", "string", 0, lambda o: _spec(o).get("attacher", "")),
                         ("Node", "string", 0, lambda o: _spec(o).get("nodeName", "")),
                         ("Attached", "boolean", 0, lambda o: bool(_status(o).get("attached")))],
    "Lease": [("Holder", "string", 0, lambda o: _spec(o).get("holderIdentity", ""))],
}


def wants_table(accept: str) -> bool:
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


def table(rt: ResourceType, items: list[dict[str, Any]], resource_version: str, include: str) -> dict[str, Any]:
    columns = list(COLUMNS.get(rt.kind, []))
    if AGE not in columns:
        # kubectl's order: the always-shown columns, AGE, then the -o wide ones.
        columns.insert(sum(1 for c in columns if c[2] == 0), AGE)
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
    definitions += [{"name": n, "type": t, "format": "", "description": n, "priority": p} for n, t, p, _f in columns]
    rows = []
    for obj in items:
        row: dict[str, Any] = {"cells": [obj["metadata"]["name"], *[f(obj) for _n, _t, _p, f in columns]]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": definitions, "rows": rows}
