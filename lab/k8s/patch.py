"""The three patch types of the Kubernetes API (pure functions on JSON data).

- JSON patch (RFC 6902, ``application/json-patch+json``),
- JSON merge patch (RFC 7386, ``application/merge-patch+json``),
- strategic merge patch (``application/strategic-merge-patch+json``): like a merge patch, except that the
  lists Kubernetes marks ``patchStrategy: merge`` are merged item by item on their merge key, and the
  ``$patch``, ``$retainKeys``, ``$setElementOrder/...`` and ``$deleteFromPrimitiveList/...`` directives.
  kube-apiserver reads the merge keys from the Go types; this server keys them by field name (the table
  below), which gives the same answer for the kinds it serves.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch does not apply (the API answers 422, or 409 for a failed JSON-patch ``test``)."""


class PatchTestFailed(PatchError):
    pass


# ------------------------------------------------------------------ JSON patch

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit():
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchError(f"array index {index} out of range")
    return index


def _walk(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        if isinstance(doc, dict):
            if token not in doc:
                raise PatchError(f"path component {token!r} does not exist")
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, False)]
        else:
            raise PatchError(f"cannot descend into a scalar at {token!r}")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind, tokens = op["op"], _pointer(op["path"])

        def add(target_tokens: list[str], value: Any) -> None:
            nonlocal doc
            if not target_tokens:
                doc = value
                return
            parent = _walk(doc, target_tokens[:-1])
            last = target_tokens[-1]
            if isinstance(parent, dict):
                parent[last] = value
            elif isinstance(parent, list):
                parent.insert(_index(parent, last, True), value)
            else:
                raise PatchError(f"cannot add to a scalar at {op['path']!r}")

        def remove(target_tokens: list[str]) -> Any:
            if not target_tokens:
                raise PatchError("cannot remove the whole document")
            parent = _walk(doc, target_tokens[:-1])
            last = target_tokens[-1]
            if isinstance(parent, dict):
                if last not in parent:
                    raise PatchError(f"unable to remove nonexistent key {last!r}")
                return parent.pop(last)
            if isinstance(parent, list):
                return parent.pop(_index(parent, last, False))
            raise PatchError(f"cannot remove from a scalar at {op['path']!r}")

        if kind == "add":
            add(tokens, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            remove(tokens)
        elif kind == "replace":
            _walk(doc, tokens)  # must exist
            if tokens:
                remove(tokens)
            add(tokens, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, source))
            if kind == "move":
                remove(source)
            add(tokens, value)
        elif kind == "test":
            if _walk(doc, tokens) != op.get("value"):
                raise PatchTestFailed(f"testing value {op['path']} failed")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc


# ------------------------------------------------------------------ merge patch

def merge_patch(doc: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ------------------------------------------------------------------ strategic merge patch

# Lists Kubernetes merges item by item (patchStrategy: merge), by field name -> merge key.
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath", "imagePullSecrets": "name",
    "hostAliases": "ip", "conditions": "type", "addresses": "type", "ownerReferences": "uid",
    "readinessGates": "conditionType", "resourceClaims": "name", "schedulingGates": "name",
}
# Lists of scalars merged as sets (patchStrategy: merge on a []string).
PRIMITIVE_MERGE = {"finalizers"}


def merge_key_for(field: str, *lists: Any) -> str | None:
    if field == "ports":
        # Container ports merge on containerPort, Service ports on port.
        for items in lists:
            for item in items or []:
                if isinstance(item, dict) and "containerPort" in item:
                    return "containerPort"
        return "port"
    return MERGE_KEYS.get(field)


def strategic_merge_patch(doc: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    return _smp_map(doc if isinstance(doc, dict) else {}, patch)


def _smp_map(original: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return _strip_directives(body)
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch directive {directive!r}")
    result = copy.deepcopy(original)
    retain = body.pop("$retainKeys", None)
    for key in [k for k in body if k.startswith("$setElementOrder/")]:
        body.pop(key)
    for key in [k for k in body if k.startswith("$deleteFromPrimitiveList/")]:
        field = key.split("/", 1)[1]
        remove = set(map(str, body.pop(key) or []))
        if isinstance(result.get(field), list):
            result[field] = [v for v in result[field] if str(v) not in remove]
    for key, value in body.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            existing = result.get(key)
            merged = _smp_map(existing if isinstance(existing, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _smp_list(key, result.get(key), value)
        else:
            result[key] = value
    if retain is not None:
        result = {k: v for k, v in result.items() if k in set(retain)}
    return result


def _smp_list(field: str, original: Any, patch: list[Any]) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip_directives(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    original = original if isinstance(original, list) else []
    if field in PRIMITIVE_MERGE:
        merged = list(original)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    key = merge_key_for(field, original, patch)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [_strip_directives(i) for i in patch]
    result = copy.deepcopy(original)
    for item in patch:
        if key not in item:
            raise PatchError(f"map in list {field!r} is missing its merge key {key!r}")
        position = next((n for n, o in enumerate(result) if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if position is not None:
                result.pop(position)
            continue
        if position is None:
            result.append(_strip_directives(item))
        else:
            merged = _smp_map(result[position], item)
            if merged is None:
                result.pop(position)
            else:
                result[position] = merged
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
