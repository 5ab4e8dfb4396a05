"""Secrets encrypted at rest by the lab API server the way kube-apiserver + barbican-kms-plugin (KMS v2) do,
with keys from the lab's real Barbican.

The envelope is checked independently: the test parses the stored protobuf itself, fetches the key from
Barbican with openstacksdk and decrypts with the cryptography primitives (AES-CBC unwrap, AES-GCM open).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import openstack
import pytest
import yaml
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from k8s_fixtures import LabK8s, api_client_for, core_api, start_lab_k8s, stop_lab_k8s
from kubernetes import client
from kubernetes.client import ApiException
from labtest import CLOUDS_YAML, REPO, USER_CLOUD, free_port

from lab.core import CLUSTER_KMS_KEY

PREFIX = b"k8s:enc:kms:v2:barbican:"
SEEDED_KEY = CLUSTER_KMS_KEY  # the key lab/seed_cloud.py orders for the lab cluster


# ------------------------------------------------------------------ helpers independent of lab.k8s.kms

def parse_envelope(data: bytes) -> dict[int, Any]:
    """The fields of a protobuf message (wire types 0 and 2 only), by field number."""
    fields: dict[int, Any] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < len(data):
        tag = varint()
        if tag & 7 == 0:
            fields[tag >> 3] = varint()
        else:
            length = varint()
            fields[tag >> 3] = data[pos:pos + length]
            pos += length
    return fields


def open_envelope(stored: bytes, etcd_key: bytes, kek: bytes) -> tuple[str, dict[str, Any], bytes]:
    """key id, the decrypted object, the wrapped DEK."""
    assert stored.startswith(PREFIX)
    fields = parse_envelope(stored[len(PREFIX):])
    wrapped, data = fields[3], fields[1]
    decryptor = Cipher(algorithms.AES(kek), modes.CBC(wrapped[:16])).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    dek = unpadder.update(decryptor.update(wrapped[16:]) + decryptor.finalize()) + unpadder.finalize()
    assert len(dek) == 32
    plain = AESGCM(dek).decrypt(data[:12], data[12:], etcd_key)
    return fields[2].decode(), json.loads(plain), wrapped


def barbican(conn: Any, method: str, path: str, **kwargs: Any) -> Any:
    kwargs.setdefault("headers", {"Accept": "application/json"})
    return conn.key_manager.request(path, method, **kwargs)


def key_payload(conn: Any, key_id: str) -> bytes:
    response = barbican(conn, "GET", f"/secrets/{key_id}/payload", headers={"Accept": "application/octet-stream"})
    assert response.status_code == 200
    return bytes(response.content)


def write_cloud_conf(path: Path, key_id: str, **overrides: str) -> Path:
    auth = yaml.safe_load(CLOUDS_YAML.read_text())["clouds"][USER_CLOUD]["auth"]
    values = {"auth-url": auth["auth_url"], "username": auth["username"], "password": auth["password"],
              "user-domain-name": "Default", "tenant-name": auth["project_name"], "tenant-domain-name": "Default",
              "region": "RegionOne", **overrides}
    lines = ["[Global]", *[f'{k} = "{v}"' for k, v in values.items() if v], "", "[KeyManager]", f'key-id = "{key_id}"']
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def write_encryption_config(path: Path, providers: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                                    "resources": [{"resources": ["secrets"], "providers": providers}]}))
    return path


KMS = {"kms": {"apiVersion": "v2", "name": "barbican", "endpoint": "unix:///var/lib/kms/kms.sock", "timeout": "3s"}}
IDENTITY: dict[str, Any] = {"identity": {}}


def kms_server(tmp: Path, cloud_conf: Path, providers: list[dict[str, Any]] | None = None,
               prefix: str | None = None) -> LabK8s:
    config = write_encryption_config(tmp / f"enc-{uuid.uuid4().hex[:6]}.yaml", providers or [KMS, IDENTITY])
    return start_lab_k8s(tmp / f"srv-{uuid.uuid4().hex[:6]}", prefix=prefix, controllers=False,
                         extra=["--encryption-config", str(config), "--kms-cloud-config", f"barbican={cloud_conf}"])


def secret(name: str, value: str) -> client.V1Secret:
    return client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data={"password": value})


def core_of(server: LabK8s) -> Any:
    return core_api(api_client_for(server.kubeconfig))


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def cluster_key(user_conn: openstack.connection.Connection) -> str:
    """The seeded cluster key's id, looked up with openstacksdk."""
    found = [s for s in barbican(user_conn, "GET", "/secrets", params={"name": SEEDED_KEY}).json()["secrets"]
             if s["status"] == "ACTIVE"]
    assert found, f"the lab seed has no Barbican key {SEEDED_KEY}"
    return str(found[0]["secret_ref"]).rsplit("/", 1)[-1]


