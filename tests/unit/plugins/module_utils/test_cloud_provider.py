from __future__ import annotations

import hashlib
from typing import Any

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _cloud_provider as cp

VOLUME_TYPES: list[dict[str, Any]] = [
    {"name": "standard", "description": "Default volume type"},
    {"name": "fast-ssd", "description": None},
    {"name": "legacy-hdd", "description": "RETIRED: use standard"},
    {"name": "old-ceph", "description": "ceph pool 1"},
]


def sc(name: str, volume_type: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "volume_type": volume_type, **extra}


@pytest.mark.parametrize("name,fragment", [
    ("lab-k8s", None),
    ("prod-eu1.example", None),
    ("a", None),
    ("x" * 63, None),
    ("kubernetes", "is a default"),
    ("cluster.local", "is a default"),
    ("lab_k8s", "contains '_'"),
    ("Lab-K8s", "not a DNS name"),
    ("-lab", "not a DNS name"),
    ("lab-", "not a DNS name"),
    ("x" * 64, "not a DNS name"),
    ("lab..k8s", "not a DNS name"),
    ("", "is empty"),
    ("   ", "is empty"),
    (None, "is empty"),
    (".".join(["x" * 63] * 4) + "x", "characters long"),
])
def test_cluster_name_errors(name: Any, fragment: str | None) -> None:
    errors = cp.cluster_name_errors(name)
    if fragment is None:
        assert errors == []
    else:
        assert len(errors) >= 1 and any(fragment in e for e in errors), errors


def test_lb_name_is_the_cloud_providers_format() -> None:
    assert cp.lb_name("lab-k8s", "default", "web") == "kube_service_lab-k8s_default_web"


@pytest.mark.parametrize("cluster_len,ns_len,svc_len,ok", [
    # kube_service_ (13) + cluster + _ + ns + _ + svc
    (10, 63, 63, True),
    (114, 63, 63, True),       # 13 + 114 + 1 + 63 + 1 + 63 = 255
    (115, 63, 63, False),      # 256
    (200, 20, 20, True),       # 255
    (200, 21, 20, False),
])
def test_lb_name_length_boundary(cluster_len: int, ns_len: int, svc_len: int, ok: bool) -> None:
    cluster = "c" * cluster_len
    services = [{"namespace": "n" * ns_len, "name": "s" * svc_len}]
    errors = cp.lb_name_errors(cluster, services)
    assert (errors == []) is ok, errors
    assert cp.longest_lb_name(cluster, services) == 13 + cluster_len + 1 + ns_len + 1 + svc_len
    if not ok:
        assert "cuts it at 255" in errors[0]


def test_lb_name_errors_malformed_service_and_none() -> None:
    assert cp.lb_name_errors("c", [{"namespace": "x"}])[0].startswith("expected service #0")
    assert cp.longest_lb_name("c", []) == 0


@pytest.mark.parametrize("options,fragment", [
    ({"lb-provider": "amphora"}, None),
    ({"lb-provider": "ovn", "lb-method": "SOURCE_IP_PORT"}, None),
    ({"lb-provider": "OVN", "lb-method": "SOURCE_IP_PORT"}, None),
    ({"lb-provider": "ovn"}, "unset, which means ROUND_ROBIN"),
    ({"lb-provider": "ovn", "lb-method": "ROUND_ROBIN"}, "set lb-method to SOURCE_IP_PORT (it is ROUND_ROBIN)"),
    ({"lb-provider": "amphora", "create-monitor": [1]}, "must be a single value"),
    ({}, None),
])
def test_load_balancer_errors(options: dict[str, Any], fragment: str | None) -> None:
    errors = cp.load_balancer_errors(options)
    assert (errors == []) if fragment is None else any(fragment in e for e in errors), errors


@pytest.mark.parametrize("classes,fragment", [
    ([sc("standard", "standard", default=True), sc("fast", "fast-ssd")], None),
    ([], None),
    ("standard", "must be a list"),
    (["standard"], "must be a mapping"),
    ([sc("Standard", "standard")], "DNS subdomain"),
    ([sc("", "standard")], "storage class #0: name"),
    ([sc("a", "standard"), sc("a", "fast-ssd")], "declared twice"),
    ([sc("a", "")], "volume_type (the Cinder volume type) is missing"),
    ([sc("a", "standard", reclaim_policy="Recycle")], "reclaim_policy must be one of Delete, Retain"),
    ([sc("a", "standard", volume_binding_mode="Later")], "volume_binding_mode must be one of"),
    ([sc("a", "standard", parameters=["x"])], "parameters must be a mapping"),
    ([sc("a", "standard", parameters={"type": "fast-ssd"})], "contradicts volume_type"),
    ([sc("a", "standard", zones="nova")], "zones must be a list"),
    ([sc("a", "standard", default="yes")], "default must be true or false"),
    ([sc("a", "standard", default=True), sc("b", "fast-ssd", default=True)], "more than one default storage class: a, b"),
])
def test_storage_class_declaration_errors(classes: Any, fragment: str | None) -> None:
    errors = cp.storage_class_declaration_errors(classes)
    assert (errors == []) if fragment is None else any(fragment in e for e in errors), errors


