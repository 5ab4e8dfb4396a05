"""The few controllers a real cluster runs that kubectl's rollout and drain commands wait on.

One thread, woken by every write this server makes (and every 5 s), plays:

- a scheduler: a Pod without ``spec.nodeName`` is bound to a schedulable Node (not cordoned, taints
  tolerated, ``nodeSelector`` matched), the one with the fewest pods;
- a kubelet stand-in: a bound Pod goes straight to Running and Ready (there are no containers);
- Deployment, DaemonSet and StatefulSet controllers: Pods from the template (owner reference, labels,
  ``pod-template-hash`` / ``controller-revision-hash``), replaced at once when the template changes (no
  surge, no ReplicaSets, no ControllerRevisions), and the status fields ``kubectl rollout status`` reads;
- the garbage collector's one rule the lab needs: Pods whose controller is gone are deleted;
- pod GC: a Pod bound to a Node that has not existed for 40 s is deleted (its controller replaces it).

Jobs are stored but not run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
import traceback
from typing import Any

from .api import Api
from .resources import by_kind
from .store import ApiError, now_rfc3339

WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")
# kube-controller-manager's pod GC waits this long before deleting a pod whose Node does not exist.
ORPHAN_QUARANTINE_SECONDS = 40.0
# What the DaemonSet controller adds to every daemon pod, so cordoned and not-ready nodes keep theirs.
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def template_hash(template: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def fits(node: dict[str, Any], pod_spec: dict[str, Any]) -> bool:
    """Can a pod with this spec be scheduled on the node (cordon, taints, nodeSelector)?"""
    tolerations = pod_spec.get("tolerations") or []
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    if spec.get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return False
    selector = pod_spec.get("nodeSelector") or {}
    labels = node.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((o for o in pod.get("metadata", {}).get("ownerReferences") or [] if o.get("controller")), None)


def running_status(pod: dict[str, Any], node: dict[str, Any] | None) -> dict[str, Any]:
    now = now_rfc3339()
    uid = pod["metadata"]["uid"]
    digest = int(hashlib.sha256(uid.encode()).hexdigest(), 16)
    host_ip = next((a["address"] for a in ((node or {}).get("status") or {}).get("addresses") or []
                    if a.get("type") == "InternalIP"), "10.20.0.1")
    pod_ip = host_ip if (pod.get("spec") or {}).get("hostNetwork") else f"10.244.{digest % 250}.{digest // 250 % 250 + 2}"
    conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    containers = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "restartCount": 0,
                   "started": True, "containerID": f"lab://{uid}/{c['name']}",
                   "state": {"running": {"startedAt": now}}}
                  for c in (pod.get("spec") or {}).get("containers") or []]
    return {"phase": "Running", "conditions": conditions, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": now, "containerStatuses": containers,
            "qosClass": (pod.get("status") or {}).get("qosClass", "BestEffort")}


class Controllers:
    def __init__(self, api: Api, resync_seconds: float = 5.0, kubelet: bool = True,
                 orphan_quarantine: float = ORPHAN_QUARANTINE_SECONDS) -> None:
        self.orphan_quarantine = orphan_quarantine
        self.api = api
        self.kubelet = kubelet  # off when another process plays the kubelet (sets pod status itself)
        self.orphaned_since: dict[str, float] = {}  # pod uid -> when its node was first seen missing
        self.store = api.store
        self.resync = resync_seconds
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="lab-controllers", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.store.changed.set()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            self.store.changed.wait(self.resync)
            self.store.changed.clear()
            if self.stopping.is_set():
                return
            try:
                self.reconcile()
            except Exception:  # noqa: BLE001 - a controller keeps running; the log says what failed
                traceback.print_exc()
            self.stopping.wait(0.1)

    # ------------------------------------------------------------------ one pass

    def reconcile(self) -> None:
        pods_rt, nodes_rt = by_kind("Pod"), by_kind("Node")
        nodes, _rev = self.store.list(nodes_rt, None)
        pods, _rev = self.store.list(pods_rt, None)
        by_node: dict[str, int] = {}
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name:
                by_node[node_name] = by_node.get(node_name, 0) + 1
        node_index = {n["metadata"]["name"]: n for n in nodes}
        owners: dict[str, dict[str, Any]] = {}
        for kind in (*WORKLOADS, "Job"):
            items, _rev = self.store.list(by_kind(kind), None)
            for item in items:
                owners[item["metadata"]["uid"]] = item
        now = time.monotonic()
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name and node_name not in node_index:
                first = self.orphaned_since.setdefault(pod["metadata"]["uid"], now)
                if now - first >= self.orphan_quarantine:
                    self._delete_pod(pod)  # pod GC: its node is gone (the owner makes a new one elsewhere)
                    continue
            else:
                self.orphaned_since.pop(pod["metadata"]["uid"], None)
        for pod in pods:
            meta = pod["metadata"]
            owner = controller_of(pod)
            if owner and owner.get("kind") in (*WORKLOADS, "Job") and owner.get("uid") not in owners:
                self._delete_pod(pod)
                continue
            spec = pod.get("spec") or {}
            if meta.get("deletionTimestamp"):
                continue
            if not spec.get("nodeName") and spec.get("schedulerName", "default-scheduler") == "default-scheduler":
                node = self._pick_node(nodes, spec, by_node)
                if node is not None:
                    self._bind(pod, node)
                    by_node[node] = by_node.get(node, 0) + 1
                continue
            # The kubelet of that node starts the pod; a pod bound to a Node that does not exist stays Pending.
            if self.kubelet and spec.get("nodeName") in node_index and (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                self._run(pod, node_index[spec["nodeName"]])
        for uid, owner in owners.items():
            owned = [p for p in pods if (controller_of(p) or {}).get("uid") == uid
                     and not p["metadata"].get("deletionTimestamp")]
            kind = owner["kind"]
            try:
                if kind == "Deployment":
                    self._deployment(owner, owned, nodes, by_node)
                elif kind == "DaemonSet":
                    self._daemonset(owner, owned, nodes)
                elif kind == "StatefulSet":
                    self._statefulset(owner, owned, nodes, by_node)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise

    # ------------------------------------------------------------------ pods

    @staticmethod
    def _pick_node(nodes: list[dict[str, Any]], spec: dict[str, Any], by_node: dict[str, int]) -> str | None:
        candidates = [n["metadata"]["name"] for n in nodes if fits(n, spec) and not n["metadata"].get("deletionTimestamp")]
        if not candidates:
            return None
        return min(candidates, key=lambda n: (by_node.get(n, 0), n))

    def _bind(self, pod: dict[str, Any], node: str) -> None:
        def mutate(current: dict[str, Any]) -> dict[str, Any] | None:
            if current.get("spec", {}).get("nodeName"):
                return None
            current["spec"]["nodeName"] = node
            return current

        self._update_pod(pod, mutate)

    def _run(self, pod: dict[str, Any], node: dict[str, Any]) -> None:
        def mutate(current: dict[str, Any]) -> dict[str, Any] | None:
            if (current.get("status") or {}).get("phase", "Pending") != "Pending" or current["metadata"].get("deletionTimestamp"):
                return None
            current["status"] = running_status(current, node)
            return current

        self._update_pod(pod, mutate)

    def _update_pod(self, pod: dict[str, Any], mutate: Any) -> None:
        try:
            self.store.update(by_kind("Pod"), pod["metadata"]["namespace"], pod["metadata"]["name"], mutate)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _delete_pod(self, pod: dict[str, Any]) -> None:
        try:
            self.api.delete(by_kind("Pod"), pod["metadata"]["namespace"], pod["metadata"]["name"], None)
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _new_pod(self, owner: dict[str, Any], hash_label: str, hash_value: str, name: str | None,
                 generate: str | None, node: str | None, extra_labels: dict[str, str] | None = None,
                 tolerations: list[dict[str, Any]] | None = None) -> None:
        template = copy.deepcopy(owner["spec"]["template"])
        meta = template.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), hash_label: hash_value, **(extra_labels or {})}
        spec = template.get("spec") or {}
        if node:
            spec["nodeName"] = node
        if tolerations:
            spec["tolerations"] = [*(spec.get("tolerations") or []),
                                   *[t for t in tolerations if t not in (spec.get("tolerations") or [])]]
        pod_meta: dict[str, Any] = {"namespace": owner["metadata"]["namespace"], "labels": labels,
                                    "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                                         "name": owner["metadata"]["name"],
                                                         "uid": owner["metadata"]["uid"], "controller": True,
                                                         "blockOwnerDeletion": True}]}
        if meta.get("annotations"):
            pod_meta["annotations"] = meta["annotations"]
        if name:
            pod_meta["name"] = name
        else:
            pod_meta["generateName"] = generate
        try:
            self.api.create(by_kind("Pod"), owner["metadata"]["namespace"],
                            {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    def _write_status(self, owner: dict[str, Any], status: dict[str, Any]) -> None:
        rt = by_kind(owner["kind"])

        def mutate(current: dict[str, Any]) -> dict[str, Any] | None:
            old = current.get("status") or {}
            merged = {**old, **status}
            # Keep a condition's transition time while its status stays.
            conditions = []
            for condition in status.get("conditions") or []:
                before = next((c for c in old.get("conditions") or [] if c.get("type") == condition["type"]), None)
                if before and before.get("status") == condition["status"] and before.get("reason") == condition.get("reason"):
                    condition = before
                conditions.append(condition)
            if conditions:
                merged["conditions"] = conditions
            if merged == old:
                return None
            current["status"] = merged
            return current

        self.store.update(rt, owner["metadata"]["namespace"], owner["metadata"]["name"], mutate)

    # ------------------------------------------------------------------ workloads

    def _deployment(self, deploy: dict[str, Any], owned: list[dict[str, Any]], nodes: list[dict[str, Any]],
                    by_node: dict[str, int]) -> None:
        spec = deploy["spec"]
        wanted = int(spec.get("replicas", 1))
        current_hash = template_hash(spec["template"])
        current = [p for p in owned if p["metadata"].get("labels", {}).get("pod-template-hash") == current_hash]
        for pod in owned:
            if pod not in current:
                self._delete_pod(pod)
        for pod in sorted(current, key=lambda p: p["metadata"]["creationTimestamp"], reverse=True)[:max(0, len(current) - wanted)]:
            self._delete_pod(pod)
            current.remove(pod)
        name = deploy["metadata"]["name"]
        for _missing in range(wanted - len(current)):
            node = self._pick_node(nodes, spec["template"].get("spec") or {}, by_node)
            if node:
                by_node[node] = by_node.get(node, 0) + 1
            self._new_pod(deploy, "pod-template-hash", current_hash, None, f"{name}-{current_hash}-", node)
        ready = sum(1 for p in current if is_ready(p))
        now = now_rfc3339()
        available = ready >= wanted
        progressing_reason = "NewReplicaSetAvailable" if available and len(current) == wanted else "ReplicaSetUpdated"
        status = {"observedGeneration": deploy["metadata"].get("generation", 1), "replicas": len(current),
                  "updatedReplicas": len(current), "readyReplicas": ready, "availableReplicas": ready,
                  "unavailableReplicas": max(0, wanted - ready),
                  "conditions": [
                      {"type": "Available", "status": "True" if available else "False",
                       "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                       "message": "Deployment has minimum availability." if available else
                       "Deployment does not have minimum availability.", "lastUpdateTime": now,
                       "lastTransitionTime": now},
                      {"type": "Progressing", "status": "True", "reason": progressing_reason,
                       "message": f'ReplicaSet "{name}-{current_hash}" ' + (
                           "has successfully progressed." if progressing_reason == "NewReplicaSetAvailable"
                           else "is progressing."), "lastUpdateTime": now, "lastTransitionTime": now}]}
        self._write_status(deploy, status)

    def _daemonset(self, ds: dict[str, Any], owned: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        spec = ds["spec"]
        pod_spec = dict(spec["template"].get("spec") or {})
        pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or []), *DAEMON_TOLERATIONS]
        eligible = {n["metadata"]["name"] for n in nodes if fits(n, pod_spec)}
        current_hash = template_hash(spec["template"])
        on_node: dict[str, list[dict[str, Any]]] = {}
        for pod in owned:
            on_node.setdefault((pod.get("spec") or {}).get("nodeName") or "", []).append(pod)
        # Pods on nodes the DaemonSet no longer fits go in this pass (so numberMisscheduled stays 0).
        for node_name, node_pods in on_node.items():
            if node_name not in eligible:
                for pod in node_pods:
                    self._delete_pod(pod)
        updated = ready = scheduled = 0
        for node_name in sorted(eligible):
            node_pods = on_node.get(node_name, [])
            good = [p for p in node_pods if p["metadata"].get("labels", {}).get("controller-revision-hash") == current_hash]
            for pod in node_pods:
                if pod not in good[:1]:
                    self._delete_pod(pod)
            if not good:
                self._new_pod(ds, "controller-revision-hash", current_hash, None, f"{ds['metadata']['name']}-",
                              node_name, tolerations=DAEMON_TOLERATIONS)
                if node_pods:
                    scheduled += 1
                continue
            scheduled += 1
            updated += 1
            ready += 1 if is_ready(good[0]) else 0
        self._write_status(ds, {
            "observedGeneration": ds["metadata"].get("generation", 1), "desiredNumberScheduled": len(eligible),
            "currentNumberScheduled": scheduled, "updatedNumberScheduled": updated, "numberReady": ready,
            "numberAvailable": ready, "numberUnavailable": max(0, len(eligible) - ready), "numberMisscheduled": 0})

    def _statefulset(self, sts: dict[str, Any], owned: list[dict[str, Any]], nodes: list[dict[str, Any]],
                     by_node: dict[str, int]) -> None:
        spec = sts["spec"]
        name = sts["metadata"]["name"]
        wanted = int(spec.get("replicas", 1))
        revision = f"{name}-{template_hash(spec['template'])}"
        by_name = {p["metadata"]["name"]: p for p in owned}
        for owned_pod in owned:
            suffix = owned_pod["metadata"]["name"].rsplit("-", 1)[-1]
            if not suffix.isdigit() or int(suffix) >= wanted:
                self._delete_pod(owned_pod)
        updated = ready = existing = 0
        for ordinal in range(wanted):
            pod_name = f"{name}-{ordinal}"
            pod = by_name.get(pod_name)
            if pod is not None and pod["metadata"].get("labels", {}).get("controller-revision-hash") != revision:
                self._delete_pod(pod)  # recreated under the same name on the next pass
                continue
            if pod is None:
                template_spec = dict(spec["template"].get("spec") or {})
                node = self._pick_node(nodes, template_spec, by_node)
                if node:
                    by_node[node] = by_node.get(node, 0) + 1
                self._new_pod(sts, "controller-revision-hash", revision, pod_name, None, node,
                              {"statefulset.kubernetes.io/pod-name": pod_name,
                               "apps.kubernetes.io/pod-index": str(ordinal)})
                continue
            existing += 1
            updated += 1
            ready += 1 if is_ready(pod) else 0
        status: dict[str, Any] = {"observedGeneration": sts["metadata"].get("generation", 1), "replicas": existing,
                                  "readyReplicas": ready, "currentReplicas": updated, "updatedReplicas": updated,
                                  "availableReplicas": ready, "updateRevision": revision,
                                  "collisionCount": 0}
        old_current = (sts.get("status") or {}).get("currentRevision")
        status["currentRevision"] = revision if updated == wanted or not old_current else old_current
        self._write_status(sts, status)