@pytest.fixture
def servers() -> Iterator[list[LabK8s]]:
    started: list[LabK8s] = []
    yield started
    for server in started:
        stop_lab_k8s(server)


@pytest.fixture
def own_key(user_conn: openstack.connection.Connection) -> Iterator[str]:
    """An AES-256 key stored in Barbican for this test only (deleted afterwards if still there)."""
    body = {"name": f"it-kms-{uuid.uuid4().hex[:8]}", "secret_type": "symmetric", "algorithm": "aes",
            "bit_length": 256, "mode": "cbc", "payload": base64.b64encode(os.urandom(32)).decode(),
            "payload_content_type": "application/octet-stream", "payload_content_encoding": "base64"}
    key_id = str(barbican(user_conn, "POST", "/secrets", json=body).json()["secret_ref"]).rsplit("/", 1)[-1]
    yield key_id
    barbican(user_conn, "DELETE", f"/secrets/{key_id}", headers={})


# ------------------------------------------------------------------ tests

def test_secrets_are_enveloped_with_the_barbican_key(tmp_path: Path, lab_etcd: Any, servers: list[LabK8s],
                                                     user_conn: Any, cluster_key: str) -> None:
    server = kms_server(tmp_path, write_cloud_conf(tmp_path / "cloud.conf", cluster_key))
    servers.append(server)
    core = core_of(server)
    core.create_namespaced_secret("default", secret("db", "hunter2-" + uuid.uuid4().hex))
    plaintext = base64.b64decode(core.read_namespaced_secret("db", "default").data["password"]).decode()
    etcd_key = (server.prefix + "/secrets/default/db").encode()
    stored = server.etcd_value("/secrets/default/db")
    assert stored is not None
    value = stored[0]
    assert value.startswith(PREFIX)
    assert plaintext.encode() not in value and base64.b64encode(plaintext.encode()) not in value
    key_id, obj, wrapped = open_envelope(value, etcd_key, key_payload(user_conn, cluster_key))
    assert key_id == cluster_key
    assert base64.b64decode(obj["data"]["password"]).decode() == plaintext
    assert obj["metadata"]["name"] == "db" and obj["kind"] == "Secret"
    # The data is bound to its etcd key: moved elsewhere it does not open.
    with pytest.raises(Exception):
        open_envelope(value, etcd_key + b"-moved", key_payload(user_conn, cluster_key))
    # A new write, a new data key.
    core.patch_namespaced_secret("db", "default", {"stringData": {"other": "x"}})
    stored_again = server.etcd_value("/secrets/default/db")
    assert stored_again is not None
    _key, obj_again, wrapped_again = open_envelope(stored_again[0], etcd_key, key_payload(user_conn, cluster_key))
    assert wrapped_again != wrapped and set(obj_again["data"]) == {"password", "other"}
    # Other kinds are not encrypted.
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="plain"),
                                                                    data={"k": "v"}))
    stored_cm = server.etcd_value("/configmaps/default/plain")
    assert stored_cm is not None and json.loads(stored_cm[0])["data"] == {"k": "v"}


def test_key_fetched_on_every_call(tmp_path: Path, lab_etcd: Any, servers: list[LabK8s], user_conn: Any,
                                   own_key: str) -> None:
    """Deleting the key in Barbican stops Secret reads and writes at once: no key is cached."""
    server = kms_server(tmp_path, write_cloud_conf(tmp_path / "cloud.conf", own_key))
    servers.append(server)
    core = core_of(server)
    core.create_namespaced_secret("default", secret("s", "v"))
    assert core.read_namespaced_secret("s", "default").data["password"] == base64.b64encode(b"v").decode()
    barbican(user_conn, "DELETE", f"/secrets/{own_key}", headers={})
    for call in (lambda: core.read_namespaced_secret("s", "default"),
                 lambda: core.list_namespaced_secret("default"),
                 lambda: core.create_namespaced_secret("default", secret("t", "v"))):
        with pytest.raises(ApiException) as err:
            call()
        status = json.loads(err.value.body or "{}")
        assert (err.value.status, status["reason"]) == (500, "InternalError")
        assert own_key in status["message"] and "barbican" in status["message"]
    # Everything else keeps working.
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="still-works"),
                                                                    data={"k": "v"}))
    assert core.read_namespaced_config_map("still-works", "default").data == {"k": "v"}


