# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic for the cluster's Barbican KMS key (``barbican_kms_key``).

Plain data in (Barbican's JSON bodies, HTTP statuses, resolved addresses), a
decision out; no I/O. The key is what barbican-kms-plugin encrypts the
cluster's data-encryption keys with: a symmetric AES-256 key made by an order.

Nothing here ever sees a key's payload: the module only measures whether the
payload can be fetched.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

# What barbican-kms-plugin needs (cloud-provider-openstack's docs: "256-bit (32 byte) cbc key").
KEY_ALGORITHM = "aes"
KEY_BIT_LENGTH = 256
KEY_MODE = "cbc"
# The plugin asks for the payload as application/octet-stream.
PAYLOAD_CONTENT_TYPE = "application/octet-stream"
# Barbican's secret name column is String(255).
NAME_MAX = 255
NAME_SUFFIX = "-kms"

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class InputError(ValueError):
    """Bad module input or a state the module must not act on; the message says what to fix."""


# ------------------------------------------------------------------ names and references

def key_name(name: str | None, cluster_name: str | None) -> str:
    """The key's name: ``name`` when given, else ``<cluster_name>-kms``."""
    chosen = name if name else (f"{cluster_name}{NAME_SUFFIX}" if cluster_name else "")
    if not chosen or not chosen.strip():
        raise InputError("give the key's name, or cluster_name to name it '<cluster_name>-kms'")
    if len(chosen) > NAME_MAX:
        raise InputError(f"key name '{chosen[:40]}...' is {len(chosen)} characters long; Barbican allows {NAME_MAX}")
    return chosen


def secret_uuid(ref: str) -> str:
    """The secret's UUID from its href (``.../v1/secrets/<uuid>``) or from a bare UUID."""
    text = (ref or "").strip().rstrip("/")
    candidate = text.rsplit("/", 1)[-1]
    if not _UUID.match(candidate):
        raise InputError(f"'{ref}' is neither a Barbican secret UUID nor a secret href ending in one")
    if "/" in text and "/secrets/" not in text:
        raise InputError(f"'{ref}' is not a secret href (expected .../v1/secrets/<uuid>)")
    return candidate.lower()


def order_request(name: str) -> dict[str, Any]:
    """Body of ``POST /v1/orders`` for the cluster's key."""
    return {"type": "key", "meta": {"name": name, "algorithm": KEY_ALGORITHM, "bit_length": KEY_BIT_LENGTH,
                                    "mode": KEY_MODE, "payload_content_type": PAYLOAD_CONTENT_TYPE}}


# ------------------------------------------------------------------ finding the key

def choose_key(secrets: Iterable[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    """The one ACTIVE secret named ``name``; None if there is none; an error if there are several.

    Two keys with the cluster's name means nobody can say which one encrypts the cluster's data:
    the module refuses to guess.
    """
    matches = [s for s in secrets if s.get("name") == name and str(s.get("status", "")).upper() == "ACTIVE"]
    if len(matches) > 1:
        hrefs = ", ".join(sorted(str(s.get("secret_ref")) for s in matches))
        raise InputError(f"{len(matches)} ACTIVE secrets are named '{name}': {hrefs}. Keep the one the cluster's "
                         "plugin uses (its cloud.conf [KeyManager] key-id) and delete or rename the others, or "
                         "choose another name.")
    return matches[0] if matches else None


def key_problems(secret: Mapping[str, Any]) -> list[str]:
    """Why an existing secret cannot serve as the plugin's key (empty: it can)."""
    problems = []
    if str(secret.get("algorithm") or "").lower() != KEY_ALGORITHM:
        problems.append(f"algorithm is {secret.get('algorithm')!r}, not {KEY_ALGORITHM!r}")
    if secret.get("bit_length") != KEY_BIT_LENGTH:
        problems.append(f"bit_length is {secret.get('bit_length')!r}, not {KEY_BIT_LENGTH}")
    if str(secret.get("mode") or "").lower() != KEY_MODE:
        problems.append(f"mode is {secret.get('mode')!r}, not {KEY_MODE!r}")
    if secret.get("secret_type") not in (None, "symmetric"):
        problems.append(f"secret_type is {secret.get('secret_type')!r}, not 'symmetric'")
    return problems


def pending_order(orders: Iterable[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    """An unfinished key order for ``name`` (a run interrupted while waiting): wait for it, order no second key."""
    for order in orders:
        meta = order.get("meta") or {}
        if order.get("type") == "key" and meta.get("name") == name and order.get("status") == "PENDING":
            return order
    return None


def order_state(order: Mapping[str, Any]) -> tuple[str, str]:
    """``("active", secret_ref)``, ``("pending", "")`` or ``("error", why)`` for an order body."""
    status = str(order.get("status", "")).upper()
    if status == "ACTIVE":
        if not order.get("secret_ref"):
            return "error", "the order is ACTIVE but names no secret"
        return "active", str(order["secret_ref"])
    if status == "ERROR":
        return "error", (f"Barbican could not fulfil the order: {order.get('error_status_code') or ''} "
                         f"{order.get('error_reason') or 'no reason given'}").replace("  ", " ")
    return "pending", ""


def key_view(secret: Mapping[str, Any]) -> dict[str, Any]:
    """The key as the module returns it: metadata only, never a payload."""
    href = str(secret.get("secret_ref") or "")
    return {
        "id": secret_uuid(href) if href else None,
        "href": href or None,
        "name": secret.get("name"),
        "algorithm": secret.get("algorithm"),
        "bit_length": secret.get("bit_length"),
        "mode": secret.get("mode"),
        "secret_type": secret.get("secret_type"),
        "status": secret.get("status"),
        "created": secret.get("created"),
        "content_types": dict(secret.get("content_types") or {}),
    }


def predicted_key_view(name: str) -> dict[str, Any]:
    """What check mode says would be created (no id or href yet)."""
    return {"id": None, "href": None, "name": name, "algorithm": KEY_ALGORITHM, "bit_length": KEY_BIT_LENGTH,
            "mode": KEY_MODE, "secret_type": "symmetric", "status": None, "created": None,
            "content_types": {"default": PAYLOAD_CONTENT_TYPE}}


# ------------------------------------------------------------------ ACL

@dataclass(frozen=True)
class Acl:
    """The secret's ``read`` ACL: who may read it besides the project's roles, and whether those roles may."""

    users: tuple[str, ...] = ()
    project_access: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"users": list(self.users), "project_access": self.project_access}

    def request_body(self) -> dict[str, Any]:
        """Body of ``PUT /v1/secrets/{uuid}/acl`` (replaces the whole read ACL)."""
        return {"read": {"users": list(self.users), "project-access": self.project_access}}


def parse_acl(body: Mapping[str, Any] | None) -> Acl:
    """``GET /v1/secrets/{uuid}/acl``: without an ACL Barbican answers ``{"read": {"project-access": true}}``."""
    read = (body or {}).get("read") or {}
    access = read.get("project-access", True)
    return Acl(users=tuple(sorted(set(str(u) for u in read.get("users") or []))),
               project_access=bool(access) if access is not None else True)


def plan_acl(current: Acl, users: Sequence[str], users_state: str, project_access: bool | None) -> Acl:
    """The ACL after adding (``present``) or removing (``absent``) ``users``; ``project_access`` None keeps it."""
    wanted = set(users)
    if users_state == "present":
        after = set(current.users) | wanted
    elif users_state == "absent":
        after = set(current.users) - wanted
    else:
        raise InputError(f"acl_state must be present or absent, not {users_state!r}")
    return Acl(users=tuple(sorted(after)),
               project_access=current.project_access if project_access is None else project_access)


# ------------------------------------------------------------------ the KMS must live outside the cluster

def parse_networks(values: Iterable[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The cluster's networks and addresses (a bare address is a /32 or /128)."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            raise InputError(f"cluster_networks: '{value}' is neither an IP address nor a CIDR (for example "
                             "10.96.0.0/12 or 203.0.113.10)") from None
    return networks


def endpoint_host(url: str) -> str:
    """The host name or address of an endpoint URL."""
    host = urlsplit(url).hostname
    if not host:
        raise InputError(f"the key-manager endpoint '{url}' has no host")
    return host.rstrip(".").lower()


def cluster_dns_suffixes(dns_domain: str | None) -> list[str]:
    """Host name suffixes that only the cluster's DNS answers: Services (``svc``) and the cluster domain."""
    suffixes = ["svc"]
    domain = (dns_domain or "").strip().strip(".").lower()
    if domain:
        suffixes += [f"svc.{domain}", domain]
    return suffixes


def endpoint_inside_cluster(url: str, resolved: Iterable[str],
                            networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
                            dns_domain: str | None) -> list[str]:
    """Why the key-manager endpoint belongs to the cluster it would protect (empty: it does not).

    A KMS that runs inside (or is reached through) the cluster it protects deadlocks when the cluster
    restarts: the apiserver cannot decrypt Secrets until the KMS answers, and the KMS cannot start until
    the apiserver serves them.
    """
    reasons = []
    host = endpoint_host(url)
    for suffix in cluster_dns_suffixes(dns_domain):
        if host == suffix or host.endswith("." + suffix):
            reasons.append(f"host '{host}' is a name in the cluster's DNS (*.{suffix})")
            break
    for address in sorted(set(resolved)):
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            continue
        inside = [str(n) for n in networks if ip.version == n.version and ip in n]
        if inside:
            reasons.append(f"'{host}' resolves to {ip}, inside the cluster's {', '.join(inside)}")
    return reasons


def endpoint_refusal(url: str, reasons: Sequence[str]) -> str:
    return (f"the key-manager endpoint {url} belongs to the cluster this key would protect: {'; '.join(reasons)}. "
            "A KMS that depends on the cluster deadlocks on restart (the apiserver needs the key before the "
            "cluster can serve Barbican). Use a Barbican that runs outside this cluster, or correct "
            "cluster_networks / cluster_dns_domain if they are wrong.")


# ------------------------------------------------------------------ reachability (for drills)

@dataclass(frozen=True)
class Reachability:
    reachable: bool
    reason: str
    http_status: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"reachable": self.reachable, "reason": self.reason, "http_status": self.http_status}


_STATUS_MEANING = {
    401: "the credentials were rejected (HTTP 401)",
    403: "forbidden (HTTP 403): the identity is not on the key's read ACL and project access does not let it read",
    404: "not found (HTTP 404): no such secret, or it was deleted",
}


def reachability(key_ref: str, metadata_status: int, metadata: Mapping[str, Any] | None,
                 payload_status: int | None, payload_bytes: int | None, identity: str) -> Reachability:
    """Verdict of the plugin's view of the key from what was measured.

    ``payload_status`` None means the payload was not asked for (metadata only).
    """
    label = f"key {key_ref}"
    if metadata and metadata.get("name"):
        label = f"key '{metadata['name']}' ({key_ref})"
    if metadata_status != 200:
        meaning = _STATUS_MEANING.get(metadata_status, f"HTTP {metadata_status}")
        return Reachability(False, f"{label} is not readable by {identity}: {meaning}", metadata_status)
    status = str((metadata or {}).get("status", "")).upper()
    if status != "ACTIVE":
        return Reachability(False, f"{label} is {status or 'without status'}, not ACTIVE", metadata_status)
    if payload_status is None:
        return Reachability(True, f"{label} metadata readable by {identity} (payload not fetched)", metadata_status)
    if payload_status != 200:
        meaning = _STATUS_MEANING.get(payload_status, f"HTTP {payload_status}")
        return Reachability(False, f"{label}: metadata readable but the payload is not, by {identity}: {meaning}",
                            payload_status)
    if payload_bytes != KEY_BIT_LENGTH // 8:
        return Reachability(False, f"{label}: the payload has {payload_bytes} bytes, the plugin needs "
                                   f"{KEY_BIT_LENGTH // 8} (AES-{KEY_BIT_LENGTH})", payload_status)
    return Reachability(True, f"{label} readable by {identity}: metadata and a {payload_bytes}-byte payload "
                              f"({PAYLOAD_CONTENT_TYPE})", payload_status)
