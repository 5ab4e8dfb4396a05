"""keystone_app_credential against the lab's real Keystone: every state, check mode, diff, each bad input.

The module's claims are checked independently, through openstacksdk and real token requests.
"""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import openstack
import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._keystone import (
    authenticate_application_credential,
)
from ansible_collections.deployopen.k8s_openstack.plugins.modules import keystone_app_credential as mod

from labtest import USER_CLOUD, ModuleRunner, list_family

ROLES = ["member", "load-balancer_member"]


def args(name: str, **extra: Any) -> dict[str, Any]:
    return {"cloud": USER_CLOUD, "name": name, **extra}


def authenticates(url: str, cred_id: str, secret: str) -> bool:
    return authenticate_application_credential(url, cred_id, secret).authenticated


def test_present_creates_then_is_idempotent(run_module: ModuleRunner, family: str, keystone_url: str,
                                            user_conn: openstack.connection.Connection) -> None:
    first = run_module(mod.main, args(family, roles=ROLES, description="ccm"), diff=True)
    assert first["changed"] is True
    created = first["application_credential"]
    assert created["name"] == family and created["secret"]
    assert created["roles"] == ["load-balancer_member", "member", "reader"]  # member implies reader
    assert first["diff"]["before"] == {} and "secret" not in first["diff"]["after"]
    assert first["auth_url"] == keystone_url
    assert authenticates(keystone_url, created["id"], created["secret"])

    second = run_module(mod.main, args(family, roles=ROLES, description="ccm"))
    assert second["changed"] is False
    assert second["application_credential"]["id"] == created["id"]
    assert "secret" not in second["application_credential"]
    assert [c.id for c in list_family(user_conn, family)] == [created["id"]]


def test_check_mode_predicts_and_changes_nothing(
        run_module: ModuleRunner, family: str, user_conn: openstack.connection.Connection) -> None:
    predicted = run_module(mod.main, args(family, roles=["member"]), check=True, diff=True)
    assert predicted["changed"] is True
    assert predicted["application_credential"]["name"] == family
    assert predicted["diff"]["after"]["roles"] == ["member", "reader"]
    assert list_family(user_conn, family) == []

    run_module(mod.main, args(family, roles=["member"]))
    again = run_module(mod.main, args(family, roles=["member"]), check=True)
    assert again["changed"] is False


def test_caller_supplied_secret(run_module: ModuleRunner, family: str, keystone_url: str) -> None:
    secret = "caller-chosen-" + family
    result = run_module(mod.main, args(family, secret=secret))
    assert result["changed"] is True
    assert authenticates(keystone_url, result["application_credential"]["id"], secret)


def test_drift_fails_with_rotate_advice_unless_recreate(run_module: ModuleRunner, family: str, keystone_url: str,
                                                        user_conn: openstack.connection.Connection) -> None:
    original = run_module(mod.main, args(family, description="v1"))["application_credential"]
    drifted = run_module(mod.main, args(family, description="v2"))
    assert drifted["failed"] is True
    assert "state=rotated" in drifted["msg"] and "description" in drifted["msg"]
    assert drifted["drift"] == {"description": {"before": "v1", "after": "v2"}}
    assert [c.id for c in list_family(user_conn, family)] == [original["id"]]  # untouched
    assert authenticates(keystone_url, original["id"], original["secret"])

    recreated = run_module(mod.main, args(family, description="v2", recreate_on_drift=True))
    assert recreated["changed"] is True and recreated["application_credential"]["id"] != original["id"]
    assert recreated["application_credential"]["description"] == "v2"
    assert not authenticates(keystone_url, original["id"], original["secret"])


