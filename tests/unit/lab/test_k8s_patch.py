"""JSON patch, merge patch and strategic merge patch of the lab Kubernetes API server."""

from __future__ import annotations

from typing import Any

import pytest

from lab.k8s.patch import PatchError, PatchTestFailed, json_patch, merge_patch, strategic_merge_patch

DOC: dict[str, Any] = {"metadata": {"name": "x", "labels": {"a": "1"}, "finalizers": ["f1"]},
                       "spec": {"replicas": 1, "items": [1, 2, 3]}}


@pytest.mark.parametrize(("ops", "expected"), [
    ([{"op": "add", "path": "/metadata/labels/b", "value": "2"}], {"a": "1", "b": "2"}),
    ([{"op": "remove", "path": "/metadata/labels/a"}], {}),
    ([{"op": "replace", "path": "/metadata/labels/a", "value": "9"}], {"a": "9"}),
    ([{"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/c"}], {"a": "1", "c": "1"}),
    ([{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/d"}], {"d": "1"}),
    ([{"op": "test", "path": "/metadata/labels/a", "value": "1"},
      {"op": "add", "path": "/metadata/labels/a~1b", "value": "s"}], {"a": "1", "a/b": "s"}),
])
def test_json_patch_labels(ops: list[dict[str, Any]], expected: dict[str, str]) -> None:
    assert json_patch(DOC, ops)["metadata"]["labels"] == expected
    assert DOC["metadata"]["labels"] == {"a": "1"}  # the input is not changed


def test_json_patch_arrays() -> None:
    result = json_patch(DOC, [{"op": "add", "path": "/spec/items/-", "value": 4},
                              {"op": "add", "path": "/spec/items/0", "value": 0},
                              {"op": "remove", "path": "/spec/items/2"}])
    assert result["spec"]["items"] == [0, 1, 3, 4]


@pytest.mark.parametrize("ops", [
    [{"op": "remove", "path": "/metadata/labels/zzz"}],
    [{"op": "replace", "path": "/nope/x", "value": 1}],
    [{"op": "add", "path": "/spec/items/9", "value": 1}],
    [{"op": "frobnicate", "path": "/x"}],
    [{"path": "/x"}],
    {"op": "add"},
])
def test_json_patch_errors(ops: Any) -> None:
    with pytest.raises(PatchError):
        json_patch(DOC, ops)


def test_json_patch_test_failure() -> None:
    with pytest.raises(PatchTestFailed):
        json_patch(DOC, [{"op": "test", "path": "/spec/replicas", "value": 2}])


def test_merge_patch() -> None:
    result = merge_patch(DOC, {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"items": [9]}})
    assert result["metadata"]["labels"] == {"b": "2"}
    assert result["spec"] == {"replicas": 1, "items": [9]}  # lists are replaced
    assert merge_patch({"a": 1}, {"a": {"b": None}}) == {"a": {}}


POD_SPEC: dict[str, Any] = {"spec": {
    "containers": [
        {"name": "app", "image": "a:1", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}],
         "volumeMounts": [{"name": "v", "mountPath": "/data"}]},
        {"name": "side", "image": "s:1"}],
    "volumes": [{"name": "v", "emptyDir": {}}],
    "tolerations": [{"key": "a", "operator": "Exists"}]},
    "metadata": {"finalizers": ["one"]}}


def containers(doc: Any) -> dict[str, Any]:
    return {c["name"]: c for c in doc["spec"]["containers"]}


def test_strategic_merge_by_merge_keys() -> None:
    result = strategic_merge_patch(POD_SPEC, {"spec": {"containers": [
        {"name": "app", "image": "a:2", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "changed"}],
         "ports": [{"containerPort": 443}]}]}})
    app = containers(result)["app"]
    assert app["image"] == "a:2"
    assert app["env"] == [{"name": "A", "value": "changed"}, {"name": "B", "value": "2"}]
    assert [p["containerPort"] for p in app["ports"]] == [80, 443]
    assert set(containers(result)) == {"app", "side"}


def test_strategic_merge_directives() -> None:
    result = strategic_merge_patch(POD_SPEC, {"spec": {
        "containers": [{"name": "side", "$patch": "delete"}],
        "volumes": [{"$patch": "replace"}, {"name": "w", "emptyDir": {}}],
        "$setElementOrder/containers": [{"name": "app"}]},
        "metadata": {"finalizers": ["two"], "$deleteFromPrimitiveList/finalizers": ["one"]}})
    assert set(containers(result)) == {"app"}
    assert result["spec"]["volumes"] == [{"name": "w", "emptyDir": {}}]
    assert result["metadata"]["finalizers"] == ["two"]
    assert "$setElementOrder/containers" not in result["spec"]


def test_strategic_merge_atomic_lists_and_nulls() -> None:
    # tolerations have no merge key: replaced whole, like kube-apiserver.
    result = strategic_merge_patch(POD_SPEC, {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}],
                                                       "volumes": None}})
    assert result["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]
    assert "volumes" not in result["spec"]
    # A map replaced wholesale by $patch: replace.
    replaced = strategic_merge_patch({"a": {"x": 1, "y": 2}}, {"a": {"$patch": "replace", "z": 3}})
    assert replaced == {"a": {"z": 3}}
    retained = strategic_merge_patch({"s": {"type": "RollingUpdate", "rollingUpdate": {"x": 1}}},
                                     {"s": {"$retainKeys": ["type"], "type": "Recreate"}})
    assert retained == {"s": {"type": "Recreate"}}


def test_service_ports_merge_on_port() -> None:
    service = {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}
    result = strategic_merge_patch(service, {"spec": {"ports": [{"port": 443, "nodePort": 30443}]}})
    assert result["spec"]["ports"] == [{"port": 80, "name": "http"}, {"port": 443, "name": "https", "nodePort": 30443}]


def test_strategic_merge_errors() -> None:
    with pytest.raises(PatchError):
        strategic_merge_patch(POD_SPEC, {"spec": {"containers": [{"image": "no-name"}]}})
    with pytest.raises(PatchError):
        strategic_merge_patch(POD_SPEC, [])
