"""barbican_kms_key and the barbican_kms role against the lab's real Barbican (and Keystone).

Every claim of the module is checked independently through Barbican's REST API with openstacksdk: the
key's algorithm and size, its ACL, whether a second user can really read it. Each test uses its own
cluster name and deletes its keys afterwards (through the module's explicit opt-in, with a raw delete as
the safety net).
"""

from __future__ import annotations

import base64
import os
import re
import secrets as pysecrets
import stat
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import openstack
import pytest
import yaml
from k8s_fixtures import KUBECTL
from labtest import ADMIN_CLOUD, CLOUDS_YAML, REPO, USER_CLOUD, ModuleRunner, ansible_playbook, free_port

from ansible_collections.deployopen.k8s_openstack.plugins.modules import barbican_kms_key as mod

GOLDEN = REPO / "tests" / "integration" / "golden" / "barbican_kms"
PLAYBOOK = "tests/integration/playbooks/barbican_kms.yml"
CHECK_PLAYBOOK = "tests/integration/playbooks/barbican_kms_check.yml"


# ------------------------------------------------------------------ helpers (independent of the module)

def raw(conn: Any, method: str, path: str, **kwargs: Any) -> Any:
    kwargs.setdefault("headers", {"Accept": "application/json"})
    return conn.key_manager.request(path, method, **kwargs)


def secrets_named(conn: Any, name: str) -> list[dict[str, Any]]:
    return list(raw(conn, "GET", "/secrets", params={"name": name, "limit": 100}).json()["secrets"])


def acl_of(conn: Any, key_id: str) -> dict[str, Any]:
    return dict(raw(conn, "GET", f"/secrets/{key_id}/acl").json()["read"])


def payload_of(conn: Any, key_id: str) -> bytes:
    response = raw(conn, "GET", f"/secrets/{key_id}/payload", headers={"Accept": "application/octet-stream"})
    assert response.status_code == 200, response.status_code
    return bytes(response.content)


def order_key(conn: Any, name: str) -> str:
    """A second key with the same name, ordered behind the module's back."""
    body = {"type": "key", "meta": {"name": name, "algorithm": "aes", "bit_length": 256, "mode": "cbc",
                                    "payload_content_type": "application/octet-stream"}}
    order_ref = raw(conn, "POST", "/orders", json=body).json()["order_ref"]
    for _attempt in range(60):
        order = raw(conn, "GET", "/orders/" + order_ref.rsplit("/", 1)[-1]).json()
        if order["status"] == "ACTIVE":
            return str(order["secret_ref"])
        time.sleep(0.5)
    raise AssertionError(f"order {order_ref} did not become ACTIVE")


def delete_named(conn: Any, name: str) -> None:
    for found in secrets_named(conn, name):
        raw(conn, "DELETE", "/secrets/" + found["secret_ref"].rsplit("/", 1)[-1])


def cloud_entry(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load(CLOUDS_YAML.read_text())["clouds"][name])


def owner(**extra: Any) -> dict[str, Any]:
    return {"cloud": USER_CLOUD, **extra}


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def lab_barbican(user_conn: openstack.connection.Connection) -> openstack.connection.Connection:
    """The lab's Barbican answers (a missing Barbican fails the tests; it is never skipped)."""
    try:
        status = raw(user_conn, "GET", "/secrets", params={"limit": 1}).status_code
    except Exception as exc:  # noqa: BLE001 - any failure means the lab is not usable
        pytest.fail(f"the lab's Barbican does not answer ({exc}): run `make lab-up`", pytrace=False)
    assert status == 200
    return user_conn


@pytest.fixture
def cluster(lab_barbican: openstack.connection.Connection, run_module: ModuleRunner) -> Iterator[str]:
    """A cluster name of its own; its key is deleted afterwards with the module's explicit opt-in."""
    name = f"it-bk-{uuid.uuid4().hex[:8]}"
    yield name
    if secrets_named(lab_barbican, f"{name}-kms"):
        result = run_module(mod.main, owner(cluster_name=name, state="absent", allow_key_deletion=True))
        assert result.get("changed") is True or "ACTIVE secrets" in result.get("msg", ""), result
    delete_named(lab_barbican, f"{name}-kms")  # safety net: duplicates made on purpose


