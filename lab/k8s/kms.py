"""Encryption of Secrets at rest, the way kube-apiserver does it with the Barbican KMS v2 plugin.

The server plays both parts:

- kube-apiserver: reads the ``EncryptionConfiguration`` (``--encryption-provider-config``), writes with the
  first provider of a resource and reads with whichever provider's prefix the stored value carries
  (``identity`` reads values without a prefix). For a write it makes a fresh 256-bit data key (DEK),
  encrypts the object with AES-GCM (12-byte random nonce, the etcd key as additional data, like
  kube-apiserver) and stores ``k8s:enc:kms:v2:<provider name>:`` + an ``EncryptedObject`` message in
  protobuf wire format (kube-apiserver's own envelope, ``kmsv2/v2/api.proto``)::

      1 encryptedData        bytes   nonce (12) || AES-GCM ciphertext || tag (16)
      2 keyID                string  the Barbican key id (the plugin's key-id)
      3 encryptedDEKSource   bytes   the DEK wrapped by the plugin (below)
      5 encryptedDEKSourceType enum  0 = AES_GCM_KEY (a DEK, not a KDF seed; proto3 leaves 0 out)

  Deviation: kube-apiserver 1.29+ caches one DEK seed for many writes and derives per-write keys from it
  (HKDF); here every write gets its own DEK, so every write calls the plugin.
- barbican-kms-plugin: reads its ``cloud.conf`` once at start (``[Global]`` Keystone auth,
  ``[KeyManager] key-id``), logs in to Keystone, fetches the key from Barbican (``GET /v1/secrets/<key-id>/payload``) on **every**
  Encrypt and Decrypt call (no cache, as upstream) and wraps/unwraps the DEK with AES-256-CBC, a random
  16-byte IV in front and PKCS#7 padding (upstream ``pkg/kms/encryption/aescbc``). Only the Keystone token
  is cached (until shortly before it expires, or a 401).

When Keystone, Barbican or the key cannot be reached, the call raises KmsError naming the provider and
key; the API answers 500 InternalError, as kube-apiserver does when its KMS plugin fails.
"""

from __future__ import annotations

import configparser
import json
import os
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ENCRYPTED_PREFIX = b"k8s:enc:"


class KmsError(RuntimeError):
    """The KMS provider could not encrypt or decrypt (the API answers 500 InternalError)."""


# ------------------------------------------------------------------ protobuf wire format (the 4 fields we use)

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise KmsError("truncated envelope (varint)")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


@dataclass(frozen=True)
class EncryptedObject:
    encrypted_data: bytes
    key_id: str
    encrypted_dek_source: bytes
    encrypted_dek_source_type: int = 0
    annotations: dict[str, bytes] = field(default_factory=dict)

    def encode(self) -> bytes:
        out = bytearray()
        for number, value in ((1, self.encrypted_data), (2, self.key_id.encode()), (3, self.encrypted_dek_source)):
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
        for key, value in sorted(self.annotations.items()):
            entry = (_varint(1 << 3 | 2) + _varint(len(key.encode())) + key.encode()
                     + _varint(2 << 3 | 2) + _varint(len(value)) + value)
            out += _varint(4 << 3 | 2) + _varint(len(entry)) + entry
        if self.encrypted_dek_source_type:
            out += _varint(5 << 3 | 0) + _varint(self.encrypted_dek_source_type)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> "EncryptedObject":
        fields: dict[int, Any] = {}
        annotations: dict[str, bytes] = {}
        pos = 0
        while pos < len(data):
            tag, pos = _read_varint(data, pos)
            number, wire = tag >> 3, tag & 7
            if wire == 0:
                fields[number], pos = _read_varint(data, pos)
            elif wire == 2:
                length, pos = _read_varint(data, pos)
                if pos + length > len(data):
                    raise KmsError("truncated envelope (length)")
                value = data[pos:pos + length]
                pos += length
                if number == 4:
                    entry = cls._map_entry(value)
                    annotations[entry[0]] = entry[1]
                else:
                    fields[number] = value
            else:
                raise KmsError(f"unexpected wire type {wire} in envelope")
        if 1 not in fields or 2 not in fields or 3 not in fields:
            raise KmsError("envelope misses encryptedData, keyID or encryptedDEKSource")
        return cls(fields[1], fields[2].decode(), fields[3], int(fields.get(5, 0)), annotations)

    @staticmethod
    def _map_entry(data: bytes) -> tuple[str, bytes]:
        pos, key, value = 0, b"", b""
        while pos < len(data):
            tag, pos = _read_varint(data, pos)
            length, pos = _read_varint(data, pos)
            if tag >> 3 == 1:
                key = data[pos:pos + length]
            else:
                value = data[pos:pos + length]
            pos += length
        return key.decode(), value