@pytest.mark.parametrize("breakage", ["wrong key id", "keystone port closed"])
def test_unreachable_key_fails_reads_and_writes(tmp_path: Path, lab_etcd: Any, servers: list[LabK8s],
                                                cluster_key: str, breakage: str) -> None:
    good = kms_server(tmp_path, write_cloud_conf(tmp_path / "good.conf", cluster_key))
    servers.append(good)
    core_of(good).create_namespaced_secret("default", secret("kept", "v"))
    if breakage == "wrong key id":
        key_id = str(uuid.uuid4())
        conf = write_cloud_conf(tmp_path / "bad.conf", key_id)
    else:
        key_id = cluster_key
        conf = write_cloud_conf(tmp_path / "bad.conf", key_id, **{"auth-url": f"http://127.0.0.1:{free_port()}/v3"})
    broken = kms_server(tmp_path, conf, prefix=good.prefix)  # the same etcd data
    servers.append(broken)
    core = core_of(broken)
    for call in (lambda: core.read_namespaced_secret("kept", "default"),
                 lambda: core.create_namespaced_secret("default", secret("new", "v"))):
        with pytest.raises(ApiException) as err:
            call()
        status = json.loads(err.value.body or "{}")
        assert err.value.status == 500 and status["reason"] == "InternalError"
        assert key_id in status["message"] and 'KMSv2 provider "barbican"' in status["message"]
    stored = good.etcd_value("/secrets/default/new")
    assert stored is None  # the failed write stored nothing


def test_identity_only_stores_plaintext_and_kms_reads_it(tmp_path: Path, lab_etcd: Any, servers: list[LabK8s],
                                                         cluster_key: str) -> None:
    plain = kms_server(tmp_path, tmp_path / "unused.conf", providers=[IDENTITY])
    servers.append(plain)
    core_of(plain).create_namespaced_secret("default", secret("old", "before-encryption"))
    stored = plain.etcd_value("/secrets/default/old")
    assert stored is not None and json.loads(stored[0])["data"]["password"] == base64.b64encode(
        b"before-encryption").decode()
    # Encryption switched on (kms first, identity last): old plaintext Secrets stay readable...
    encrypted = kms_server(tmp_path, write_cloud_conf(tmp_path / "cloud.conf", cluster_key), prefix=plain.prefix)
    servers.append(encrypted)
    core = core_of(encrypted)
    assert core.read_namespaced_secret("old", "default").data["password"] == base64.b64encode(b"before-encryption").decode()
    # ...and rewriting one encrypts it.
    core.replace_namespaced_secret("old", "default", core.read_namespaced_secret("old", "default"))
    core.patch_namespaced_secret("old", "default", {"metadata": {"labels": {"rewritten": "yes"}}})
    stored = encrypted.etcd_value("/secrets/default/old")
    assert stored is not None and stored[0].startswith(PREFIX)
    # A server without the kms provider cannot read it.
    with pytest.raises(ApiException) as err:
        core_of(plain).read_namespaced_secret("old", "default")
    assert err.value.status == 500


def test_application_credential_cloud_conf(tmp_path: Path, lab_etcd: Any, servers: list[LabK8s], user_conn: Any,
                                           family: str, cluster_key: str) -> None:
    credential = user_conn.identity.create_application_credential(user_conn.current_user_id, family)
    conf = write_cloud_conf(tmp_path / "cloud.conf", cluster_key, **{
        "username": "", "password": "", "user-domain-name": "", "tenant-name": "", "tenant-domain-name": "",
        "application-credential-id": credential.id, "application-credential-secret": credential.secret})
    assert "password" not in conf.read_text()
    server = kms_server(tmp_path, conf)
    servers.append(server)
    core = core_of(server)
    core.create_namespaced_secret("default", secret("ac", "via-app-credential"))
    assert base64.b64decode(core.read_namespaced_secret("ac", "default").data["password"]) == b"via-app-credential"
    stored = server.etcd_value("/secrets/default/ac")
    assert stored is not None and stored[0].startswith(PREFIX)


@pytest.mark.parametrize(("providers", "message"), [
    ([{"kms": {"apiVersion": "v1", "name": "barbican", "endpoint": "unix:///x"}}], "only apiVersion v2"),
    ([{"aescbc": {"keys": []}}], "unsupported provider"),
])
def test_bad_encryption_configuration_stops_the_server(tmp_path: Path, providers: list[dict[str, Any]],
                                                       message: str) -> None:
    config = write_encryption_config(tmp_path / "enc.yaml", providers)
    result = subprocess.run([sys.executable, "-m", "lab.k8s", "--etcd", "http://127.0.0.1:1", "--port",
                             str(free_port()), "--data-dir", str(tmp_path / "d"), "--encryption-config", str(config),
                             "--kms-cloud-config", str(tmp_path / "none.conf")],
                            cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and message in result.stderr