@pytest.fixture(scope="module")
def reader(lab_barbican: openstack.connection.Connection) -> Iterator[dict[str, Any]]:
    """A throwaway user with the member role on the cluster's project: the stand-in for the plugin."""
    identity: Any = openstack.connect(cloud=ADMIN_CLOUD).identity
    project = identity.find_project("k8s-cluster", ignore_missing=False)
    password = pysecrets.token_urlsafe(18)
    user = identity.create_user(name=f"it-bk-reader-{uuid.uuid4().hex[:8]}", password=password,
                                domain_id="default", default_project_id=project.id)
    identity.assign_project_role_to_user(project, user, identity.find_role("member", ignore_missing=False))
    auth = {"auth_url": cloud_entry(USER_CLOUD)["auth"]["auth_url"], "username": user.name, "password": password,
            "project_name": "k8s-cluster", "user_domain_name": "Default", "project_domain_name": "Default"}
    yield {"auth": auth, "auth_type": "password", "user_id": user.id, "password": password}
    identity.delete_user(user)


def as_reader(reader: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"state": "checked", "auth": reader["auth"], "auth_type": "password", "region_name": "RegionOne", **extra}


# ------------------------------------------------------------------ the module

def test_check_mode_then_create_then_find(run_module: ModuleRunner, cluster: str,
                                          lab_barbican: openstack.connection.Connection) -> None:
    predicted = run_module(mod.main, owner(cluster_name=cluster), check=True, diff=True)
    assert predicted["changed"] is True, predicted
    assert predicted["key"]["name"] == f"{cluster}-kms" and predicted["key"]["id"] is None
    assert predicted["diff"]["before"] == {}
    assert secrets_named(lab_barbican, f"{cluster}-kms") == []  # check mode ordered nothing

    created = run_module(mod.main, owner(cluster_name=cluster))
    assert created["changed"] is True, created
    key = created["key"]
    assert created["endpoint"].startswith("http://127.0.0.1:29311")
    assert created["endpoint_addresses"] == ["127.0.0.1"]
    # Barbican's own view: one AES-256 CBC symmetric key of that name, 32 bytes of payload.
    [stored] = secrets_named(lab_barbican, f"{cluster}-kms")
    assert stored["secret_ref"] == key["href"] and stored["secret_ref"].endswith(key["id"])
    assert (stored["algorithm"], stored["bit_length"], stored["mode"], stored["secret_type"]) == \
        ("aes", 256, "cbc", "symmetric")
    assert len(payload_of(lab_barbican, key["id"])) == 32
    assert "payload" not in key

    again = run_module(mod.main, owner(cluster_name=cluster))
    assert again["changed"] is False, again
    assert again["key"]["id"] == key["id"]
    assert again["acl"] == {"users": [], "project_access": True}
    assert len(secrets_named(lab_barbican, f"{cluster}-kms")) == 1