@pytest.mark.parametrize("classes,retired,fragment", [
    ([sc("a", "missing")], [], "volume type 'missing' does not exist in the cloud (volume types in use: fast-ssd, "
                               "old-ceph, standard)"),
    ([sc("a", "legacy-hdd")], [], "volume type 'legacy-hdd' is retired (RETIRED: use standard)"),
    ([sc("a", "old-ceph")], ["old-ceph"], "'old-ceph' is retired (listed in cloud_provider_openstack_retired_"),
    ([sc("a", "fast-ssd")], ["fast-ssd"], "is retired (listed in cloud_provider_openstack_retired_volume_types)"),
    ([sc("a", "standard", default=True), sc("b", "fast-ssd", default=True)], [], "more than one default"),
])
def test_storage_class_plan_refuses(classes: list[dict[str, Any]], retired: list[str], fragment: str) -> None:
    plan = cp.storage_class_plan(classes, VOLUME_TYPES, retired)
    assert plan["manifests"] == []
    assert any(fragment in e for e in plan["errors"]), plan["errors"]


def test_storage_class_plan_reports_every_bad_class() -> None:
    plan = cp.storage_class_plan([sc("a", "missing"), sc("b", "legacy-hdd"), sc("c", "standard")], VOLUME_TYPES)
    assert [e.split(":", maxsplit=1)[0] for e in plan["errors"]] == ["storage class 'a'", "storage class 'b'"]