def test_rotate_verifies_successor_and_leaves_predecessor(run_module: ModuleRunner, family: str, keystone_url: str,
                                                          user_conn: openstack.connection.Connection) -> None:
    base = run_module(mod.main, args(family, roles=ROLES))["application_credential"]
    rotated = run_module(mod.main, args(family, state="rotated", roles=ROLES), diff=True)
    successor = rotated["application_credential"]
    assert rotated["changed"] is True
    assert successor["name"].startswith(family + "-") and successor["name"] != family
    assert rotated["verification"]["authenticated"] is True
    assert rotated["verification"]["project_id"] == successor["project_id"]
    assert set(ROLES) <= set(rotated["verification"]["roles"])
    assert [p["id"] for p in rotated["predecessors"]] == [base["id"]]
    assert rotated["retired"] == []
    assert rotated["diff"]["after"]["family"] == [family, successor["name"]]
    # Blue/green: both work until something retires the old one.
    assert authenticates(keystone_url, base["id"], base["secret"])
    assert authenticates(keystone_url, successor["id"], successor["secret"])
    assert len(list_family(user_conn, family)) == 2


def test_rotate_with_retire_keeps_the_newest(run_module: ModuleRunner, family: str, keystone_url: str,
                                             user_conn: openstack.connection.Connection) -> None:
    gen0 = run_module(mod.main, args(family))["application_credential"]
    gen1 = run_module(mod.main, args(family, state="rotated"))["application_credential"]
    gen2 = run_module(mod.main, args(family, state="rotated"))["application_credential"]
    predicted = run_module(mod.main, args(family, state="rotated", retire=True, keep=2), check=True)
    assert [r["id"] for r in predicted["retired"]] == [gen0["id"], gen1["id"]]
    assert len(list_family(user_conn, family)) == 3  # check mode deleted nothing

    result = run_module(mod.main, args(family, state="rotated", retire=True, keep=2))
    gen3 = result["application_credential"]
    assert [r["id"] for r in result["retired"]] == [gen0["id"], gen1["id"]]
    assert {c.id for c in list_family(user_conn, family)} == {gen2["id"], gen3["id"]}
    assert not authenticates(keystone_url, gen0["id"], gen0["secret"])
    assert authenticates(keystone_url, gen2["id"], gen2["secret"])


def test_rotated_check_mode_creates_nothing(run_module: ModuleRunner, family: str,
                                            user_conn: openstack.connection.Connection) -> None:
    run_module(mod.main, args(family))
    predicted = run_module(mod.main, args(family, state="rotated"), check=True)
    assert predicted["changed"] is True
    assert predicted["application_credential"]["name"].startswith(family + "-")
    assert "secret" not in predicted["application_credential"] and "verification" not in predicted
    assert [c.name for c in list_family(user_conn, family)] == [family]


def test_absent_by_name_and_by_id(run_module: ModuleRunner, family: str,
                                  user_conn: openstack.connection.Connection) -> None:
    first = run_module(mod.main, args(family))["application_credential"]
    check = run_module(mod.main, args(family, state="absent"), check=True)
    assert check["changed"] is True and len(list_family(user_conn, family)) == 1
    gone = run_module(mod.main, args(family, state="absent"), diff=True)
    assert gone["changed"] is True and gone["application_credential"]["id"] == first["id"]
    assert gone["diff"]["after"] == {}
    assert list_family(user_conn, family) == []
    assert run_module(mod.main, args(family, state="absent"))["changed"] is False

    second = run_module(mod.main, args(family))["application_credential"]
    by_id = run_module(mod.main, {"cloud": USER_CLOUD, "id": second["id"], "state": "absent"})
    assert by_id["changed"] is True and list_family(user_conn, family) == []
    assert run_module(mod.main, {"cloud": USER_CLOUD, "id": second["id"], "state": "absent"})["changed"] is False


# ------------------------------------------------------------------ bad input: clear errors, nothing lost