def test_acl_grant_revoke_and_reachability(run_module: ModuleRunner, cluster: str, reader: dict[str, Any],
                                           lab_barbican: openstack.connection.Connection) -> None:
    key = run_module(mod.main, owner(cluster_name=cluster, project_access=False))["key"]
    assert acl_of(lab_barbican, key["id"]).get("project-access") is False
    # Not on the ACL and the key is private: the reader is refused.
    before = run_module(mod.main, as_reader(reader, key_id=key["id"]))
    assert before["reachable"] is False and before["http_status"] == 403, before
    assert before["user_id"] == reader["user_id"]

    args = owner(cluster_name=cluster, read_users=[reader["user_id"]])
    predicted = run_module(mod.main, args, check=True, diff=True)
    assert predicted["changed"] is True and predicted["acl"]["users"] == [reader["user_id"]]
    assert predicted["diff"]["before"]["acl"]["users"] == []
    assert acl_of(lab_barbican, key["id"]).get("users", []) == []  # check mode changed nothing

    granted = run_module(mod.main, args)
    assert granted["changed"] is True and granted["acl"] == {"users": [reader["user_id"]], "project_access": False}
    assert acl_of(lab_barbican, key["id"])["users"] == [reader["user_id"]]
    assert run_module(mod.main, args)["changed"] is False

    reachable = run_module(mod.main, as_reader(reader, key_id=key["href"]))
    assert reachable["reachable"] is True, reachable
    assert reachable["http_status"] == 200 and reachable["payload_bytes"] == 32
    assert reachable["payload_retrievable"] is True
    assert reachable["payload_content_type"] == "application/octet-stream"
    assert key["id"] in reachable["reason"] and f"{cluster}-kms" in reachable["reason"]

    revoke = owner(cluster_name=cluster, read_users=[reader["user_id"]], acl_state="absent")
    assert run_module(mod.main, revoke, check=True)["changed"] is True
    assert acl_of(lab_barbican, key["id"])["users"] == [reader["user_id"]]
    revoked = run_module(mod.main, revoke)
    assert revoked["changed"] is True and revoked["acl"]["users"] == []
    assert acl_of(lab_barbican, key["id"]).get("users", []) == []
    assert run_module(mod.main, revoke)["changed"] is False

    after = run_module(mod.main, as_reader(reader, key_id=key["id"]))
    assert after["reachable"] is False and after["http_status"] == 403, after
    assert key["id"] in after["reason"] and "403" in after["reason"]
    failed = run_module(mod.main, as_reader(reader, key_id=key["id"], fail_when_unreachable=True))
    assert failed["failed"] is True and "403" in failed["msg"]


def test_two_keys_with_the_name_fail_with_their_hrefs(run_module: ModuleRunner, cluster: str,
                                                      lab_barbican: openstack.connection.Connection) -> None:
    first = run_module(mod.main, owner(cluster_name=cluster))["key"]["href"]
    second = order_key(lab_barbican, f"{cluster}-kms")
    result = run_module(mod.main, owner(cluster_name=cluster))
    assert result["failed"] is True
    assert "2 ACTIVE secrets" in result["msg"] and first in result["msg"] and second in result["msg"]
    deleting = run_module(mod.main, owner(cluster_name=cluster, state="absent", allow_key_deletion=True))
    assert deleting["failed"] is True and second in deleting["msg"]  # no guessing which one to delete either
    assert len(secrets_named(lab_barbican, f"{cluster}-kms")) == 2


def test_deleting_the_key_needs_the_opt_in(run_module: ModuleRunner, cluster: str,
                                           lab_barbican: openstack.connection.Connection) -> None:
    key = run_module(mod.main, owner(cluster_name=cluster))["key"]
    refused = run_module(mod.main, owner(cluster_name=cluster, state="absent"))
    assert refused["failed"] is True and "allow_key_deletion" in refused["msg"] and key["href"] in refused["msg"]
    predicted = run_module(mod.main, owner(key_id=key["id"], state="absent", allow_key_deletion=True), check=True)
    assert predicted["changed"] is True and predicted["key"]["id"] == key["id"]
    assert len(secrets_named(lab_barbican, f"{cluster}-kms")) == 1
    deleted = run_module(mod.main, owner(key_id=key["id"], state="absent", allow_key_deletion=True))
    assert deleted["changed"] is True
    assert raw(lab_barbican, "GET", f"/secrets/{key['id']}").status_code == 404
    gone = run_module(mod.main, owner(cluster_name=cluster, state="absent", allow_key_deletion=True))
    assert gone["changed"] is False


