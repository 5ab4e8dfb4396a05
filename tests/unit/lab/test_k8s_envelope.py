"""The KMS v2 envelope, the plugin's AES-CBC wrapping, cloud.conf parsing and the provider chain."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from lab.k8s.kms import (EncryptedObject, Encryption, Identity, KmsError, KmsV2, _seconds, aescbc_unwrap,
                         aescbc_wrap, gcfg_escape, keystone_auth_body, load_encryption_config, read_cloud_conf, seal, unseal)

KEK = bytes(range(32))


class FixedKey:
    def __init__(self, key: bytes = KEK, key_id: str = "key-1") -> None:
        self.value = (key_id, key)
        self.calls = 0

    def key(self) -> tuple[str, bytes]:
        self.calls += 1
        return self.value


def test_envelope_round_trip_and_fresh_dek() -> None:
    first = seal(b'{"kind":"Secret"}', b"/registry/secrets/ns/a", KEK, "key-1")
    second = seal(b'{"kind":"Secret"}', b"/registry/secrets/ns/a", KEK, "key-1")
    assert unseal(first, b"/registry/secrets/ns/a", KEK) == b'{"kind":"Secret"}'
    one, two = EncryptedObject.decode(first), EncryptedObject.decode(second)
    assert one.key_id == "key-1" and one.encrypted_dek_source_type == 0
    assert one.encrypted_dek_source != two.encrypted_dek_source  # a DEK per write
    assert len(one.encrypted_data) == 12 + len(b'{"kind":"Secret"}') + 16  # nonce + ciphertext + tag


@pytest.mark.parametrize(("storage_key", "kek"), [(b"/registry/secrets/ns/b", KEK), (b"/registry/secrets/ns/a", bytes(32))])
def test_envelope_refuses_other_key_or_place(storage_key: bytes, kek: bytes) -> None:
    sealed = seal(b"data", b"/registry/secrets/ns/a", KEK, "key-1")
    with pytest.raises(KmsError):
        unseal(sealed, storage_key, kek)


def test_protobuf_layout() -> None:
    obj = EncryptedObject(b"D" * 3, "kid", b"W" * 2, 0, {"a": b"b"})
    encoded = obj.encode()
    # field 1 (bytes), 2 (string), 3 (bytes), 4 (map entry); type 0 is left out as proto3 does.
    assert encoded.startswith(b"\x0a\x03DDD\x12\x03kid\x1a\x02WW\x22\x06\x0a\x01a\x12\x01b")
    assert EncryptedObject.decode(encoded) == obj
    assert EncryptedObject.decode(EncryptedObject(b"x", "k", b"y", 1).encode()).encrypted_dek_source_type == 1
    with pytest.raises(KmsError):
        EncryptedObject.decode(b"\x0a\x05ab")


def test_aescbc_matches_the_plugin_format() -> None:
    dek = os.urandom(32)
    wrapped = aescbc_wrap(dek, KEK)
    assert len(wrapped) == 16 + 48  # IV + 32 bytes padded to 48 (PKCS#7 adds a full block)
    decryptor = Cipher(algorithms.AES(KEK), modes.CBC(wrapped[:16])).decryptor()
    padded = decryptor.update(wrapped[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    assert unpadder.update(padded) + unpadder.finalize() == dek
    assert aescbc_unwrap(wrapped, KEK) == dek
    with pytest.raises(KmsError):
        aescbc_unwrap(wrapped[:20], KEK)


def test_provider_chain() -> None:
    source = FixedKey()
    kms = KmsV2("barbican", source)
    chain = Encryption({"secrets": [kms, Identity()]})
    stored = chain.encrypt("secrets", b"/r/secrets/n/a", b"{}")
    assert stored.startswith(b"k8s:enc:kms:v2:barbican:")
    assert chain.decrypt("secrets", b"/r/secrets/n/a", stored) == b"{}"
    assert chain.decrypt("secrets", b"/r/secrets/n/a", b'{"plain":1}') == b'{"plain":1}'  # identity reads it
    assert chain.encrypt("configmaps", b"/r/configmaps/n/a", b"{}") == b"{}"
    assert source.calls == 2  # one key fetch per encrypt and per decrypt
    with pytest.raises(KmsError, match="no provider"):
        Encryption({"secrets": [Identity()]}).decrypt("secrets", b"k", stored)
    with pytest.raises(KmsError, match="key-1"):
        Encryption({"secrets": [KmsV2("barbican", FixedKey(bytes(32), "key-2"))]}).decrypt("secrets", b"/r/secrets/n/a", stored)


def test_cloud_conf_and_keystone_body(tmp_path: Path) -> None:
    conf = tmp_path / "cloud.conf"
    conf.write_text('# comment\n[Global]\nauth-url = "http://k/v3"\napplication-credential-id = "id1"\n'
                    'application-credential-secret = "s\\"q\\\\x"\nregion = RegionOne\n\n[KeyManager]\nkey-id = "k1"\n')
    parsed = read_cloud_conf(conf)
    assert parsed["Global"]["application-credential-secret"] == 's"q\\x'
    assert parsed["KeyManager"]["key-id"] == "k1" and parsed["Global"]["region"] == "RegionOne"
    body = keystone_auth_body(parsed["Global"])
    assert body["auth"]["identity"] == {"methods": ["application_credential"],
                                        "application_credential": {"id": "id1", "secret": 's"q\\x'}}
    password = keystone_auth_body({"username": "u", "password": "p", "user-domain-name": "D", "tenant-name": "t"})
    assert password["auth"]["identity"]["password"]["user"] == {"name": "u", "password": "p", "domain": {"name": "D"}}
    assert password["auth"]["scope"] == {"project": {"name": "t", "domain": {"name": "Default"}}}


@pytest.mark.parametrize("value", ['plain', 's"q\\x', 'ends\\', '\\"both"\\'])
def test_gcfg_escape_round_trips(tmp_path: Path, value: str) -> None:
    conf = tmp_path / "cloud.conf"
    conf.write_text(f'[Global]\npassword = "{gcfg_escape(value)}"\n')
    assert read_cloud_conf(conf)["Global"]["password"] == value


def test_errors_never_quote_a_value(tmp_path: Path) -> None:
    """configparser quotes the bad line (a password line, say); a stored value may be Secret data."""
    conf = tmp_path / "cloud.conf"
    conf.write_text('password = "hunter2-secret"\n[Global]\n')  # no section header before the first line
    with pytest.raises(KmsError) as raised:
        read_cloud_conf(conf)
    assert "hunter2-secret" not in str(raised.value) and "line 1" in str(raised.value)
    chain = Encryption({"secrets": [KmsV2("barbican", FixedKey())]})
    with pytest.raises(KmsError) as raised:
        chain.decrypt("secrets", b"k", b'{"data":{"token":"hunter2-secret"}}')
    assert "hunter2" not in str(raised.value) and "no provider prefix" in str(raised.value)
    with pytest.raises(KmsError) as raised:
        chain.decrypt("secrets", b"k", b"k8s:enc:kms:v2:other:hunter2-secret")
    assert "hunter2" not in str(raised.value) and "k8s:enc:kms:v2:other:" in str(raised.value)


def test_encryption_config(tmp_path: Path) -> None:
    path = tmp_path / "enc.yaml"
    path.write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"
                    "  - resources: [secrets]\n    providers:\n"
                    "      - kms: {apiVersion: v2, name: barbican, endpoint: unix:///k.sock, timeout: 3s}\n"
                    "      - identity: {}\n")
    loaded = load_encryption_config(path, {}, tmp_path / "cloud.conf")
    assert [p.name for p in loaded.providers["secrets"]] == ["barbican", "identity"]
    with pytest.raises(ValueError, match="needs --kms-cloud-config"):
        load_encryption_config(path, {}, None)
    assert (_seconds("3s"), _seconds("1m"), _seconds("500ms")) == (3.0, 60.0, 0.5)
