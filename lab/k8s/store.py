"""Objects in etcd, the way kube-apiserver keeps them: one key per object under
``<prefix>/<resource storage path>/[<namespace>/]<name>``, the value the object's JSON (kube-apiserver stores
built-in kinds as protobuf; JSON keeps the lab's etcd readable), ``metadata.resourceVersion`` = the key's
etcd mod_revision (not stored in the value), every update a compare-and-swap on that revision."""

from __future__ import annotations

import datetime
import json
import random
import threading
import uuid
from typing import Any, Callable

from .etcd import Etcd, KeyValue
from .kms import Encryption, KmsError
from .resources import ResourceType


class ApiError(Exception):
    """An error the API returns as a ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def qualified(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(rt)} "{name}" not found',
                    {"name": name, "group": rt.group, "kind": rt.plural})


def conflict(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(rt)} "{name}": {why}',
                    {"name": name, "group": rt.group, "kind": rt.plural})


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # kube-apiserver's (no vowels, no confusable digits)


def generated_name(base: str) -> str:
    base = base[:58]
    return base + "".join(random.choice(GENERATE_ALPHABET) for _position in range(5))  # noqa: S311 - names, not secrets


class Store:
    def __init__(self, etcd: Etcd, prefix: str = "/registry", encryption: Encryption | None = None) -> None:
        self.etcd = etcd
        self.prefix = prefix.rstrip("/")
        self.encryption = encryption or Encryption()
        # Set on every write this server makes: the controllers wake up on it.
        self.changed = threading.Event()

    # ------------------------------------------------------------------ keys and values

    def collection_key(self, rt: ResourceType, namespace: str | None) -> bytes:
        path = f"{self.prefix}/{rt.storage}/"
        if rt.namespaced and namespace:
            path += f"{namespace}/"
        return path.encode()

    def key(self, rt: ResourceType, namespace: str | None, name: str) -> bytes:
        if rt.namespaced:
            return f"{self.prefix}/{rt.storage}/{namespace}/{name}".encode()
        return f"{self.prefix}/{rt.storage}/{name}".encode()

    def _decode(self, rt: ResourceType, kv: KeyValue, revision: int | None = None) -> dict[str, Any]:
        try:
            raw = self.encryption.decrypt(rt.plural, kv.key, kv.value)
        except KmsError as exc:
            raise ApiError(500, "InternalError", f"Internal error occurred: {exc}",
                           {"causes": [{"message": str(exc)}]}) from exc
        obj: dict[str, Any] = json.loads(raw)
        obj.setdefault("metadata", {})["resourceVersion"] = str(revision or kv.mod_revision)
        return obj

    def decode_event(self, rt: ResourceType, kv: KeyValue, revision: int | None = None) -> dict[str, Any]:
        return self._decode(rt, kv, revision)

    def _encode(self, rt: ResourceType, key: bytes, obj: dict[str, Any]) -> bytes:
        stored = json.loads(json.dumps(obj))
        stored.get("metadata", {}).pop("resourceVersion", None)
        stored.get("metadata", {}).pop("selfLink", None)
        plain = json.dumps(stored, separators=(",", ":"), sort_keys=True).encode()
        try:
            return self.encryption.encrypt(rt.plural, key, plain)
        except KmsError as exc:
            raise ApiError(500, "InternalError", f"Internal error occurred: {exc}",
                           {"causes": [{"message": str(exc)}]}) from exc

    # ------------------------------------------------------------------ operations

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        kv, _rev = self.etcd.get(self.key(rt, namespace, name))
        if kv is None:
            raise not_found(rt, name)
        return self._decode(rt, kv)

    def list(self, rt: ResourceType, namespace: str | None) -> tuple[list[dict[str, Any]], int]:
        kvs, revision = self.etcd.range_prefix(self.collection_key(rt, namespace))
        return [self._decode(rt, kv) for kv in kvs], revision

    def create(self, rt: ResourceType, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        meta = obj["metadata"]
        generate = not meta.get("name") and meta.get("generateName")
        for _attempt in range(8 if generate else 1):
            if generate:
                meta["name"] = generated_name(meta["generateName"])
            key = self.key(rt, meta.get("namespace"), meta["name"])
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_rfc3339())
            value = self._encode(rt, key, obj)
            if dry_run:
                existing, revision = self.etcd.get(key)
                if existing is None:
                    meta["resourceVersion"] = str(revision)
                    return obj
                new_rev = None
            else:
                new_rev = self.etcd.create(key, value)
            if new_rev is not None:
                self.changed.set()
                meta["resourceVersion"] = str(new_rev)
                return obj
        raise ApiError(409, "AlreadyExists", f'{qualified(rt)} "{meta["name"]}" already exists',
                       {"name": meta["name"], "group": rt.group, "kind": rt.plural})

    def update(self, rt: ResourceType, namespace: str | None, name: str,
               mutate: Callable[[dict[str, Any]], dict[str, Any] | None], dry_run: bool = False) -> dict[str, Any]:
        """GuaranteedUpdate: read, mutate (may raise ApiError, e.g. Conflict on a stale resourceVersion; None
        means no change), compare-and-swap on the revision read, retry when someone else wrote in between."""
        key = self.key(rt, namespace, name)
        for _attempt in range(20):
            kv, _rev = self.etcd.get(key)
            if kv is None:
                raise not_found(rt, name)
            current = self._decode(rt, kv)
            updated = mutate(json.loads(json.dumps(current)))
            if updated is None or _same(updated, current):
                return current
            meta = updated["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                # The last finalizer is gone: the object goes (what the garbage collector / store does).
                if dry_run:
                    return updated
                if self.etcd.delete(key, kv.mod_revision) is not None:
                    self.changed.set()
                    return updated
                continue
            value = self._encode(rt, key, updated)
            if dry_run:
                return updated
            new_rev = self.etcd.update(key, value, kv.mod_revision)
            if new_rev is not None:
                self.changed.set()
                meta["resourceVersion"] = str(new_rev)
                return updated
        raise conflict(rt, name, STALE)

    def delete(self, rt: ResourceType, namespace: str | None, name: str,
               precondition: Callable[[dict[str, Any]], None] | None = None,
               dry_run: bool = False) -> tuple[dict[str, Any], bool]:
        """Delete (or, with finalizers, mark for deletion): the last object state and whether it is gone."""
        key = self.key(rt, namespace, name)
        for _attempt in range(20):
            kv, _rev = self.etcd.get(key)
            if kv is None:
                raise not_found(rt, name)
            current = self._decode(rt, kv)
            if precondition:
                precondition(current)
            meta = current["metadata"]
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return current, False
                meta["deletionTimestamp"] = now_rfc3339()
                meta["deletionGracePeriodSeconds"] = 0
                if dry_run:
                    return current, False
                new_rev = self.etcd.update(key, self._encode(rt, key, current), kv.mod_revision)
                if new_rev is not None:
                    self.changed.set()
                    meta["resourceVersion"] = str(new_rev)
                    return current, False
                continue
            if dry_run:
                return current, True
            new_rev = self.etcd.delete(key, kv.mod_revision)
            if new_rev is not None:
                self.changed.set()
                return current, True
        raise conflict(rt, name, STALE)


def _without_resource_version(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return _without_resource_version(a) == _without_resource_version(b)
