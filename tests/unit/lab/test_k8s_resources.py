"""Discovery data, validation, defaults, scheduling rules and printing of the lab Kubernetes API server."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from lab.k8s.controllers import fits, template_hash, tolerates
from lab.k8s.resources import Invalid, api_group_list, api_resource_list, apply_defaults, by_kind, validate
from lab.k8s.table import human_age


def test_core_discovery_has_eviction_with_its_group() -> None:
    resources = {r["name"]: r for r in api_resource_list("", "v1")["resources"]}
    assert resources["pods/eviction"]["group"] == "policy" and resources["pods/eviction"]["kind"] == "Eviction"
    assert resources["nodes"]["shortNames"] == ["no"] and not resources["nodes"]["namespaced"]
    assert api_resource_list("", "v1")["groupVersion"] == "v1"
    groups = {g["name"] for g in api_group_list()["groups"]}
    assert groups == {"apps", "batch", "storage.k8s.io", "coordination.k8s.io"}


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


@pytest.mark.parametrize(("kind", "obj", "field"), [
    ("ConfigMap", {"metadata": {"name": "UPPER"}}, "metadata.name"),
    ("ConfigMap", {"metadata": {}}, "metadata.name"),
    ("Namespace", {"metadata": {"name": "a.b"}}, "metadata.name"),  # a label, not a subdomain
    ("ConfigMap", {"metadata": {"name": "ok", "labels": {"k": "bad value"}}}, "metadata.labels"),
    ("Pod", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}, "spec.containers[0].image"),
    ("Pod", {"metadata": {"name": "p"}, "spec": {}}, "spec.containers"),
    ("Deployment", {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "1"}}, "template": {
        "metadata": {"labels": {"a": "2"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
     "spec.template.metadata.labels"),
    ("Secret", {"metadata": {"name": "s"}, "data": {"k": "not base64!"}}, "data[k]"),
    ("StorageClass", {"metadata": {"name": "s"}}, "provisioner"),
    ("Service", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 70000}]}}, "spec.ports[0].port"),
])
def test_validation(kind: str, obj: dict[str, Any], field: str) -> None:
    with pytest.raises(Invalid) as err:
        validate(by_kind(kind), obj)
    assert field in [f for _r, f, _m in err.value.causes]


def test_valid_objects_pass() -> None:
    validate(by_kind("Pod"), pod())
    validate(by_kind("ConfigMap"), {"metadata": {"name": "a.b-c", "labels": {"example.com/x": "y_z.1"}}})


def test_defaults() -> None:
    deployment: dict[str, Any] = {"metadata": {"name": "d", "uid": "u"}, "spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "nginx"}]}}}}
    apply_defaults(by_kind("Deployment"), deployment)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    daemonset: dict[str, Any] = {"metadata": {"name": "d", "uid": "u"}, "spec": {"template": {"spec": {}}}}
    apply_defaults(by_kind("DaemonSet"), daemonset)
    assert daemonset["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                                   "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    secret: dict[str, Any] = {"metadata": {"name": "s"}, "stringData": {"a": "b"}}
    apply_defaults(by_kind("Secret"), secret)
    assert secret == {"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "Yg=="}}
    service: dict[str, Any] = {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}
    apply_defaults(by_kind("Service"), service)
    assert service["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert service["spec"]["externalTrafficPolicy"] == "Cluster"


NODE = {"metadata": {"name": "n", "labels": {"zone": "a"}}, "spec": {}}


@pytest.mark.parametrize(("node_spec", "pod_spec", "expected"), [
    ({}, {}, True),
    ({"unschedulable": True}, {}, False),
    ({"unschedulable": True}, {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                                "effect": "NoSchedule"}]}, True),
    ({"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
     {}, False),
    ({"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
     {"tolerations": [{"key": "k", "value": "v", "operator": "Equal"}]}, True),
    ({"taints": [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]}, {}, True),
    ({}, {"nodeSelector": {"zone": "a"}}, True),
    ({}, {"nodeSelector": {"zone": "b"}}, False),
])
def test_scheduling_fit(node_spec: dict[str, Any], pod_spec: dict[str, Any], expected: bool) -> None:
    assert fits({**NODE, "spec": node_spec}, pod_spec) is expected


def test_tolerate_everything_and_template_hash() -> None:
    assert tolerates([{"operator": "Exists"}], {"key": "any", "effect": "NoExecute"})
    assert template_hash({"a": 1, "b": 2}) == template_hash({"b": 2, "a": 1})
    assert template_hash({"a": 1}) != template_hash({"a": 2})


@pytest.mark.parametrize(("seconds", "text"), [(5, "5s"), (119, "119s"), (125, "2m5s"), (600, "10m"),
                                               (3 * 3600 + 60, "3h1m"), (30 * 3600, "30h"), (5 * 86400, "5d")])
def test_human_age(seconds: int, text: str) -> None:
    now = datetime.datetime(2026, 1, 10, tzinfo=datetime.timezone.utc)
    then = (now - datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert human_age(then, now) == text