def test_unreachable_barbican_fails_clearly(run_module: ModuleRunner, cluster: str,
                                            lab_barbican: openstack.connection.Connection) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    cloud = {**cloud_entry(USER_CLOUD), "key_manager_endpoint_override": closed}
    result = run_module(mod.main, {"cloud": cloud, "cluster_name": cluster})
    assert result["failed"] is True
    assert "cannot reach" in result["msg"] and closed in result["msg"], result["msg"]
    assert "Traceback" not in result["msg"]
    measured = run_module(mod.main, {"cloud": cloud, "state": "checked", "key_id": str(uuid.uuid4())})
    assert measured["reachable"] is False and measured["http_status"] is None
    assert "cannot reach" in measured["reason"] and closed in measured["reason"]
    assert secrets_named(lab_barbican, f"{cluster}-kms") == []


@pytest.mark.parametrize("override,extra,why", [
    # The lab's Barbican is on 127.0.0.1: declared as a cluster address it must be refused.
    (None, {"cluster_networks": ["10.20.0.0/24", "127.0.0.0/8"]}, "inside the cluster's 127.0.0.0/8"),
    (None, {"cluster_networks": ["127.0.0.1"]}, "inside the cluster's 127.0.0.1/32"),
    ("http://barbican-api.openstack.svc.cluster.local:29311/v1", {}, "cluster's DNS"),
    ("http://barbican.openstack.svc.lab-k8s.example:29311/v1", {"cluster_dns_domain": "lab-k8s.example"},
     "cluster's DNS"),
])
def test_endpoint_inside_the_cluster_is_refused(run_module: ModuleRunner, cluster: str,
                                                lab_barbican: openstack.connection.Connection,
                                                override: str | None, extra: dict[str, Any], why: str) -> None:
    cloud: Any = USER_CLOUD if override is None else {**cloud_entry(USER_CLOUD),
                                                      "key_manager_endpoint_override": override}
    result = run_module(mod.main, {"cloud": cloud, "cluster_name": cluster, **extra})
    assert result["failed"] is True and why in result["msg"], result["msg"]
    assert "deadlocks on restart" in result["msg"]
    assert secrets_named(lab_barbican, f"{cluster}-kms") == []


@pytest.mark.parametrize("args,words", [
    ({}, "cluster_name"),
    ({"name": "x" * 256}, "255"),
    ({"cluster_name": "c", "cluster_networks": ["10.0.0.0/33"]}, "cluster_networks"),
    ({"state": "checked", "key_id": "not-a-uuid"}, "not-a-uuid"),
    ({"cluster_name": "c", "wait_timeout": 0}, "wait_timeout"),
])
def test_bad_input_fails_before_any_call(run_module: ModuleRunner, args: dict[str, Any], words: str) -> None:
    # An unreachable cloud proves no call was made: validation comes first.
    result = run_module(mod.main, {"cloud": {"auth": {"auth_url": f"http://127.0.0.1:{free_port()}/v3"}}, **args})
    assert result["failed"] is True and words in result["msg"], result


# ------------------------------------------------------------------ the role, through ansible-playbook

def mask(text: str, replacements: dict[str, str]) -> str:
    for value, placeholder in replacements.items():
        text = text.replace(value, placeholder)
    return re.sub(r"\b[0-9a-f]{64}\b", "<SHA256>", text)


def changed_count(stdout: str) -> int:
    return sum(int(n) for n in re.findall(r"changed=(\d+)", stdout))


@pytest.fixture(scope="module")
def role_runs(tmp_path_factory: pytest.TempPathFactory,
              lab_barbican: openstack.connection.Connection) -> Iterator[dict[str, Any]]:
    """Check mode, a first run, a second run (-vvv, for the leak test) of the role, in one fresh cluster."""
    tmp = tmp_path_factory.mktemp("barbican_kms")
    name = f"it-bk-{uuid.uuid4().hex[:8]}"
    out = tmp / "out"
    extra = ["-e", f"barbican_kms_cluster_name={name}", "-e", f"barbican_kms_output_dir={out}"]
    runs: dict[str, Any] = {"name": name, "out": out, "check": ansible_playbook(PLAYBOOK, "--check", "--diff", *extra)}
    runs["after_check"] = {"out_exists": out.exists(), "keys": len(secrets_named(lab_barbican, f"{name}-kms"))}
    runs["first"] = ansible_playbook(PLAYBOOK, *extra)
    runs["second"] = ansible_playbook(PLAYBOOK, "-vvv", *extra)
    yield runs
    delete_named(lab_barbican, f"{name}-kms")


