"""Label and field selectors, as the Kubernetes API parses them (pure functions)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping


class SelectorError(ValueError):
    """The selector does not parse (the API answers 400 BadRequest)."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # =, !=, in, notin, exists, !exists
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        # != and notin also match objects without the label, like Kubernetes.
        return self.key not in labels or labels[self.key] not in self.values


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(\s*([^)]*)\)\s*")
_EQ = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*")


def _split_top(selector: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def parse_label_selector(selector: str | None) -> list[Requirement]:
    if not selector or not selector.strip():
        return []
    requirements = []
    for part in _split_top(selector):
        if not part.strip():
            raise SelectorError(f"unable to parse requirement: empty term in {selector!r}")
        if match := _SET.match(part):
            if part[match.end():].strip():
                raise SelectorError(f"unable to parse requirement: {part!r}")
            values = tuple(v.strip() for v in match.group(3).split(",") if v.strip())
            for value in values:
                if not re.fullmatch(_VALUE, value):
                    raise SelectorError(f"invalid label value {value!r}")
            if not values:
                raise SelectorError(f"for 'in', 'notin' operators, values set can't be empty: {part!r}")
            requirements.append(Requirement(match.group(1), match.group(2), values))
        elif match := _EQ.match(part):
            if part[match.end():].strip():
                raise SelectorError(f"unable to parse requirement: {part!r}")
            op = "!=" if match.group(2) == "!=" else "="
            requirements.append(Requirement(match.group(1), op, (match.group(3),)))
        elif (match := _EXISTS.match(part)) and not part[match.end():].strip():
            requirements.append(Requirement(match.group(2), "!exists" if match.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {part!r}")
    return requirements


def labels_match(requirements: list[Requirement], labels: Mapping[str, str] | None) -> bool:
    return all(r.matches(labels or {}) for r in requirements)


def selector_from_label_selector(spec: Mapping[str, Any] | None) -> list[Requirement]:
    """A metav1.LabelSelector (matchLabels + matchExpressions) as requirements."""
    if not spec:
        return []
    requirements = [Requirement(k, "=", (str(v),)) for k, v in sorted((spec.get("matchLabels") or {}).items())]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expression in spec.get("matchExpressions") or []:
        requirements.append(Requirement(expression["key"], ops[expression["operator"]],
                                        tuple(expression.get("values") or ())))
    return requirements


# ------------------------------------------------------------------ field selectors

def _path(*keys: str) -> Callable[[Mapping[str, Any]], str]:
    def get(obj: Mapping[str, Any]) -> str:
        current: Any = obj
        for key in keys:
            current = current.get(key) if isinstance(current, Mapping) else None
        if current is None:
            return ""
        if isinstance(current, bool):
            return "true" if current else "false"
        return str(current)

    return get


# Fields every kind supports, plus the per-kind ones kube-apiserver registers (the ones clients use).
COMMON_FIELDS = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}
KIND_FIELDS: dict[str, dict[str, Callable[[Mapping[str, Any]], str]]] = {
    "Pod": {"spec.nodeName": _path("spec", "nodeName"), "spec.restartPolicy": _path("spec", "restartPolicy"),
            "spec.schedulerName": _path("spec", "schedulerName"),
            "spec.serviceAccountName": _path("spec", "serviceAccountName"),
            "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
            "status.phase": _path("status", "phase"), "status.podIP": _path("status", "podIP"),
            "status.nominatedNodeName": _path("status", "nominatedNodeName")},
    "Node": {"spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false"},
    "Namespace": {"status.phase": _path("status", "phase")},
    "Secret": {"type": _path("type")},
    "Event": {"involvedObject.kind": _path("involvedObject", "kind"),
              "involvedObject.name": _path("involvedObject", "name"),
              "involvedObject.namespace": _path("involvedObject", "namespace"),
              "involvedObject.uid": _path("involvedObject", "uid"), "reason": _path("reason"),
              "type": _path("type"), "source": _path("source", "component")},
    "PersistentVolumeClaim": {"status.phase": _path("status", "phase")},
    "PersistentVolume": {"status.phase": _path("status", "phase")},
    "Job": {"status.successful": _path("status", "succeeded")},
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # = or !=
    value: str


def parse_field_selector(selector: str | None, kind: str) -> list[FieldRequirement]:
    if not selector or not selector.strip():
        return []
    supported = {**COMMON_FIELDS, **KIND_FIELDS.get(kind, {})}
    requirements = []
    for part in selector.split(","):
        match = re.fullmatch(r"\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*", part)
        if not match:
            raise SelectorError(f"invalid selector: {part!r}; can't understand {part!r}")
        field = match.group(1)
        if field not in supported:
            raise SelectorError(f'field label not supported: {field}')
        requirements.append(FieldRequirement(field, "!=" if match.group(2) == "!=" else "=", match.group(3)))
    return requirements


def fields_match(requirements: list[FieldRequirement], obj: Mapping[str, Any], kind: str) -> bool:
    supported = {**COMMON_FIELDS, **KIND_FIELDS.get(kind, {})}
    for requirement in requirements:
        actual = supported[requirement.field](obj)
        if (actual == requirement.value) != (requirement.op == "="):
            return False
    return True
