from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _barbican as bk

UUID = "b5309dfb-b326-4148-b0ad-e9cd1ec223a8"
HREF = f"http://barbican.example.com:9311/v1/secrets/{UUID}"


def secret(name: str = "prod-kms", status: str = "ACTIVE", uuid: str = UUID, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": name, "status": status, "algorithm": "aes", "bit_length": 256, "mode": "cbc",
                            "secret_type": "symmetric", "secret_ref": f"http://b:9311/v1/secrets/{uuid}",
                            "content_types": {"default": "application/octet-stream"}}
    base.update(extra)
    return base


@pytest.mark.parametrize("name,cluster,expected", [
    ("my-key", None, "my-key"),
    ("my-key", "prod", "my-key"),
    (None, "prod", "prod-kms"),
    ("", "lab-k8s", "lab-k8s-kms"),
    (None, None, None),
    ("  ", None, None),
    ("x" * 256, None, None),
    (None, "x" * 252, None),
])
def test_key_name(name: str | None, cluster: str | None, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(bk.InputError):
            bk.key_name(name, cluster)
    else:
        assert bk.key_name(name, cluster) == expected


@pytest.mark.parametrize("ref,expected", [
    (UUID, UUID),
    (UUID.upper(), UUID),
    (HREF, UUID),
    (HREF + "/", UUID),
    ("http://b:9311/v1/orders/" + UUID, None),
    ("not-a-uuid", None),
    ("", None),
    ("http://b:9311/v1/secrets/", None),
])
def test_secret_uuid(ref: str, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(bk.InputError):
            bk.secret_uuid(ref)
    else:
        assert bk.secret_uuid(ref) == expected


def test_order_request_is_an_aes_256_cbc_key() -> None:
    assert bk.order_request("prod-kms") == {"type": "key", "meta": {
        "name": "prod-kms", "algorithm": "aes", "bit_length": 256, "mode": "cbc",
        "payload_content_type": "application/octet-stream"}}


@pytest.mark.parametrize("secrets,expected_uuid", [
    ([], None),
    ([secret(name="other")], None),
    ([secret(status="ERROR")], None),
    ([secret()], UUID),
    ([secret(name="other", uuid="00000000-0000-0000-0000-000000000001"), secret()], UUID),
    ([secret(status="PENDING", uuid="00000000-0000-0000-0000-000000000001"), secret()], UUID),
])
def test_choose_key(secrets: list[dict[str, Any]], expected_uuid: str | None) -> None:
    chosen = bk.choose_key(secrets, "prod-kms")
    assert (bk.secret_uuid(chosen["secret_ref"]) if chosen else None) == expected_uuid


def test_choose_key_refuses_two_keys_and_lists_their_hrefs() -> None:
    other = "00000000-0000-0000-0000-000000000002"
    with pytest.raises(bk.InputError) as err:
        bk.choose_key([secret(), secret(uuid=other)], "prod-kms")
    assert "2 ACTIVE secrets are named 'prod-kms'" in str(err.value)
    assert UUID in str(err.value) and other in str(err.value)


@pytest.mark.parametrize("extra,problem", [
    ({}, None),
    ({"algorithm": "AES", "mode": "CBC"}, None),
    ({"algorithm": "rsa"}, "algorithm"),
    ({"bit_length": 128}, "bit_length"),
    ({"mode": "gcm"}, "mode"),
    ({"mode": None}, "mode"),
    ({"secret_type": "opaque"}, "secret_type"),
])
def test_key_problems(extra: dict[str, Any], problem: str | None) -> None:
    problems = bk.key_problems(secret(**extra))
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(problem)


@pytest.mark.parametrize("orders,found", [
    ([], False),
    ([{"type": "key", "status": "PENDING", "meta": {"name": "prod-kms"}}], True),
    ([{"type": "key", "status": "ACTIVE", "meta": {"name": "prod-kms"}}], False),
    ([{"type": "key", "status": "PENDING", "meta": {"name": "other"}}], False),
    ([{"type": "asymmetric", "status": "PENDING", "meta": {"name": "prod-kms"}}], False),
    ([{"type": "key", "status": "PENDING"}], False),
])
def test_pending_order(orders: list[dict[str, Any]], found: bool) -> None:
    assert (bk.pending_order(orders, "prod-kms") is not None) is found


@pytest.mark.parametrize("order,state,detail", [
    ({"status": "ACTIVE", "secret_ref": HREF}, "active", HREF),
    ({"status": "ACTIVE"}, "error", "names no secret"),
    ({"status": "PENDING"}, "pending", ""),
    ({}, "pending", ""),
    ({"status": "ERROR", "error_status_code": "400", "error_reason": "bad bit length"}, "error", "bad bit length"),
    ({"status": "ERROR"}, "error", "no reason given"),
])
def test_order_state(order: dict[str, Any], state: str, detail: str) -> None:
    got_state, got_detail = bk.order_state(order)
    assert got_state == state and detail in got_detail


def test_key_view_never_carries_a_payload() -> None:
    view = bk.key_view(secret(payload="c2VjcmV0"))
    assert view["id"] == UUID and view["bit_length"] == 256
    assert "payload" not in view and "c2VjcmV0" not in repr(view)
    assert set(bk.predicted_key_view("x")) == set(view)


@pytest.mark.parametrize("body,users,project_access", [
    (None, (), True),
    ({"read": {"project-access": True}}, (), True),
    ({"read": {"users": ["b", "a", "a"], "project-access": False, "created": "x"}}, ("a", "b"), False),
    ({"read": {"users": ["u1"]}}, ("u1",), True),
])
def test_parse_acl(body: dict[str, Any] | None, users: tuple[str, ...], project_access: bool) -> None:
    assert bk.parse_acl(body) == bk.Acl(users, project_access)


@pytest.mark.parametrize("current,users,state,project_access,expected", [
    (bk.Acl(), ["u1"], "present", None, bk.Acl(("u1",), True)),
    (bk.Acl(("u1",)), ["u1"], "present", None, bk.Acl(("u1",), True)),  # idempotent
    (bk.Acl(("u2",)), ["u1"], "present", None, bk.Acl(("u1", "u2"), True)),  # keeps others
    (bk.Acl(("u1", "u2")), ["u1"], "absent", None, bk.Acl(("u2",), True)),
    (bk.Acl(("u2",)), ["u1"], "absent", None, bk.Acl(("u2",), True)),  # idempotent
    (bk.Acl(("u1",), True), [], "present", False, bk.Acl(("u1",), False)),
    (bk.Acl(("u1",), False), ["u1"], "present", None, bk.Acl(("u1",), False)),  # None keeps it
])
def test_plan_acl(current: bk.Acl, users: list[str], state: str, project_access: bool | None,
                  expected: bk.Acl) -> None:
    assert bk.plan_acl(current, users, state, project_access) == expected


def test_plan_acl_rejects_an_unknown_state() -> None:
    with pytest.raises(bk.InputError, match="acl_state"):
        bk.plan_acl(bk.Acl(), ["u"], "gone", None)


def test_acl_request_body_is_barbicans_shape() -> None:
    assert bk.Acl(("u1",), False).request_body() == {"read": {"users": ["u1"], "project-access": False}}


NETWORKS = bk.parse_networks(["10.20.0.0/24", "10.96.0.0/12", "10.244.0.0/16", "203.0.113.10", "fd00:10::/64"])


@pytest.mark.parametrize("url,resolved,domain,inside", [
    # outside: the lab's Barbican, a public one
    ("http://127.0.0.1:29311", ["127.0.0.1"], "cluster.local", []),
    ("https://kms.example.com/key-manager", ["198.51.100.7"], "cluster.local", []),
    # node network, service CIDR, pod CIDR, the cluster's LB address, IPv6
    ("http://10.20.0.15:9311", ["10.20.0.15"], "cluster.local", ["10.20.0.0/24"]),
    ("http://barbican.example.com:9311", ["10.100.3.4"], "cluster.local", ["10.96.0.0/12"]),
    ("http://barbican.example.com:9311", ["198.51.100.7", "10.244.1.2"], "cluster.local", ["10.244.0.0/16"]),
    ("https://kms.example.com", ["203.0.113.10"], "cluster.local", ["203.0.113.10/32"]),
    ("http://[fd00:10::5]:9311", ["fd00:10::5"], None, ["fd00:10::/64"]),
    # in-cluster DNS names, whatever they resolve to
    ("http://barbican-api.openstack.svc:9311", [], "cluster.local", ["*.svc"]),
    ("http://barbican-api.openstack.svc.cluster.local:9311", [], "cluster.local", ["*.svc"]),
    ("http://barbican.openstack.svc.prod.example:9311", [], "prod.example", ["*.svc"]),
    ("http://kms.pod.prod.example:9311", [], "prod.example", ["*.prod.example"]),
    ("http://KMS.POD.PROD.EXAMPLE.:9311", [], "prod.example", ["*.prod.example"]),
    # a name that merely contains the domain is not under it
    ("http://notcluster.local:9311", ["198.51.100.7"], "cluster.local", []),
    ("http://svc.example.com:9311", ["198.51.100.7"], "cluster.local", []),
])
def test_endpoint_inside_cluster(url: str, resolved: list[str], domain: str | None, inside: list[str]) -> None:
    reasons = bk.endpoint_inside_cluster(url, resolved, NETWORKS, domain)
    assert len(reasons) == len(inside)
    for reason, where in zip(reasons, inside):
        assert where in reason


def test_endpoint_refusal_says_why_and_what_to_do() -> None:
    message = bk.endpoint_refusal("http://10.20.0.15:9311", ["'10.20.0.15' resolves to 10.20.0.15, inside x"])
    assert "http://10.20.0.15:9311" in message and "deadlocks" in message and "outside this cluster" in message


@pytest.mark.parametrize("value", ["10.0.0.0/33", "cluster", "", "10.0.0.1/abc"])
def test_parse_networks_rejects_garbage(value: str) -> None:
    with pytest.raises(bk.InputError, match="cluster_networks"):
        bk.parse_networks([value])


def test_endpoint_without_host_is_an_input_error() -> None:
    with pytest.raises(bk.InputError, match="no host"):
        bk.endpoint_inside_cluster("/v1", [], [], None)


META = {"name": "prod-kms", "status": "ACTIVE"}


@pytest.mark.parametrize("meta_status,meta,payload_status,payload_bytes,reachable,words", [
    (200, META, 200, 32, True, ["'prod-kms'", UUID, "32-byte payload", "user u1"]),
    (200, META, None, None, True, ["payload not fetched", "user u1"]),
    (403, None, None, None, False, ["HTTP 403", "read ACL", UUID, "user u1"]),
    (404, None, None, None, False, ["HTTP 404"]),
    (401, None, None, None, False, ["HTTP 401"]),
    (500, None, None, None, False, ["HTTP 500"]),
    (200, {**META, "status": "ERROR"}, None, None, False, ["ERROR, not ACTIVE"]),
    (200, META, 403, None, False, ["payload is not", "HTTP 403", "user u1"]),
    (200, META, 200, 16, False, ["16 bytes", "needs 32"]),
])
def test_reachability(meta_status: int, meta: dict[str, Any] | None, payload_status: int | None,
                      payload_bytes: int | None, reachable: bool, words: list[str]) -> None:
    verdict = bk.reachability(UUID, meta_status, meta, payload_status, payload_bytes, "user u1")
    assert verdict.reachable is reachable
    for word in words:
        assert word in verdict.reason