def test_role_check_mode_writes_nothing(role_runs: dict[str, Any]) -> None:
    check = role_runs["check"]
    assert check.returncode == 0, check.stdout[-3000:]
    assert changed_count(check.stdout) > 0  # it predicts the key order and the files
    assert role_runs["after_check"] == {"out_exists": False, "keys": 0}


def test_role_creates_renders_and_is_idempotent(role_runs: dict[str, Any],
                                                lab_barbican: openstack.connection.Connection) -> None:
    first, second = role_runs["first"], role_runs["second"]
    assert first.returncode == 0, first.stdout[-4000:]
    assert second.returncode == 0, second.stdout[-4000:]
    assert changed_count(first.stdout) > 0
    assert changed_count(second.stdout) == 0, second.stdout[-4000:]
    [stored] = secrets_named(lab_barbican, f"{role_runs['name']}-kms")
    key_id = stored["secret_ref"].rsplit("/", 1)[-1]
    conf = (role_runs["out"] / "cloud.conf").read_text()
    assert f'key-id = "{key_id}"' in conf
    assert stat.S_IMODE(os.stat(role_runs["out"] / "cloud.conf").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(role_runs["out"]).st_mode) == 0o700
    # The plugin's user (the lab's cluster user) is on the key's ACL.
    assert acl_of(lab_barbican, key_id)["users"] == [lab_barbican.current_user_id]


def test_rendered_files_match_the_golden_files(role_runs: dict[str, Any],
                                               lab_barbican: openstack.connection.Connection) -> None:
    [stored] = secrets_named(lab_barbican, f"{role_runs['name']}-kms")
    password = cloud_entry(USER_CLOUD)["auth"]["password"]
    replacements = {stored["secret_ref"].rsplit("/", 1)[-1]: "<KEY_ID>", password: "<PASSWORD>",
                    role_runs["name"]: "<CLUSTER>"}
    rendered = sorted(p.name for p in role_runs["out"].iterdir())
    if os.environ.get("UPDATE_GOLDEN") == "1":  # then review the diff before committing
        for name in rendered:
            (GOLDEN / name).write_text(mask((role_runs["out"] / name).read_text(), replacements))
    assert rendered == sorted(p.name for p in GOLDEN.iterdir())
    for name in rendered:
        assert mask((role_runs["out"] / name).read_text(), replacements) == (GOLDEN / name).read_text(), name
    # Positive control: the password was there to mask (the file holds the real credential).
    needle_is_real = password in (role_runs["out"] / "cloud.conf").read_text()  # no secret in a failure message
    assert needle_is_real
    # What kube-apiserver and the kubelet will read, independent of how the golden files look.
    config = yaml.safe_load((role_runs["out"] / "encryption-config.yaml").read_text())
    assert (config["apiVersion"], config["kind"]) == ("apiserver.config.k8s.io/v1", "EncryptionConfiguration")
    [resource] = config["resources"]
    assert resource["resources"] == ["secrets"]
    assert resource["providers"] == [{"kms": {"apiVersion": "v2", "name": "barbican", "timeout": "10s",
                                              "endpoint": "unix:///var/lib/kms/kms.sock"}}, {"identity": {}}]
    pod = yaml.safe_load((role_runs["out"] / "barbican-kms-plugin.yaml").read_text())
    [container] = pod["spec"]["containers"]
    assert container["args"] == ["--socketpath=/var/lib/kms/kms.sock",
                                 "--cloud-config=/etc/kubernetes/barbican-kms/cloud.conf"]
    mounts = {v["name"]: v["hostPath"]["path"] for v in pod["spec"]["volumes"]}
    assert mounts == {"cloud-config": "/etc/kubernetes/barbican-kms", "socket-dir": "/var/lib/kms"}


