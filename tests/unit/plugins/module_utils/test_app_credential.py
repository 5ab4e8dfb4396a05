from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _app_credential as ac

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)


def cred(name: str, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": f"id-{name}", "name": name, "description": None, "project_id": "p1",
        "roles": [{"id": "r1", "name": "member"}, {"id": "r2", "name": "reader"}],
        "expires_at": None, "unrestricted": False, "access_rules": []}
    base.update(extra)
    return base


@pytest.mark.parametrize("name,rotating,ok", [
    ("k8s", False, True),
    ("x" * 255, False, True),
    ("x" * 256, False, False),
    ("x" * 235, True, True),
    ("x" * 236, True, False),
    ("", False, False),
    ("   ", True, False),
])
def test_validate_name(name: str, rotating: bool, ok: bool) -> None:
    if ok:
        ac.validate_name(name, rotating)
    else:
        with pytest.raises(ac.InputError, match="name"):
            ac.validate_name(name, rotating)


@pytest.mark.parametrize("value,expected", [
    (None, None),
    ("", None),
    ("2027-01-31T00:00:00Z", datetime(2027, 1, 31, tzinfo=timezone.utc)),
    ("2027-01-31T01:00:00+01:00", datetime(2027, 1, 31, tzinfo=timezone.utc)),
    ("2027-01-31T00:00:00", datetime(2027, 1, 31, tzinfo=timezone.utc)),
    ("2027-01-31T00:00:00.123456Z", datetime(2027, 1, 31, tzinfo=timezone.utc)),
])
def test_parse_expires_at_valid(value: str | None, expected: datetime | None) -> None:
    assert ac.parse_expires_at(value, NOW) == expected


@pytest.mark.parametrize("value,message", [
    ("2020-01-01T00:00:00Z", "in the past"),
    ("2026-11-29T12:00:00Z", "in the past"),
    ("next tuesday", "not an ISO 8601"),
    ("2027-13-01", "not an ISO 8601"),
])
def test_parse_expires_at_invalid(value: str, message: str) -> None:
    with pytest.raises(ac.InputError, match=message):
        ac.parse_expires_at(value, NOW)


def test_access_rules_normalised_and_validated() -> None:
    rules = [{"service": "compute", "path": "/v2.1/servers", "method": "get"},
             {"service": "block-storage", "path": "/v3/*", "method": "POST"}]
    assert ac.normalise_access_rules(rules) == (("block-storage", "/v3/*", "POST"), ("compute", "/v2.1/servers", "GET"))
    assert ac.normalise_access_rules(None) is None
    with pytest.raises(ac.InputError, match=r"access_rules\[0\] lacks path"):
        ac.normalise_access_rules([{"service": "compute", "method": "GET"}])


@pytest.mark.parametrize("wanted,held,unknown", [
    (None, ["member"], []),
    (["member"], ["member", "reader"], []),
    (["member", "admin"], ["member", "reader"], ["admin"]),
    (["load-balancer_member", "x"], [], ["load-balancer_member", "x"]),
])
def test_unknown_roles(wanted: list[str] | None, held: list[str], unknown: list[str]) -> None:
    assert ac.unknown_roles(wanted, held) == unknown


@pytest.mark.parametrize("roles,closure", [
    (["member"], ["member", "reader"]),
    (["admin"], ["admin", "manager", "member", "reader"]),
    (["load-balancer_member"], ["load-balancer_member"]),
    ([], []),
])
def test_role_closure_default_inferences(roles: list[str], closure: list[str]) -> None:
    assert ac.role_closure(roles, ac.DEFAULT_ROLE_INFERENCES) == closure


def test_parse_role_inferences_from_keystone_body() -> None:
    body = {"role_inferences": [
        {"prior_role": {"id": "1", "name": "admin"}, "implies": [{"id": "2", "name": "member"}]},
        {"prior_role": {"id": "2", "name": "member"}, "implies": [{"id": "3", "name": "reader"}]},
    ]}
    rules = ac.parse_role_inferences(body)
    assert rules == {"admin": ("member",), "member": ("reader",)}
    assert ac.role_closure(["admin"], rules) == ["admin", "member", "reader"]


@pytest.mark.parametrize("desired,fields", [
    (ac.Desired("c"), []),
    (ac.Desired("c", roles=("member",)), []),  # Keystone stored member + implied reader
    (ac.Desired("c", roles=("member", "load-balancer_member")), ["roles"]),
    (ac.Desired("c", description="new"), ["description"]),
    (ac.Desired("c", unrestricted=False), []),
    (ac.Desired("c", unrestricted=True), ["unrestricted"]),
    (ac.Desired("c", expires_at=datetime(2027, 1, 1, tzinfo=timezone.utc)), ["expires_at"]),
    (ac.Desired("c", access_rules=(("compute", "/x", "GET"),)), ["access_rules"]),
    (ac.Desired("c", access_rules=()), []),
])
def test_drift_table(desired: ac.Desired, fields: list[str]) -> None:
    assert sorted(ac.drift(cred("c"), desired)) == sorted(fields)