# ------------------------------------------------------------------ the plugin's and apiserver's ciphers

def aescbc_wrap(plain: bytes, key: bytes) -> bytes:
    """barbican-kms-plugin's Encrypt: AES-CBC, random IV first, PKCS#7 padding."""
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plain) + padder.finalize()
    iv = os.urandom(16)
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return iv + encryptor.update(padded) + encryptor.finalize()


def aescbc_unwrap(data: bytes, key: bytes) -> bytes:
    if len(data) < 32 or len(data) % 16:
        raise KmsError("wrapped DEK is not IV + whole AES blocks")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(data[:16])).decryptor()
    padded = decryptor.update(data[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError as exc:
        raise KmsError("wrapped DEK does not unwrap with this key (bad padding)") from exc


def seal(plaintext: bytes, storage_key: bytes, kek: bytes, key_id: str) -> bytes:
    """Envelope-encrypt one value: a fresh DEK, the data under the DEK, the DEK under the key."""
    dek = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(12)
    data = nonce + AESGCM(dek).encrypt(nonce, plaintext, storage_key)
    return EncryptedObject(data, key_id, aescbc_wrap(dek, kek)).encode()


def unseal(envelope: bytes, storage_key: bytes, kek: bytes) -> bytes:
    obj = EncryptedObject.decode(envelope)
    if obj.encrypted_dek_source_type != 0:
        raise KmsError(f"unsupported encryptedDEKSourceType {obj.encrypted_dek_source_type}")
    dek = aescbc_unwrap(obj.encrypted_dek_source, kek)
    try:
        return AESGCM(dek).decrypt(obj.encrypted_data[:12], obj.encrypted_data[12:], storage_key)
    except Exception as exc:  # cryptography raises InvalidTag
        raise KmsError("data does not decrypt with its DEK (wrong key or tampered value)") from exc


# ------------------------------------------------------------------ cloud.conf and Barbican

def gcfg_escape(value: str) -> str:
    """A value for ``key = "value"`` in a gcfg file: what read_cloud_conf un-escapes."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def read_cloud_conf(path: Path) -> dict[str, dict[str, str]]:
    """The plugin's gcfg file: sections of ``key = "value"`` (quotes and backslash escapes removed)."""
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#", ";"), inline_comment_prefixes=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(path.read_text())
    except OSError as exc:
        raise KmsError(f"cannot read the KMS plugin's cloud config {path}: {exc}") from exc
    except configparser.Error as exc:
        # configparser quotes the offending line, which may be a password: name the place, not the content.
        line = getattr(exc, "lineno", None) or next((n for n, _text in getattr(exc, "errors", [])), None)
        raise KmsError(f"cannot parse the KMS plugin's cloud config {path}: {type(exc).__name__}"
                       + (f" at line {line}" if line else "")) from None
    result: dict[str, dict[str, str]] = {}
    for section in parser.sections():
        values = {}
        for key, raw in parser.items(section):
            value = raw.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            values[key.lower()] = value
        result[section] = values
    return result


def keystone_auth_body(conf: dict[str, str]) -> dict[str, Any]:
    """A Keystone v3 auth request from cloud.conf ``[Global]`` (application credential or password)."""
    def domain(prefix: str) -> dict[str, str]:
        if conf.get(f"{prefix}-domain-id"):
            return {"id": conf[f"{prefix}-domain-id"]}
        return {"name": conf.get(f"{prefix}-domain-name") or conf.get("domain-name") or "Default"}

    if conf.get("application-credential-id") or conf.get("application-credential-name"):
        credential: dict[str, Any] = {"secret": conf.get("application-credential-secret", "")}
        if conf.get("application-credential-id"):
            credential["id"] = conf["application-credential-id"]
        else:
            credential["name"] = conf["application-credential-name"]
            credential["user"] = ({"id": conf["user-id"]} if conf.get("user-id")
                                  else {"name": conf.get("username", ""), "domain": domain("user")})
        return {"auth": {"identity": {"methods": ["application_credential"], "application_credential": credential}}}
    user: dict[str, Any] = {"password": conf.get("password", "")}
    if conf.get("user-id"):
        user["id"] = conf["user-id"]
    else:
        user.update(name=conf.get("username", ""), domain=domain("user"))
    body: dict[str, Any] = {"auth": {"identity": {"methods": ["password"], "password": {"user": user}}}}
    project_id = conf.get("tenant-id") or conf.get("project-id")
    project_name = conf.get("tenant-name") or conf.get("project-name")
    if project_id:
        body["auth"]["scope"] = {"project": {"id": project_id}}
    elif project_name:
        tenant_domain = ({"id": conf["tenant-domain-id"]} if conf.get("tenant-domain-id")
                         else {"name": conf.get("tenant-domain-name") or conf.get("project-domain-name")
                               or conf.get("domain-name") or "Default"})
        body["auth"]["scope"] = {"project": {"name": project_name, "domain": tenant_domain}}
    return body


class KeySource(Protocol):
    def key(self) -> tuple[str, bytes]:
        """The key id and the key bytes (fetched now)."""


class BarbicanKey:
    """The plugin's view of its key: cloud.conf read once at start (like the plugin: a new key-id or
    credential needs a restart), Keystone token cached, the key fetched from Barbican on every call."""

    def __init__(self, cloud_conf: Path, provider: str, timeout: float = 5.0) -> None:
        self.cloud_conf = cloud_conf
        self.provider = provider
        self.timeout = timeout
        self._lock = threading.Lock()
        self._token: tuple[str, str, float] | None = None  # token, barbican url, expiry (monotonic)
        self._conf: dict[str, dict[str, str]] | None = None
        self._conf_error = ""
        if cloud_conf != Path("/dev/null"):
            try:
                self._conf = read_cloud_conf(cloud_conf)
            except KmsError as exc:
                self._conf_error = str(exc)

    def _fail(self, key_id: str, why: str) -> KmsError:
        return KmsError(f'KMSv2 provider "{self.provider}" (barbican-kms-plugin): cannot get key {key_id or "?"} '
                        f"from Barbican: {why}")

    def _context(self, conf: dict[str, str]) -> ssl.SSLContext | None:
        if conf.get("tls-insecure", "").lower() == "true":
            return ssl._create_unverified_context()  # noqa: S323 - the operator asked for it in cloud.conf
        if conf.get("ca-file"):
            return ssl.create_default_context(cafile=conf["ca-file"])
        return None

    def _login(self, conf: dict[str, str], key_id: str) -> tuple[str, str]:
        now = time.monotonic()
        if self._token and self._token[2] > now:
            return self._token[0], self._token[1]
        auth_url = conf.get("auth-url", "").rstrip("/")
        if not auth_url:
            raise self._fail(key_id, "cloud.conf [Global] has no auth-url")
        request = urllib.request.Request(auth_url + "/auth/tokens", method="POST",
                                         data=json.dumps(keystone_auth_body(conf)).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._context(conf)) as resp:  # noqa: S310
                token = resp.headers["X-Subject-Token"]
                catalog = json.loads(resp.read())["token"].get("catalog", [])
        except urllib.error.HTTPError as exc:
            raise self._fail(key_id, f"Keystone {auth_url} refused the login: HTTP {exc.code}") from exc
        except (OSError, ValueError) as exc:
            raise self._fail(key_id, f"Keystone {auth_url} unreachable: {exc}") from exc
        region = conf.get("region", "")
        urls = [e["url"] for s in catalog if s.get("type") == "key-manager" for e in s.get("endpoints", [])
                if e.get("interface") == "public" and (not region or e.get("region_id", e.get("region")) == region)]
        if not urls:
            raise self._fail(key_id, f"no key-manager endpoint in region {region!r} of Keystone's catalog")
        # Keystone tokens live an hour in the lab; renew well before.
        self._token = (token, urls[0].rstrip("/"), now + 600)
        return token, self._token[1]

    def key(self) -> tuple[str, bytes]:
        if self._conf is None:
            raise self._fail("", self._conf_error or f"no cloud config read from {self.cloud_conf}")
        conf_all = self._conf
        conf = conf_all.get("Global", {})
        key_id = conf_all.get("KeyManager", {}).get("key-id", "")
        if not key_id:
            raise self._fail("", f"{self.cloud_conf} has no [KeyManager] key-id")
        with self._lock:
            for attempt in (1, 2):
                token, url = self._login(conf, key_id)
                base = url if url.endswith("/v1") else url + "/v1"
                request = urllib.request.Request(f"{base}/secrets/{key_id}/payload",
                                                 headers={"X-Auth-Token": token, "Accept": "application/octet-stream"})
                try:
                    with urllib.request.urlopen(request, timeout=self.timeout, context=self._context(conf)) as resp:  # noqa: S310
                        payload = resp.read()
                    break
                except urllib.error.HTTPError as exc:
                    if exc.code == 401 and attempt == 1:
                        self._token = None
                        continue
                    raise self._fail(key_id, f"Barbican {base} answered HTTP {exc.code}") from exc
                except OSError as exc:
                    raise self._fail(key_id, f"Barbican {base} unreachable: {exc}") from exc
        if len(payload) not in (16, 24, 32):
            raise self._fail(key_id, f"the secret is {len(payload)} bytes, not an AES key")
        return key_id, payload


def find_key_id(conf: dict[str, str], name: str, timeout: float = 10.0) -> str:
    """The id of the newest ACTIVE Barbican secret called ``name`` visible to the cloud.conf's credential
    (the lab service uses it to find the seeded cluster key)."""
    source = BarbicanKey(Path("/dev/null"), "lookup", timeout)
    token, url = source._login(conf, name)
    base = url if url.endswith("/v1") else url + "/v1"
    request = urllib.request.Request(f"{base}/secrets?name={urllib.parse.quote(name)}&limit=100",
                                     headers={"X-Auth-Token": token, "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310 - the lab's Barbican
        found = [s for s in json.loads(resp.read()).get("secrets", []) if s.get("status") == "ACTIVE"]
    if not found:
        raise KmsError(f"no ACTIVE Barbican secret named {name!r}")
    newest = max(found, key=lambda s: s.get("created", ""))
    return str(newest["secret_ref"]).rstrip("/").rsplit("/", 1)[-1]


# ------------------------------------------------------------------ providers and the configuration

class Provider(Protocol):
    name: str
    prefix: bytes

    def encrypt(self, storage_key: bytes, plaintext: bytes) -> bytes: ...

    def decrypt(self, storage_key: bytes, stored: bytes) -> bytes: ...


class Identity:
    name = "identity"
    prefix = b""

    def encrypt(self, storage_key: bytes, plaintext: bytes) -> bytes:
        return plaintext

    def decrypt(self, storage_key: bytes, stored: bytes) -> bytes:
        return stored


class KmsV2:
    def __init__(self, name: str, source: KeySource) -> None:
        self.name = name
        self.prefix = f"k8s:enc:kms:v2:{name}:".encode()
        self.source = source

    def encrypt(self, storage_key: bytes, plaintext: bytes) -> bytes:
        key_id, kek = self.source.key()
        return self.prefix + seal(plaintext, storage_key, kek, key_id)

    def decrypt(self, storage_key: bytes, stored: bytes) -> bytes:
        key_id, kek = self.source.key()
        envelope = stored[len(self.prefix):]
        stored_key_id = EncryptedObject.decode(envelope).key_id
        try:
            return unseal(envelope, storage_key, kek)
        except KmsError as exc:
            raise KmsError(f'KMSv2 provider "{self.name}": value written with key {stored_key_id} does not decrypt '
                           f"with key {key_id}: {exc}") from exc


class Encryption:
    """Per-resource provider lists from an EncryptionConfiguration (``secrets`` -> [kms, identity])."""

    def __init__(self, providers: dict[str, list[Provider]] | None = None) -> None:
        self.providers = providers or {}

    def encrypt(self, resource: str, storage_key: bytes, plaintext: bytes) -> bytes:
        chain = self.providers.get(resource)
        return chain[0].encrypt(storage_key, plaintext) if chain else plaintext

    def decrypt(self, resource: str, storage_key: bytes, stored: bytes) -> bytes:
        chain = self.providers.get(resource) or [Identity()]
        for provider in chain:
            if provider.prefix and stored.startswith(provider.prefix):
                return provider.decrypt(storage_key, stored)
        if not stored.startswith(ENCRYPTED_PREFIX) and any(isinstance(p, Identity) for p in chain):
            return stored
        # Name the provider prefix only: anything after it (or a plaintext value) may be Secret data.
        found = b":".join(stored.split(b":")[:5]) + b":" if stored.startswith(ENCRYPTED_PREFIX) else b"no provider prefix"
        raise KmsError(f"no provider of the encryption configuration reads this value ({found.decode(errors='replace')})")


def _seconds(duration: object) -> float:
    """A Go duration as kube-apiserver accepts it here (``3s``, ``1m``, ``500ms``), in seconds."""
    text = str(duration).strip()
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * factor
    raise ValueError(f"invalid kms timeout {text!r}")


def load_encryption_config(path: Path, cloud_confs: dict[str, Path], default_cloud_conf: Path | None) -> Encryption:
    """Parse an EncryptionConfiguration (YAML or JSON). A kms provider's endpoint socket is not used: this
    server plays the plugin, reading the cloud.conf given for that provider name (or the default one)."""
    text = path.read_text()
    try:
        import yaml  # PyYAML is in every venv of the repo; JSON is YAML too

        config = yaml.safe_load(text)
    except ImportError:
        config = json.loads(text)
    if not isinstance(config, dict) or config.get("kind") != "EncryptionConfiguration":
        raise ValueError(f"{path}: not an EncryptionConfiguration")
    if config.get("apiVersion") not in ("apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1"):
        raise ValueError(f"{path}: unsupported apiVersion {config.get('apiVersion')!r}")
    providers: dict[str, list[Provider]] = {}
    for entry in config.get("resources") or []:
        chain: list[Provider] = []
        for provider in entry.get("providers") or []:
            if "identity" in provider:
                chain.append(Identity())
            elif "kms" in provider:
                kms = provider["kms"]
                if str(kms.get("apiVersion", "v1")) != "v2":
                    raise ValueError(f"{path}: kms provider {kms.get('name')!r}: only apiVersion v2 is supported")
                conf = cloud_confs.get(kms["name"]) or default_cloud_conf
                if conf is None:
                    raise ValueError(f"{path}: kms provider {kms['name']!r} needs --kms-cloud-config")
                chain.append(KmsV2(kms["name"], BarbicanKey(conf, kms["name"], _seconds(kms.get("timeout", "5s")))))
            else:
                raise ValueError(f"{path}: unsupported provider {sorted(provider)}; this server knows kms v2 and identity")
        for resource in entry.get("resources") or []:
            providers[resource.split(".")[0]] = chain
    return Encryption(providers)