def test_no_secret_in_verbose_output(role_runs: dict[str, Any], reader: dict[str, Any], run_module: ModuleRunner,
                                     lab_barbican: openstack.connection.Connection) -> None:
    [stored] = secrets_named(lab_barbican, f"{role_runs['name']}-kms")
    payload = payload_of(lab_barbican, stored["secret_ref"].rsplit("/", 1)[-1])
    password = cloud_entry(USER_CLOUD)["auth"]["password"]
    forbidden = [password, base64.b64encode(payload).decode(), payload.hex()]
    output = "".join(role_runs[run].stdout + role_runs[run].stderr for run in ("check", "first", "second"))
    assert "ESTABLISH LOCAL CONNECTION" in role_runs["second"].stdout  # -vvv really was verbose
    for value in forbidden:
        assert value not in output
    # The module run as the reader: its password masked in the result, no payload in it.
    result = run_module(mod.main, as_reader(reader, key_id=stored["secret_ref"]))
    assert reader["password"] not in repr(result)
    assert base64.b64encode(payload).decode() not in repr(result) and payload.hex() not in repr(result)


def test_check_key_entry_point_reports_for_drills(role_runs: dict[str, Any], reader: dict[str, Any],
                                                  lab_barbican: openstack.connection.Connection) -> None:
    [stored] = secrets_named(lab_barbican, f"{role_runs['name']}-kms")
    key_id = stored["secret_ref"].rsplit("/", 1)[-1]
    ok = ansible_playbook(CHECK_PLAYBOOK, "-e", f"barbican_kms_check_key_id={key_id}")
    assert ok.returncode == 0, ok.stdout[-3000:]
    assert "KMS_REACHABLE=True" in ok.stdout
    # The throwaway user is not on the ACL of this key; with project access it may still read it; the
    # measurement must say what Barbican says, whatever that is.
    reader_vars = Path(role_runs["out"]).parent / "reader.yml"
    reader_vars.write_text(yaml.safe_dump({"barbican_kms_plugin_auth": reader["auth"],
                                           "barbican_kms_plugin_auth_type": "password"}))
    by_reader = ansible_playbook(CHECK_PLAYBOOK, "-e", f"barbican_kms_check_key_id={key_id}",
                                 "-e", f"@{reader_vars}")
    status = raw(openstack.connect(auth=reader["auth"], auth_type="password", region_name="RegionOne"),
                 "GET", f"/secrets/{key_id}").status_code
    assert by_reader.returncode == 0, by_reader.stdout[-3000:]
    assert f"KMS_REACHABLE={status == 200}" in by_reader.stdout
    assert reader["password"] not in by_reader.stdout


def test_check_key_measures_an_unreachable_key_and_fails_when_asked(role_runs: dict[str, Any]) -> None:
    missing = str(uuid.uuid4())
    measured = ansible_playbook(CHECK_PLAYBOOK, "-e", f"barbican_kms_check_key_id={missing}")
    assert measured.returncode == 0, measured.stdout[-3000:]
    assert "KMS_REACHABLE=False" in measured.stdout and "HTTP 404" in measured.stdout and missing in measured.stdout
    failing = ansible_playbook(CHECK_PLAYBOOK, "-e", f"barbican_kms_check_key_id={missing}",
                               "-e", "barbican_kms_check_fail_when_unreachable=true")
    # Extra vars win over the playbook's vars: the entry point now fails, with the reason.
    assert failing.returncode != 0
    assert "the plugin cannot use the key" in failing.stdout and missing in failing.stdout


def test_role_refuses_a_barbican_inside_the_cluster(
        tmp_path: Path, lab_barbican: openstack.connection.Connection) -> None:
    name = f"it-bk-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    proc = ansible_playbook(PLAYBOOK, "-e", f"barbican_kms_cluster_name={name}", "-e", f"barbican_kms_output_dir={out}",
                            "-e", '{"barbican_kms_cluster_networks": ["10.20.0.0/24", "127.0.0.0/8"]}')
    assert proc.returncode != 0
    assert "belongs to the cluster" in proc.stdout and "127.0.0.0/8" in proc.stdout
    assert secrets_named(lab_barbican, f"{name}-kms") == [] and not out.exists()