def past() -> str:
    return (datetime.now(timezone.utc) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("extra,fragments", [
    ({"roles": ["member", "no-such-role"]}, ["unknown role(s) no-such-role", "holds", "Ask an administrator"]),
    ({"roles": ["admin"]}, ["unknown role(s) admin"]),
    ({"expires_at": "soon"}, ["expires_at 'soon' is not an ISO 8601 time"]),
    ({"expires_at": "PAST"}, ["is in the past"]),
    ({"name": "n" * 256}, ["256 characters long; use at most 255"]),
    ({"name": "n" * 236, "state": "rotated"}, ["use at most 235", "suffix"]),
    ({"state": "rotated", "keep": 0, "retire": True}, ["keep must be at least 1"]),
    ({"state": "rotated", "retire": True, "verify_successor": False}, ["retire=true needs verify_successor=true"]),
])
def test_bad_input_fails_clearly_and_creates_nothing(run_module: ModuleRunner, family: str, extra: dict[str, Any],
                                                     fragments: list[str],
                                                     user_conn: openstack.connection.Connection) -> None:
    if extra.get("expires_at") == "PAST":
        extra = {**extra, "expires_at": past()}
    result = run_module(mod.main, {"cloud": USER_CLOUD, "name": family, **extra})
    assert result["failed"] is True
    for fragment in fragments:
        assert fragment in result["msg"]
    assert "Traceback" not in result["msg"]
    assert list_family(user_conn, family) == []


def test_wrong_credentials(run_module: ModuleRunner, family: str, keystone_url: str) -> None:
    bad_password = "wrong-password-" + family
    result = run_module(mod.main, {"name": family, "auth_type": "password", "auth": {
        "auth_url": keystone_url, "username": "k8s-cluster-cloud-provider", "password": bad_password,
        "project_name": "k8s-cluster", "user_domain_name": "Default", "project_domain_name": "Default"}})
    assert result["failed"] is True
    assert f"{keystone_url} rejected the credentials (HTTP 401)" in result["msg"]
    assert bad_password not in str(result)


def test_unknown_cloud_name(run_module: ModuleRunner, family: str) -> None:
    result = run_module(mod.main, {"cloud": "no-such-cloud", "name": family})
    assert result["failed"] is True and "clouds.yaml" in result["msg"] and "no-such-cloud" in result["msg"]


def test_keystone_unreachable_names_the_url(run_module: ModuleRunner, family: str) -> None:
    url = "http://127.0.0.1:9/v3"  # discard port: nothing listens
    result = run_module(mod.main, {"name": family, "auth_type": "password", "api_timeout": 5, "auth": {
        "auth_url": url, "username": "someone", "password": "not-a-real-password", "project_name": "nowhere",
        "user_domain_name": "Default", "project_domain_name": "Default"}})
    assert result["failed"] is True
    assert f"cannot reach {url}" in result["msg"] and "Check the auth_url" in result["msg"]


# ------------------------------------------------------------------ failure mid-rotation leaves predecessors

class _RefuseAppCredentialTokens(http.server.BaseHTTPRequestHandler):
    """A reverse proxy to the real Keystone that refuses only application-credential logins (HTTP 401)."""

    upstream = ""

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.command == "POST" and self.path.endswith("/auth/tokens") and body and b"application_credential" in body:
            payload = b'{"error": {"code": 401, "title": "Unauthorized", "message": "refused by the fault proxy"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        request = urllib.request.Request(self.upstream + self.path, data=body, method=self.command,
                                         headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310 - loopback lab
                status, headers, data = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as err:
            status, headers, data = err.code, err.headers, err.read()
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_proxy(keystone_url: str) -> Iterator[str]:
    handler = type("Handler", (_RefuseAppCredentialTokens,), {"upstream": keystone_url.rsplit("/v3", 1)[0]})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v3"
    server.shutdown()


def test_failed_verification_deletes_successor_and_keeps_predecessors(
        run_module: ModuleRunner, family: str, keystone_url: str, refusing_proxy: str,
        user_conn: openstack.connection.Connection) -> None:
    base = run_module(mod.main, args(family))["application_credential"]
    cloud = user_conn.config.config
    auth = {**cloud["auth"], "auth_url": refusing_proxy}
    result = run_module(mod.main, {"name": family, "state": "rotated", "retire": True, "keep": 1,
                                   "auth_type": "password", "auth": auth})
    assert result["failed"] is True
    assert "failed verification" in result["msg"] and "every predecessor is untouched" in result["msg"]
    assert [c.id for c in list_family(user_conn, family)] == [base["id"]]
    assert authenticates(keystone_url, base["id"], base["secret"])
