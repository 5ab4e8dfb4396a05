"""Tables for the preflight's pure logic: plan -> demand, demand vs headroom -> findings, rendering."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _preflight as pf

FLAVORS = {"c": {"name": "c", "vcpus": 4, "ram": 8192}, "w": {"name": "w", "vcpus": 8, "ram": 16384}}
PLAN: dict[str, Any] = {
    "cluster_name": "lab-k8s",
    "environment": "lab",
    "nodes": [{"role": "control", "count": 3, "flavor": "c", "name_prefix": "cp-"},
              {"role": "worker", "count": 2, "flavor": "w", "name_prefix": "wk-"}],
    "upgrade_surge": {"count": 1},
    "services": [{"namespace": "web", "name": "front", "ports": [80, 443]}],
    "pvcs": [{"name": "db", "count": 2, "size_gb": 10, "storage_class": "fast"}],
    "storage_classes": [{"name": "fast", "volume_type": "fast-ssd"}, {"name": "std", "volume_type": "standard"}],
    "octavia_provider": "amphora",
    "etcd_members": 3,
}


def plan(**changes: Any) -> dict[str, Any]:
    new = copy.deepcopy(PLAN)
    new.update(changes)
    return new


def roomy(limit: int = 10**6) -> dict[str, Any]:
    return {service: {resource: {"limit": limit, "in_use": 0} for s, resource, _u in pf.QUOTAS if s == service}
            for service in pf.SERVICES}


def cloud(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "services": dict.fromkeys(pf.SERVICES, True),
        "quotas": roomy(),
        "flavors": list(FLAVORS.values()),
        "volume_types": [{"name": "standard", "description": "HDD"}, {"name": "fast-ssd", "description": None},
                         {"name": "legacy-hdd", "description": "RETIRED: use standard"}],
        "load_balancer_providers": [{"name": "amphora"}, {"name": "octavia"}],
        "load_balancer_flavors": [{"name": "lb.small", "id": "f1", "is_enabled": True},
                                  {"name": "lb.off", "id": "f2", "is_enabled": False}],
        "servers": [], "load_balancers": [], "errors": {},
    }
    base.update(changes)
    return base


# ------------------------------------------------------------------ demand

@pytest.mark.parametrize("changes,servers,lbs,expected", [
    # 3 x c + 2 x w + surge 1 x the largest (w); 1 Service with 2 ports; 2 PVCs of 10 GiB.
    ({}, [], [], {"compute.instances": 6, "compute.cores": 3 * 4 + 3 * 8, "compute.ram": 3 * 8192 + 3 * 16384,
                  "network.ports": 6 + 1, "network.floating_ips": 1, "network.security_groups": 1,
                  "load_balancer.load_balancers": 1, "load_balancer.listeners": 2, "load_balancer.pools": 2,
                  "block_storage.volumes": 2, "block_storage.gigabytes": 20, "network.networks": 0}),
    # Existing servers are in the usage already: only the missing ones and the surge are demanded.
    ({}, ["cp-1", "cp-2", "cp-3", "wk-1", "other"], [],
     {"compute.instances": 2, "compute.cores": 16, "compute.ram": 2 * 16384, "network.ports": 3}),
    # An existing load balancer for the Service: no LB demand.
    ({}, [], ["kube_service_lab-k8s_web_front"],
     {"load_balancer.load_balancers": 0, "load_balancer.listeners": 0, "network.floating_ips": 0,
      "network.ports": 6}),
    # Surge with a named flavor; no surge.
    ({"upgrade_surge": {"count": 2, "flavor": "c"}}, [], [], {"compute.instances": 7, "compute.cores": 12 + 16 + 8}),
    ({"upgrade_surge": {"count": 0}}, [], [], {"compute.instances": 5}),
    # Boot from volume: a root volume per node (surge included).
    ({"boot_from_volume": True, "root_volume_gb": 50}, [], [],
     {"block_storage.volumes": 6 + 2, "block_storage.gigabytes": 6 * 50 + 20}),
    # Per-volume-type demand follows the StorageClass's volume type.
    ({}, [], [], {"block_storage.volumes_fast-ssd": 2, "block_storage.gigabytes_fast-ssd": 20}),
    # Security groups: not managed by the CCM; the deployment's own networks and groups.
    ({"manage_security_groups": False, "cluster_networks": 1, "cluster_security_groups": 2}, [], [],
     {"network.security_groups": 2, "network.networks": 1}),
    # Two ports per node.
    ({"ports_per_node": 2, "services": []}, [], [], {"network.ports": 12}),
])
def test_demand(changes: dict[str, Any], servers: list[str], lbs: list[str], expected: dict[str, int]) -> None:
    need, why = pf.demand(plan(**changes), FLAVORS, servers, lbs)
    assert {k: need.get(k) for k in expected} == expected
    assert why


def test_lb_name_is_cut_to_255() -> None:
    assert pf.lb_name("c", "ns", "x" * 300) == ("kube_service_c_ns_" + "x" * 300)[:255]


# ------------------------------------------------------------------ plan validation

@pytest.mark.parametrize("changes,message", [
    ({"nodes": []}, "plan.nodes is empty"),
    ({"nodes": [{"role": "control", "count": 3}]}, "needs 'flavor'"),
    ({"nodes": [{"role": "control", "count": -1, "flavor": "c"}]}, "count"),
    ({"nodes": [{"role": "control", "count": "three", "flavor": "c"}]}, "whole number"),
    ({"nodes": [{"role": "control", "count": True, "flavor": "c"}]}, "whole number"),
    ({"upgrade_surge": 1}, "upgrade_surge must be a dict"),
    ({"boot_from_volume": True}, "root_volume_gb"),
    ({"services": [{"name": "x", "ports": []}]}, "non-empty list 'ports'"),
    ({"services": [{"ports": [80]}]}, "needs 'name'"),
    ({"storage_classes": [{"name": "x"}]}, "'volume_type'"),
    ({"pvcs": [{"name": "p", "size_gb": 1, "storage_class": "nope"}]}, "not one of plan.storage_classes"),
    ({"pvcs": [{"name": "p", "size_gb": 0, "storage_class": "fast"}]}, "size_gb"),
    ({"etcd_members": None}, "etcd_members"),
    ({"etcd_members": 0}, "etcd_members"),
    ({"pvcs": "x"}, "must be a list"),
])
def test_validate_plan_says_what_to_fix(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(pf.PlanError, match=message):
        pf.validate_plan(plan(**changes))


def test_valid_plan() -> None:
    pf.validate_plan(PLAN)


# ------------------------------------------------------------------ quotas

@pytest.mark.parametrize("quota,need,status,finding", [
    ({"limit": 10, "in_use": 4}, 6, "ok", None),
    ({"limit": 10, "in_use": 4}, 7, "SHORT", "needs 7, headroom 6 (quota 10 - in use 4): raise the quota by at least 1"),
    ({"limit": -1, "in_use": 400}, 10**6, "ok", None),
    ({"limit": None, "in_use": 3}, 10, "ok", None),  # no limit reported: unlimited
    ({"limit": 0, "in_use": 0}, 1, "SHORT", "headroom 0"),
    ({"limit": 0, "in_use": 0}, 0, "ok", None),
    # Usage above the quota (quota lowered under the usage): negative headroom, any demand is short.
    ({"limit": 2, "in_use": 3}, 1, "SHORT", "headroom -1"),
])
def test_quota_rows(quota: dict[str, Any], need: int, status: str, finding: str | None) -> None:
    quotas = roomy()
    quotas["compute"]["instances"] = quota
    rows, findings = pf.quota_rows({"compute.instances": need}, quotas, dict.fromkeys(pf.SERVICES, True))
    row = next(r for r in rows if r["resource"] == "instances")
    assert row["status"] == status
    if finding is None:
        assert findings == []
    else:
        assert [f.subject for f in findings] == ["compute.instances"]
        assert finding in findings[0].message


def test_absent_service_is_an_error_only_when_needed() -> None:
    services = {**dict.fromkeys(pf.SERVICES, True), "load_balancer": False}
    rows, findings = pf.quota_rows({"load_balancer.load_balancers": 1, "load_balancer.listeners": 2}, roomy(),
                                   services)
    assert {r["status"] for r in rows if r["service"] == "load_balancer"} == {"absent"}
    assert [f.subject for f in findings] == ["load_balancer"]
    assert findings[0].message == ("the plan needs 1 load_balancers, 2 listeners but load_balancer is not in the "
                                   "catalog: deploy the service or change the plan")
    _rows, none = pf.quota_rows({}, roomy(), services)
    assert none == []


def test_unreadable_quota() -> None:
    quotas = roomy()
    del quotas["network"]
    rows, findings = pf.quota_rows({"network.ports": 3}, quotas, dict.fromkeys(pf.SERVICES, True))
    assert next(r for r in rows if r["resource"] == "ports")["status"] == "unknown"
    assert [f.subject for f in findings] == ["network.ports"]


@pytest.mark.parametrize("per_type,rows_expected,short", [
    ({}, [], False),
    ({"volumes_fast-ssd": {"limit": -1, "in_use": 0}}, [], False),  # unlimited per type: no row
    ({"volumes_fast-ssd": {"limit": 5, "in_use": 0}}, ["volumes_fast-ssd"], False),
    ({"gigabytes_fast-ssd": {"limit": 15, "in_use": 0}}, ["gigabytes_fast-ssd"], True),
    ({"gigabytes_standard": {"limit": 1, "in_use": 0}}, [], False),  # type not used by the plan
])
def test_per_volume_type_quotas(per_type: dict[str, Any], rows_expected: list[str], short: bool) -> None:
    quotas = roomy()
    quotas["block_storage"].update(per_type)
    need, _why = pf.demand(PLAN, FLAVORS)
    rows, findings = pf.quota_rows(need, quotas, dict.fromkeys(pf.SERVICES, True))
    assert [r["resource"] for r in rows if "_" in r["resource"] and r["service"] == "block_storage"] == rows_expected
    assert bool(findings) == short


# ------------------------------------------------------------------ other checks

@pytest.mark.parametrize("classes,expected", [
    ([{"name": "std", "volume_type": "standard"}], []),
    ([{"name": "gone", "volume_type": "nope"}], [("gone", "does not exist")]),
    ([{"name": "old", "volume_type": "legacy-hdd"}], [("old", "is retired (RETIRED: use standard)")]),
    ([{"name": "a", "volume_type": "nope"}, {"name": "b", "volume_type": "legacy-hdd"}],
     [("a", "does not exist"), ("b", "retired")]),
])
def test_volume_types(classes: list[dict[str, str]], expected: list[tuple[str, str]]) -> None:
    found = pf.volume_type_findings(plan(storage_classes=classes), cloud()["volume_types"],
                                    dict.fromkeys(pf.SERVICES, True))
    assert [(f.subject, f.severity) for f in found] == [(s, pf.ERROR) for s, _m in expected]
    for finding, (_subject, message) in zip(found, expected):
        assert message in finding.message


def test_retired_marker_is_a_prefix_only() -> None:
    types = [{"name": "t", "description": "not RETIRED: just a note"}]
    assert pf.volume_type_findings(plan(storage_classes=[{"name": "s", "volume_type": "t"}]), types,
                                   dict.fromkeys(pf.SERVICES, True)) == []


def test_root_volume_type_is_checked_when_booting_from_volume() -> None:
    found = pf.volume_type_findings(plan(storage_classes=[], boot_from_volume=True, root_volume_gb=20,
                                         root_volume_type="legacy-hdd"), cloud()["volume_types"],
                                    dict.fromkeys(pf.SERVICES, True))
    assert [f.subject for f in found] == ["(node root volumes)"]


def test_volume_types_without_cinder() -> None:
    found = pf.volume_type_findings(PLAN, [], {**dict.fromkeys(pf.SERVICES, True), "block_storage": False})
    assert len(found) == 2 and all("not in the catalog" in f.message for f in found)


@pytest.mark.parametrize("provider,flavor,expected", [
    ("amphora", None, []),
    ("amphora", "lb.small", []),
    ("amphora", "f1", []),
    ("ovn", None, ["provider ovn"]),
    ("amphora", "lb.large", ["flavor lb.large"]),
    ("amphora", "lb.off", ["flavor lb.off"]),
    (None, None, []),
])
def test_octavia(provider: str | None, flavor: str | None, expected: list[str]) -> None:
    c = cloud()
    found = pf.octavia_findings(plan(octavia_provider=provider, octavia_flavor=flavor), c["load_balancer_providers"],
                                c["load_balancer_flavors"], c["services"])
    assert [f.subject for f in found] == expected


def test_octavia_absent() -> None:
    found = pf.octavia_findings(PLAN, [], [], {**dict.fromkeys(pf.SERVICES, True), "load_balancer": False})
    assert len(found) == 1 and "not in the catalog" in found[0].message


@pytest.mark.parametrize("members,environment,expected", [
    (3, "lab", []),
    (1, "lab", []),
    (4, "lab", [pf.ERROR]),
    (2, "production", [pf.ERROR]),
    (3, "production", [pf.WARNING]),
    (1, "production", [pf.WARNING]),
    (5, "production", []),
    (7, "production", []),
    (6, "production", [pf.ERROR]),
])
def test_etcd(members: int, environment: str, expected: list[str]) -> None:
    assert [f.severity for f in pf.etcd_findings(members, environment)] == expected


def test_missing_flavor() -> None:
    found = pf.flavor_findings(plan(upgrade_surge={"count": 1, "flavor": "big"}), FLAVORS,
                               dict.fromkeys(pf.SERVICES, True))
    assert [f.subject for f in found] == ["big"]


# ------------------------------------------------------------------ the whole evaluation and rendering

@pytest.mark.parametrize("plan_changes,cloud_changes,problems,warnings,checks", [
    ({}, {}, 0, 0, []),
    ({"etcd_members": 4}, {}, 1, 0, ["etcd"]),
    ({"environment": "production"}, {}, 0, 1, ["etcd"]),
    ({"octavia_provider": "nope"}, {}, 1, 0, ["octavia"]),
    ({"storage_classes": [{"name": "fast", "volume_type": "legacy-hdd"}]}, {}, 1, 0, ["volume_type"]),
    ({}, {"quotas": {**roomy(), "compute": {"instances": {"limit": 5, "in_use": 0},
                                            "cores": {"limit": -1, "in_use": 0},
                                            "ram": {"limit": -1, "in_use": 0}}}}, 1, 0, ["quota"]),
    ({}, {"errors": {"load_balancer": "reading the load_balancer quota: forbidden (HTTP 403)"}}, 1, 0, ["read"]),
    ({}, {"flavors": [FLAVORS["c"]]}, 1, 0, ["flavor"]),
])
def test_evaluate(plan_changes: dict[str, Any], cloud_changes: dict[str, Any], problems: int, warnings: int,
                  checks: list[str]) -> None:
    result = pf.evaluate(plan(**plan_changes), cloud(**cloud_changes))
    assert (result["problems"], result["warnings"]) == (problems, warnings)
    assert [f["check"] for f in result["findings"]] == checks
    for finding in result["findings"]:
        assert finding["subject"] in result["findings_table"]
    assert "compute" in result["capacity_table"]


def test_render_table() -> None:
    assert pf.render_table(("a", "long header"), [(1, None), ("wide cell", "x")]).splitlines() == [
        "| a         | long header |",
        "|-----------|-------------|",
        "| 1         |             |",
        "| wide cell | x           |",
    ]


def test_capacity_table_shows_units_and_unlimited() -> None:
    rows: list[dict[str, Any]] = [
        {"service": "compute", "resource": "ram", "unit": "MiB", "limit": -1, "in_use": 512, "headroom": None,
         "demand": 1024, "status": "ok"},
        {"service": "load_balancer", "resource": "pools", "unit": "", "limit": None, "in_use": None,
         "headroom": None, "demand": 0, "status": "absent"}]
    lines = pf.capacity_table(rows).splitlines()
    assert [c.strip() for c in lines[2].split("|")[3:7]] == ["unlimited", "512 MiB", "unlimited", "1024 MiB"]
    assert "absent" in lines[3]


def test_findings_table_lists_errors_first() -> None:
    table = pf.findings_table([pf.Finding(pf.WARNING, "etcd", "members", "w"),
                               pf.Finding(pf.ERROR, "quota", "compute.cores", "e")])
    assert table.index("ERROR") < table.index("WARNING")
    assert pf.findings_table([]) == "No problems found."


def test_a_failed_read_is_reported_once_not_as_missing_things() -> None:
    errors = {"compute": "reading the compute quota: cannot reach ...", "flavors": "listing flavors: ...",
              "volume_types": "listing volume types: ...", "load_balancer_providers": "listing providers: ..."}
    quotas = roomy()
    del quotas["compute"]
    result = pf.evaluate(PLAN, cloud(errors=errors, quotas=quotas, flavors=[], volume_types=[],
                                     load_balancer_providers=[]))
    assert sorted(f["subject"] for f in result["findings"]) == sorted(errors)
    assert {f["check"] for f in result["findings"]} == {"read"}
    assert {r["status"] for r in result["rows"] if r["service"] == "compute"} == {"unknown"}


def test_long_messages_wrap_inside_their_cell() -> None:
    table = pf.findings_table([pf.Finding(pf.ERROR, "quota", "compute.cores", "word " * 40)])
    lines = table.splitlines()
    assert len(lines) > 3
    assert len({len(line) for line in lines}) == 1  # every line as wide as the others
    assert all(len(line) < 130 for line in lines)
