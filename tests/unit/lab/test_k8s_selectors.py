"""Label and field selectors of the lab Kubernetes API server (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest

from lab.k8s.selectors import (Requirement, SelectorError, fields_match, labels_match, parse_field_selector,
                               parse_label_selector, selector_from_label_selector)

LABELS = {"app": "web", "tier": "frontend", "env": "prod"}


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ("", LABELS, True),
    ("app=web", LABELS, True),
    ("app==web", LABELS, True),
    ("app=db", LABELS, False),
    ("app!=db", LABELS, True),
    ("app!=web", LABELS, False),
    ("missing!=x", LABELS, True),  # != matches objects without the label, as in Kubernetes
    ("env in (prod, staging)", LABELS, True),
    ("env in (dev)", LABELS, False),
    ("env notin (dev,qa)", LABELS, True),
    ("missing notin (x)", LABELS, True),
    ("app", LABELS, True),
    ("!app", LABELS, False),
    ("! missing", LABELS, True),
    ("app=web,tier in (frontend),!missing", LABELS, True),
    ("app=web,tier=backend", LABELS, False),
    ("example.com/role=edge", {"example.com/role": "edge"}, True),
    ("app=", {"app": ""}, True),
    ("app=", LABELS, False),
])
def test_label_selector(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert labels_match(parse_label_selector(selector), labels) is expected


@pytest.mark.parametrize("selector", ["app in (", "app in ()", "=web", "app=web,", "app=web=x", "a b", "app in (a b)"])
def test_label_selector_errors(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(selector)


def test_parsed_requirements() -> None:
    assert parse_label_selector("a in (x, y),b!=z,!c") == [
        Requirement("a", "in", ("x", "y")), Requirement("b", "!=", ("z",)), Requirement("c", "!exists")]


def test_label_selector_object() -> None:
    spec = {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod"]}, {"key": "canary", "operator": "DoesNotExist"}]}
    requirements = selector_from_label_selector(spec)
    assert labels_match(requirements, LABELS)
    assert not labels_match(requirements, {**LABELS, "canary": "1"})
    assert selector_from_label_selector(None) == []


POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"},
                       "status": {"phase": "Running"}}


@pytest.mark.parametrize(("selector", "kind", "expected"), [
    ("metadata.name=p", "Pod", True),
    ("metadata.name!=p", "Pod", False),
    ("metadata.namespace=ns,spec.nodeName=n1", "Pod", True),
    ("spec.nodeName==n2", "Pod", False),
    ("status.phase=Running", "Pod", True),
    ("status.phase!=Pending", "Pod", True),
    ("spec.nodeName=", "Pod", False),
])
def test_field_selector(selector: str, kind: str, expected: bool) -> None:
    assert fields_match(parse_field_selector(selector, kind), POD, kind) is expected


def test_field_selector_unknown_field() -> None:
    with pytest.raises(SelectorError, match="field label not supported: spec.nodeName"):
        parse_field_selector("spec.nodeName=x", "ConfigMap")
    assert fields_match(parse_field_selector("spec.unschedulable=true", "Node"),
                        {"metadata": {}, "spec": {"unschedulable": True}}, "Node")
