"""The API verbs on top of the store: create, get, list, replace, patch, delete, status, eviction, scale,
with kube-apiserver's metadata rules (uid, creationTimestamp, generation, resourceVersion preconditions)."""

from __future__ import annotations

import copy
import ipaddress
import json
import random
import uuid
from typing import Any

from . import patch as patching
from .resources import RESOURCES, Invalid, ResourceType, apply_defaults, by_kind, initial_status, validate
from .selectors import (SelectorError, fields_match, labels_match, parse_field_selector,
                        parse_label_selector)
from .store import STALE, ApiError, Store, conflict, not_found, qualified

RETURNS_DELETED = {"Pod", "Service", "ServiceAccount", "PersistentVolume", "PersistentVolumeClaim", "StorageClass",
                   "VolumeAttachment", "Namespace"}
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(rt: ResourceType, name: str, exc: Invalid) -> ApiError:
    return ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: {exc}', {
        "name": name, "group": rt.group, "kind": rt.kind,
        "causes": [{"reason": r, "message": m, "field": f} for r, f, m in exc.causes]})


class Api:
    def __init__(self, store: Store) -> None:
        self.store = store

    # ------------------------------------------------------------------ helpers

    def _check_namespace(self, rt: ResourceType, namespace: str | None) -> None:
        """NamespaceLifecycle's one rule that clients rely on: no objects in a namespace that does not exist."""
        if rt.namespaced and namespace:
            try:
                ns = self.store.get(by_kind("Namespace"), None, namespace)
            except ApiError as exc:
                if exc.code == 404:
                    raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                                   {"name": namespace, "kind": "namespaces"}) from exc
                raise
            if ns["metadata"].get("deletionTimestamp"):
                raise ApiError(403, "Forbidden", f'{rt.singular} in namespace {namespace} is forbidden: unable to '
                               f"create new content in namespace {namespace} because it is being terminated")

    def _typed(self, rt: ResourceType, body: Any, namespace: str | None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if kind and kind != rt.kind or api_version and api_version != rt.group_version:
            raise bad_request(f"the API version in the data ({api_version}) and kind ({kind}) do not match the "
                              f"endpoint ({rt.group_version}, {rt.kind})")
        obj = copy.deepcopy(body)
        obj["kind"], obj["apiVersion"] = rt.kind, rt.group_version
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the "
                                  "request")
            meta["namespace"] = namespace or meta.get("namespace")
        else:
            meta.pop("namespace", None)
        return obj

    def _allocate_service(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        spec = obj.setdefault("spec", {})
        if spec.get("type") == "ExternalName":
            return
        services, _rev = self.store.list(by_kind("Service"), None)
        used_ips = {s.get("spec", {}).get("clusterIP") for s in services}
        used_ports = {p.get("nodePort") for s in services for p in s.get("spec", {}).get("ports") or []}
        old_spec = (old or {}).get("spec", {})
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_spec.get("clusterIP") or ""
        if not spec["clusterIP"]:
            while True:
                candidate = str(SERVICE_CIDR[random.randrange(10, SERVICE_CIDR.num_addresses - 1)])  # noqa: S311
                if candidate not in used_ips:
                    spec["clusterIP"] = candidate
                    break
        if spec["clusterIP"] != "None":
            spec["clusterIPs"] = [spec["clusterIP"]]
        old_ports = {(p.get("port"), p.get("protocol", "TCP")): p.get("nodePort")
                     for p in old_spec.get("ports") or []}
        for port in spec.get("ports") or []:
            if spec.get("type") in ("NodePort", "LoadBalancer") and not port.get("nodePort"):
                kept = old_ports.get((port.get("port"), port.get("protocol", "TCP")))
                if kept:
                    port["nodePort"] = kept
                    continue
                free = [p for p in NODE_PORTS if p not in used_ports]
                if not free:
                    raise ApiError(422, "Invalid", "no node ports left in 30000-32767")
                port["nodePort"] = random.choice(free)  # noqa: S311
                used_ports.add(port["nodePort"])

    # ------------------------------------------------------------------ read

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        return self.store.get(rt, namespace, name)

    def list(self, rt: ResourceType, namespace: str | None, label_selector: str | None = None,
             field_selector: str | None = None) -> dict[str, Any]:
        labels, fields = self.selectors(rt, label_selector, field_selector)
        items, revision = self.store.list(rt, namespace)
        matched = [o for o in items if self.matches(rt, o, labels, fields)]
        return {"kind": f"{rt.kind}List", "apiVersion": rt.group_version,
                "metadata": {"resourceVersion": str(revision)}, "items": matched}

    @staticmethod
    def selectors(rt: ResourceType, label_selector: str | None, field_selector: str | None) -> tuple[Any, Any]:
        try:
            return parse_label_selector(label_selector), parse_field_selector(field_selector, rt.kind)
        except SelectorError as exc:
            raise bad_request(str(exc)) from exc

    @staticmethod
    def matches(rt: ResourceType, obj: dict[str, Any], labels: Any, fields: Any) -> bool:
        return labels_match(labels, obj.get("metadata", {}).get("labels")) and fields_match(fields, obj, rt.kind)

    # ------------------------------------------------------------------ write

    def create(self, rt: ResourceType, namespace: str | None, body: Any, dry_run: bool = False) -> dict[str, Any]:
        obj = self._typed(rt, body, namespace)
        meta = obj["metadata"]
        for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation", "selfLink",
                      "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        if rt.namespaced and not meta.get("namespace"):
            raise bad_request("the namespace of the object is required")
        self._check_namespace(rt, meta.get("namespace"))
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            probe = copy.deepcopy(obj)
            probe["metadata"]["name"] = meta["generateName"] + "xxxxx"
            try:
                validate(rt, probe)
            except Invalid as exc:
                raise invalid(rt, meta["generateName"], exc) from exc
        else:
            try:
                validate(rt, obj)
            except Invalid as exc:
                raise invalid(rt, name, exc) from exc
        meta["uid"] = str(uuid.uuid4())  # before the defaults: a Job's selector is built from it
        apply_defaults(rt, obj)
        if rt.generation:
            meta["generation"] = 1
        status = initial_status(rt, obj)
        if status is not None:
            obj["status"] = status
        if rt.kind == "Service":
            self._allocate_service(obj, None)
        return self.store.create(rt, obj, dry_run)

    def _precondition_rv(self, rt: ResourceType, name: str, wanted: str | None, current: dict[str, Any]) -> None:
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise conflict(rt, name, STALE)

    def _finish_update(self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any], status_only: bool) -> dict[str, Any]:
        """kube-apiserver's update strategy: identity fields kept, status or spec taken from the right side,
        generation bumped when the spec changes."""
        meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
        if status_only:
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            return result
        for field in ("uid", "creationTimestamp", "namespace", "generation", "deletionTimestamp",
                      "deletionGracePeriodSeconds"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["name"] = old_meta["name"]
        if rt.has_status:
            # A main-resource write never changes status (a Node may carry one only when it is created).
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        apply_defaults(rt, new)
        if rt.kind == "Service":
            self._allocate_service(new, old)
        try:
            validate(rt, new)
        except Invalid as exc:
            raise invalid(rt, old_meta["name"], exc) from exc
        if rt.generation:
            spec_changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
                k: v for k, v in old.items() if k not in ("metadata", "status")}
            meta["generation"] = int(old_meta.get("generation", 1)) + (1 if spec_changed else 0)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise ApiError(422, "Invalid", f"{rt.kind} \"{old_meta['name']}\" is invalid: metadata.finalizers: "
                               f"Forbidden: no new finalizers can be added if the object is being deleted, found "
                               f"new finalizers {sorted(added)}")
        return new

    def replace(self, rt: ResourceType, namespace: str | None, name: str, body: Any, subresource: str = "",
                dry_run: bool = False) -> dict[str, Any]:
        new = self._typed(rt, body, namespace)
        body_name = new["metadata"].get("name")
        if body_name and body_name != name:
            raise bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({name})")
        wanted_rv = new["metadata"].get("resourceVersion")
        wanted_uid = new["metadata"].get("uid")

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            self._precondition_rv(rt, name, wanted_rv, current)
            if wanted_uid and wanted_uid != current["metadata"]["uid"]:
                raise conflict(rt, name, f"Precondition failed: UID in precondition: {wanted_uid}, UID in object "
                               f"meta: {current['metadata']['uid']}")
            candidate = copy.deepcopy(new)
            candidate["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self._finish_update(rt, current, candidate, subresource == "status")

        if rt.kind == "Endpoints":
            try:
                return self.store.update(rt, namespace, name, mutate, dry_run)
            except ApiError as exc:
                if exc.code != 404:
                    raise
                return self.create(rt, namespace, body, dry_run)  # Endpoints allow create on update
        return self.store.update(rt, namespace, name, mutate, dry_run)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, content_type: str, body: bytes,
              subresource: str = "", dry_run: bool = False) -> dict[str, Any]:
        kind = content_type.split(";")[0].strip()
        try:
            patch_doc = json.loads(body or b"null")
        except ValueError as exc:
            raise bad_request(f"the patch is not valid JSON: {exc}") from exc
        if kind == "application/apply-patch+yaml":
            raise ApiError(415, "UnsupportedMediaType", "server-side apply is not supported by the lab API server; "
                           "use a client-side apply (kubectl apply without --server-side) or a merge patch")
        if kind not in ("application/json-patch+json", "application/merge-patch+json",
                        "application/strategic-merge-patch+json"):
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                           "accepted media types include: application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml, application/strategic-merge-patch+json")

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            patched = apply_patch(kind, current, patch_doc)
            if not isinstance(patched, dict):
                raise ApiError(422, "Invalid", "the patched object is not a JSON object")
            wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
            self._precondition_rv(rt, name, wanted_rv, current)
            if patched.get("kind", rt.kind) != rt.kind or patched.get("apiVersion", rt.group_version) != rt.group_version:
                raise bad_request("a patch cannot change kind or apiVersion")
            patched["kind"], patched["apiVersion"] = rt.kind, rt.group_version
            patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self._finish_update(rt, current, patched, subresource == "status")

        return self.store.update(rt, namespace, name, mutate, dry_run)

    def delete(self, rt: ResourceType, namespace: str | None, name: str, options: Any,
               dry_run: bool = False) -> dict[str, Any]:
        preconditions = (options or {}).get("preconditions") or {} if isinstance(options, dict) else {}

        def check(current: dict[str, Any]) -> None:
            if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise conflict(rt, name, f"Precondition failed: ResourceVersion in precondition: "
                               f"{preconditions['resourceVersion']}, ResourceVersion in object meta: "
                               f"{current['metadata']['resourceVersion']}")
            if preconditions.get("uid") and preconditions["uid"] != current["metadata"]["uid"]:
                raise conflict(rt, name, f"Precondition failed: UID in precondition: {preconditions['uid']}, UID "
                               f"in object meta: {current['metadata']['uid']}")

        if rt.kind == "Namespace" and not dry_run:
            # No namespace controller: the namespace's content goes with it, at once - once the preconditions
            # hold (a refused delete must leave the content alone).
            check(self.store.get(rt, namespace, name))
            for member in RESOURCES:
                if member.namespaced:
                    items, _rev = self.store.list(member, name)
                    for item in items:
                        try:
                            self.store.delete(member, name, item["metadata"]["name"])
                        except ApiError as exc:
                            if exc.code != 404:
                                raise
        obj, gone = self.store.delete(rt, namespace, name, check, dry_run)
        # kube-apiserver answers with the deleted object for the kinds whose storage sets ReturnDeletedObject
        # (the client's models expect it), with a Status for the rest.
        if not gone or rt.kind in RETURNS_DELETED:
            return obj
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": obj["metadata"]["uid"]}}

    def delete_collection(self, rt: ResourceType, namespace: str | None, label_selector: str | None,
                          field_selector: str | None, dry_run: bool = False) -> dict[str, Any]:
        listing = self.list(rt, namespace, label_selector, field_selector)
        for item in listing["items"]:
            try:
                self.store.delete(rt, item["metadata"].get("namespace"), item["metadata"]["name"], None, dry_run)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return listing

    # ------------------------------------------------------------------ subresources

    def evict(self, namespace: str, name: str, body: Any, dry_run: bool = False) -> dict[str, Any]:
        """pods/eviction: the pod is deleted. PodDisruptionBudgets are not checked (the lab serves none), so
        the API never answers 429 here."""
        pods = by_kind("Pod")
        if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
            raise bad_request("the body of pods/eviction must be an Eviction")
        if (body.get("metadata") or {}).get("name") not in (None, name):
            raise bad_request("name in URL does not match name in Eviction object")
        self.delete(pods, namespace, name, body.get("deleteOptions") or {}, dry_run)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def scale(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(rt, namespace, name)
        selector = obj.get("spec", {}).get("selector", {}).get("matchLabels", {})
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": name, "namespace": namespace, "uid": obj["metadata"]["uid"],
                             "resourceVersion": obj["metadata"]["resourceVersion"],
                             "creationTimestamp": obj["metadata"]["creationTimestamp"]},
                "spec": {"replicas": obj.get("spec", {}).get("replicas", 1)},
                "status": {"replicas": obj.get("status", {}).get("replicas", 0),
                           "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))}}

    def set_scale(self, rt: ResourceType, namespace: str, name: str, content_type: str | None, body: bytes) -> dict[str, Any]:
        current = self.scale(rt, namespace, name)
        if content_type is None:
            new = json.loads(body)
        else:
            new = dict(apply_patch(content_type.split(";")[0].strip(), current, json.loads(body)))
        replicas = (new.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, "Invalid", f'Scale "{name}" is invalid: spec.replicas: must be >= 0')
        wanted = (new.get("metadata") or {}).get("resourceVersion")
        if wanted and content_type is None and wanted != current["metadata"]["resourceVersion"]:
            raise conflict(rt, name, STALE)
        self.patch(rt, namespace, name, "application/merge-patch+json",
                   json.dumps({"spec": {"replicas": replicas}}).encode())
        return self.scale(rt, namespace, name)


def apply_patch(kind: str, doc: dict[str, Any], patch_doc: Any) -> Any:
    """``doc`` patched by ``patch_doc`` of media type ``kind`` (JSON, merge or strategic merge), or a 422."""
    try:
        if kind == "application/json-patch+json":
            return patching.json_patch(doc, patch_doc)
        if kind == "application/merge-patch+json":
            return patching.merge_patch(doc, patch_doc)
        return patching.strategic_merge_patch(doc, patch_doc)
    except patching.PatchTestFailed as exc:
        raise ApiError(422, "Invalid", str(exc)) from exc
    except patching.PatchError as exc:
        raise ApiError(422, "Invalid", f"the patch does not apply: {exc}") from exc


__all__ = ["Api", "ApiError", "not_found", "qualified"]