def test_storage_class_plan_manifests() -> None:
    classes = [sc("standard", "standard", default=True, zones=["nova"]),
               sc("fast", "fast-ssd", reclaim_policy="Retain", allow_volume_expansion=False,
                  volume_binding_mode="Immediate", parameters={"csi.storage.k8s.io/fstype": "xfs", "type": "fast-ssd"})]
    plan = cp.storage_class_plan(classes, VOLUME_TYPES)
    assert plan["errors"] == []
    first, second = plan["manifests"]
    assert first == {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "cinder.csi.openstack.org", "parameters": {"type": "standard"}, "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True, "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [
            {"key": "topology.cinder.csi.openstack.org/zone", "values": ["nova"]}]}]}
    assert second["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "false"}
    assert second["parameters"] == {"type": "fast-ssd", "csi.storage.k8s.io/fstype": "xfs"}
    assert (second["reclaimPolicy"], second["allowVolumeExpansion"], second["volumeBindingMode"]) == (
        "Retain", False, "Immediate")
    assert "allowedTopologies" not in second


FAMILY = [{"id": "id-1", "name": "ccm"}, {"id": "id-2", "name": "ccm-20261129T120000Z"}]


@pytest.mark.parametrize("conf_id,conf_secret,family,rotate,action,name", [
    ("", "", [], False, "create", None),
    ("id-2", "s", FAMILY, False, "keep", "ccm-20261129T120000Z"),
    ("id-1", "s", FAMILY, False, "keep", "ccm"),
    ("id-2", "s", FAMILY, True, "rotate", None),
    ("", "", [], True, "rotate", None),
    ("", "", FAMILY, False, "fail", None),
    ("id-9", "s", FAMILY, False, "fail", None),
    ("id-2", "", FAMILY, False, "fail", None),
    ("id-9", "s", [], False, "create", None),   # the configured credential was deleted and nothing is left
])
def test_credential_action(conf_id: str, conf_secret: str, family: list[dict[str, str]], rotate: bool,
                           action: str, name: str | None) -> None:
    decision = cp.credential_action(conf_id, conf_secret, family, rotate)
    assert (decision["action"], decision["name"]) == (action, name)
    if action == "fail":
        assert "cloud_provider_openstack_rotate_credential=true" in decision["msg"]
        assert "ccm, ccm-20261129T120000Z" in decision["msg"]


def test_credential_action_fail_messages_say_what_cloud_conf_holds() -> None:
    assert "holds no credential" in cp.credential_action("", "", FAMILY, False)["msg"]
    assert "id-9, which is not in the family" in cp.credential_action("id-9", "s", FAMILY, False)["msg"]
    assert "id-2 without its secret" in cp.credential_action("id-2", "", FAMILY, False)["msg"]


GLOBAL = {"auth-url": "http://127.0.0.1:25000/v3", "region": "RegionOne", "application-credential-id": "abc",
          "application-credential-secret": "s3cr3t", "ca-file": ""}


def test_cloud_conf_sections_and_text() -> None:
    sections = cp.cloud_conf_sections(
        {**GLOBAL, "region": "RegionOne", "ca-file": None},
        {"floating-network-id": "net", "subnet-id": "sub", "lb-provider": "amphora", "create-monitor": True,
         "manage-security-groups": False, "lb-method": None},
        {"node-volume-attach-limit": 25, "ignore-volume-az": True},
        {"search-order": "configDrive,metadataService"})
    assert list(sections) == ["Global", "LoadBalancer", "BlockStorage", "Metadata"]
    assert list(sections["Global"]) == ["auth-url", "region", "application-credential-id",
                                        "application-credential-secret"]
    assert sections["LoadBalancer"] == {"floating-network-id": "net", "subnet-id": "sub", "lb-provider": "amphora",
                                        "create-monitor": "true", "manage-security-groups": "false"}
    assert sections["BlockStorage"] == {"node-volume-attach-limit": "25", "ignore-volume-az": "true"}
    text = cp.render_ini(sections, "Rendered by a test\n\nline 3")
    assert text.startswith("# Rendered by a test\n#\n# line 3\n\n[Global]\nauth-url = http://127.0.0.1:25000/v3\n")
    assert "\n\n[LoadBalancer]\nfloating-network-id = net\n" in text
    assert text.endswith("[Metadata]\nsearch-order = configDrive,metadataService\n")
    # Same input, same bytes: the re-run changes nothing.
    assert cp.render_ini(sections) == cp.render_ini(cp.cloud_conf_sections(
        {**GLOBAL, "ca-file": None}, sections["LoadBalancer"], sections["BlockStorage"], sections["Metadata"]))


def test_cloud_conf_global_order_is_fixed_and_empty_sections_dropped() -> None:
    shuffled = dict(reversed(list({**GLOBAL, "ca-file": "/etc/ca.pem", "tls-insecure": False}.items())))
    sections = cp.cloud_conf_sections(shuffled, {}, {"ignore-volume-az": None}, None)
    assert list(sections) == ["Global"]
    assert list(sections["Global"]) == [*cp.GLOBAL_KEYS, "tls-insecure"]
    assert cp.render_ini(sections).startswith("[Global]\n")


@pytest.mark.parametrize("global_options,load_balancer,fragment", [
    ({"region": "RegionOne"}, {}, "needs auth-url"),
    ({"auth-url": "http://k"}, {}, "needs region"),
    (GLOBAL, {"lb-provider": "amphora\n[Global]"}, "line break"),
])
def test_cloud_conf_refuses(global_options: dict[str, Any], load_balancer: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        cp.cloud_conf_sections(global_options, load_balancer)


def test_config_checksum() -> None:
    assert cp.config_checksum("[Global]\n") == hashlib.sha256(b"[Global]\n").hexdigest()
    assert cp.config_checksum("a") != cp.config_checksum("b")


@pytest.mark.parametrize("settings,count,fragment", [
    ({"cluster_name": "lab-k8s", "expected_services": [{"namespace": "default", "name": "web"}],
      "load_balancer": {"lb-provider": "amphora"}, "storage_classes": [sc("a", "standard", default=True)]}, 0, None),
    ({"cluster_name": "kubernetes"}, 1, "is a default"),
    ({"cluster_name": "lab_k8s", "load_balancer": {"lb-provider": "ovn"},
      "storage_classes": [sc("a", "x", default=True), sc("b", "y", default=True)]}, 3, None),
    ({"cluster_name": "c" * 120, "expected_services": [{"namespace": "n" * 63, "name": "s" * 63}]}, 2, "cuts it"),
    ({"cluster_name": "lab-k8s", "expected_services": "web"}, 1, "must be a list"),
])
def test_input_errors(settings: dict[str, Any], count: int, fragment: str | None) -> None:
    errors = cp.input_errors(settings)
    assert len(errors) == count, errors
    if fragment:
        assert any(fragment in e for e in errors)