@pytest.mark.parametrize("plugin_auth,words", [
    ({"auth_url": "http://127.0.0.1:25000/v3", "username": "u"}, "it has auth_url, username."),
    ({"auth_url": "http://127.0.0.1:25000/v3", "application_credential_id": "i",
      "application_credential_secret": "s", "token": "t"}, "; unknown keys: token."),
])
def test_role_rejects_an_incomplete_plugin_credential(tmp_path: Path, plugin_auth: dict[str, Any], words: str,
                                                      lab_barbican: openstack.connection.Connection) -> None:
    name = f"it-bk-{uuid.uuid4().hex[:8]}"
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text(yaml.safe_dump({"barbican_kms_plugin_auth": plugin_auth, "barbican_kms_cluster_name": name,
                                         "barbican_kms_output_dir": str(tmp_path / "out")}))
    proc = ansible_playbook(PLAYBOOK, "-e", f"@{vars_file}")
    assert proc.returncode != 0 and words in proc.stdout, proc.stdout[-2000:]
    assert secrets_named(lab_barbican, f"{name}-kms") == []


def test_rewrite_stores_a_plaintext_secret_encrypted_once(tmp_path: Path) -> None:
    """Against the lab Kubernetes API (which encrypts with the lab cluster's key): a Secret stored in plain text
    before encryption was on is written back by the role and is then encrypted in etcd, reads back the same,
    and carries the key id; a second run writes nothing."""
    import json
    import subprocess

    kubeconfig = Path(os.environ.get("LAB_KUBECONFIG", str(CLOUDS_YAML.parent / "kubeconfig")))
    endpoints = os.environ.get("LAB_ETCD_ENDPOINTS", "http://127.0.0.1:23791").split(",")[0]
    name = f"it-plain-{uuid.uuid4().hex[:8]}"
    key = f"/registry/secrets/default/{name}"
    plain = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": {"k": base64.b64encode(b"plain").decode()},
             "metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4()),
                          "creationTimestamp": "2026-01-01T00:00:00Z"}}

    def etcd_value() -> bytes:
        return subprocess.run(["etcdctl", f"--endpoints={endpoints}", "get", key, "--print-value-only"],
                              env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True, check=True).stdout

    def api_secret() -> dict[str, Any]:
        out = subprocess.run([KUBECTL, f"--kubeconfig={kubeconfig}", "-n", "default", "get", "secret", name,
                              "-o", "json"], capture_output=True, text=True, check=True).stdout
        return dict(json.loads(out))

    subprocess.run(["etcdctl", f"--endpoints={endpoints}", "put", key, json.dumps(plain)],
                   env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True, check=True)
    extra = ["-e", "barbican_kms_rewrite_secrets=true", "-e", f"barbican_kms_output_dir={tmp_path / 'out'}",
             "-e", f"barbican_kms_kubeconfig={kubeconfig}"]
    try:
        assert etcd_value().startswith(b"{")
        first = ansible_playbook(PLAYBOOK, *extra)
        assert first.returncode == 0, first.stdout[-3000:]
        assert etcd_value().startswith(b"k8s:enc:kms:v2:barbican:")
        secret = api_secret()
        assert secret["data"] == plain["data"]
        assert secret["metadata"]["annotations"]["barbican-kms.deployopen.io/key-id"]
        # The envelope names its key (as KMS v2 does) but holds neither the data nor the object in clear.
        assert b"cGxhaW4=" not in etcd_value() and name.encode() not in etcd_value()
        second = ansible_playbook(PLAYBOOK, *extra)
        assert second.returncode == 0 and changed_count(second.stdout) == 0, second.stdout[-3000:]
    finally:
        subprocess.run([KUBECTL, f"--kubeconfig={kubeconfig}", "-n", "default", "delete", "secret", name,
                        "--ignore-not-found"], capture_output=True, check=False)