def test_drift_compares_expiry_at_second_precision() -> None:
    existing = cred("c", expires_at="2027-01-01T00:00:00.000000")
    assert ac.drift(existing, ac.Desired("c", expires_at=datetime(2027, 1, 1, tzinfo=timezone.utc))) == {}


@pytest.mark.parametrize("existing,desired,recreate,action", [
    (None, ac.Desired("c"), False, "create"),
    (cred("c"), ac.Desired("c", roles=("member",)), False, "none"),
    (cred("c"), ac.Desired("c", description="changed"), False, "fail"),
    (cred("c"), ac.Desired("c", description="changed"), True, "recreate"),
])
def test_plan_present(existing: dict | None, desired: ac.Desired, recreate: bool, action: str) -> None:
    plan = ac.plan_present(existing, desired, recreate)
    assert plan.action == action
    if action == "fail":
        assert "state=rotated" in plan.message and "recreate_on_drift" in plan.message
        assert plan.drift["description"] == {"before": None, "after": "changed"}


@pytest.mark.parametrize("name,key", [
    ("base", ("", 0)),
    ("base-20261129T120000Z", ("20261129T120000Z", 1)),
    ("base-20261129T120000Z-3", ("20261129T120000Z", 3)),
    ("base-extra", None),
    ("basement-20261129T120000Z", None),
    ("other", None),
])
def test_generation(name: str, key: tuple[str, int] | None) -> None:
    assert ac.generation("base", name) == key


def test_family_orders_oldest_first_and_ignores_strangers() -> None:
    creds = [cred("base-20261201T000000Z"), cred("other"), cred("base"), cred("base-20261130T000000Z-2"),
             cred("base-20261130T000000Z")]
    assert [c["name"] for c in ac.family("base", creds)] == [
        "base", "base-20261130T000000Z", "base-20261130T000000Z-2", "base-20261201T000000Z"]


@pytest.mark.parametrize("existing,expected", [
    ([], "base-20261129T120000Z"),
    (["base-20261129T120000Z"], "base-20261129T120000Z-2"),
    (["base-20261129T120000Z", "base-20261129T120000Z-2"], "base-20261129T120000Z-3"),
])
def test_successor_name(existing: list[str], expected: str) -> None:
    assert ac.successor_name("base", NOW, existing) == expected


@pytest.mark.parametrize("count,keep,deleted", [
    (1, 2, 0), (2, 2, 0), (3, 2, 1), (5, 2, 3), (3, 1, 2), (1, 1, 0),
])
def test_plan_retirement_keeps_newest(count: int, keep: int, deleted: int) -> None:
    members = [{"name": f"m{i}"} for i in range(count)]
    doomed = ac.plan_retirement(members, keep)
    assert len(doomed) == deleted
    assert members[-1] not in doomed  # the successor (newest) is never retired
    assert doomed == members[:deleted]


def test_plan_retirement_refuses_keep_zero() -> None:
    with pytest.raises(ac.InputError, match="keep must be at least 1"):
        ac.plan_retirement([{"name": "a"}], 0)


@pytest.mark.parametrize("token_project,token_roles,expected_roles,problems", [
    ("p1", ["member", "reader"], ["member"], 0),
    ("p2", ["member"], ["member"], 1),
    ("p1", ["reader"], ["member"], 1),
    ("p2", [], ["member"], 2),
    ("p1", [], None, 0),
])
def test_token_problems(token_project: str, token_roles: list[str], expected_roles: list[str] | None,
                        problems: int) -> None:
    assert len(ac.token_problems("p1", expected_roles, token_project, token_roles)) == problems


def test_public_view_never_has_a_secret_and_create_attrs_shape() -> None:
    view = ac.public_view(cred("c", secret="s3cr3t-value", expires_at="2027-01-01T00:00:00.000000"))
    assert "secret" not in view and view["expires_at"] == "2027-01-01T00:00:00Z"
    desired = ac.Desired("c", roles=("member",), expires_at=datetime(2027, 1, 1, tzinfo=timezone.utc),
                         access_rules=(("compute", "/x", "GET"),))
    assert desired.create_attrs() == {
        "unrestricted": False, "roles": [{"name": "member"}], "expires_at": "2027-01-01T00:00:00.000000",
        "access_rules": [{"service": "compute", "path": "/x", "method": "GET"}]}
