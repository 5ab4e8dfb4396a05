# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic behind etcd_snapshot: names, windows, retention, tool output parsing, restore plans and
what a snapshot holds of a Kubernetes cluster. Plain data in, plain data out."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Sequence

STAMP = "%Y%m%dT%H%M%SZ"
SIDECAR_SUFFIX = ".json"
PARTIAL_PREFIX = "."
PARTIAL_SUFFIX = ".partial"
RESTORE_MARKER = ".deployopen-restore.json"
KMS_PREFIX = "k8s:enc:kms:v2:"
KMS_V1_PREFIX = "k8s:enc:kms:v1:"
_NAME_FIELDS = re.compile(r"\{(\w+)\}")


class EtcdInputError(ValueError):
    """Bad input; the message says what to fix."""


def render_name(template: str, now: datetime, member: str) -> str:
    """The snapshot file name from a template with {timestamp} and {member}."""
    unknown = set(_NAME_FIELDS.findall(template)) - {"timestamp", "member"}
    if unknown:
        raise EtcdInputError(f"name_template {template!r} uses unknown field(s) {sorted(unknown)}; "
                             "use {timestamp} and {member}")
    if "{timestamp}" not in template:
        raise EtcdInputError(f"name_template {template!r} must contain {{timestamp}} so snapshots do not overwrite "
                             "each other")
    name = template.format(timestamp=now.astimezone(timezone.utc).strftime(STAMP), member=safe_member(member))
    if "/" in name or name.startswith("."):
        raise EtcdInputError(f"name_template {template!r} gives {name!r}: a file name, not a path, not hidden")
    return name


def safe_member(endpoint: str) -> str:
    """A file-name-safe form of a member endpoint (https://10.0.0.1:2379 -> 10.0.0.1-2379)."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", re.sub(r"^\w+://", "", endpoint)).strip("-")


def parse_status(output: str) -> dict[str, int]:
    """``etcdutl|etcdctl snapshot status -w json`` -> hash, revision, total_keys, total_size."""
    try:
        data = json.loads(output.strip().splitlines()[-1])
        return {"hash": int(data["hash"]), "revision": int(data["revision"]),
                "total_keys": int(data["totalKey"]), "total_size": int(data["totalSize"])}
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise EtcdInputError(f"cannot read the snapshot status ({exc}): {output[-300:]!r}") from None


def parse_endpoint_status(output: str) -> dict[str, Any]:
    """``etcdctl endpoint status -w json`` for one endpoint -> version, db_size, revision."""
    try:
        status = json.loads(output)[0]["Status"]
        return {"version": status["version"], "db_size": int(status["dbSize"]),
                "revision": int(status["header"]["revision"])}
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise EtcdInputError(f"cannot read the endpoint status ({exc}): {output[-300:]!r}") from None


def parse_version(text: str) -> tuple[int, int, int]:
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        raise EtcdInputError(f"no version number in {text!r}")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def offline_tool(etcdutl_available: bool, etcdctl_version: tuple[int, int, int]) -> str:
    """Which binary does offline work (status, restore): etcdutl when present; etcdctl only before 3.6."""
    if etcdutl_available:
        return "etcdutl"
    if etcdctl_version >= (3, 6, 0):
        raise EtcdInputError("etcd 3.6 removed 'snapshot status/restore' from etcdctl and no etcdutl was found: "
                             "install etcdutl or set etcdutl_path")
    return "etcdctl"


def enough_space(free_bytes: int, db_size: int, margin: float = 1.1) -> bool:
    return free_bytes >= int(db_size * margin) + 1024 * 1024


@dataclass(frozen=True)
class Snapshot:
    path: str
    taken_at: datetime
    sha256: str


def parse_sidecar(text: str, path: str) -> Snapshot:
    data = json.loads(text)
    return Snapshot(path=path, taken_at=datetime.strptime(data["taken_at"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=timezone.utc), sha256=str(data["sha256"]))


def in_window(snapshots: Iterable[Snapshot], now: datetime, window_seconds: int) -> Snapshot | None:
    """The newest snapshot taken less than ``window_seconds`` ago (0 disables the window)."""
    if window_seconds <= 0:
        return None
    recent = [s for s in snapshots if timedelta(0) <= now - s.taken_at < timedelta(seconds=window_seconds)]
    return max(recent, key=lambda s: s.taken_at) if recent else None


def retention(snapshots: Sequence[Snapshot], keep: int | None, max_age_days: float | None,
              now: datetime) -> list[Snapshot]:
    """Snapshots to delete: beyond the newest ``keep``, or older than ``max_age_days``. The newest stays."""
    ordered = sorted(snapshots, key=lambda s: s.taken_at, reverse=True)
    doomed: list[Snapshot] = []
    for index, snap in enumerate(ordered):
        if index == 0:
            continue
        if keep is not None and index >= keep:
            doomed.append(snap)
        elif max_age_days is not None and now - snap.taken_at > timedelta(days=max_age_days):
            doomed.append(snap)
    return doomed


@dataclass(frozen=True)
class Member:
    name: str
    peer_url: str
    data_dir: str


def parse_members(raw: Sequence[Mapping[str, Any]]) -> list[Member]:
    if not raw:
        raise EtcdInputError("members is empty: give each member's name, peer_url and data_dir")
    members = []
    for index, item in enumerate(raw):
        missing = [k for k in ("name", "peer_url", "data_dir") if not item.get(k)]
        if missing:
            raise EtcdInputError(f"members[{index}] lacks {', '.join(missing)}")
        if not re.match(r"^https?://[^/]+$", str(item["peer_url"])):
            raise EtcdInputError(f"members[{index}].peer_url {item['peer_url']!r} must look like https://10.0.0.1:2380")
        members.append(Member(str(item["name"]), str(item["peer_url"]), str(item["data_dir"])))
    for attr in ("name", "peer_url", "data_dir"):
        values = [getattr(m, attr) for m in members]
        if len(set(values)) != len(values):
            raise EtcdInputError(f"members have duplicate {attr}s: {values}")
    return members


def initial_cluster(members: Sequence[Member]) -> str:
    return ",".join(f"{m.name}={m.peer_url}" for m in members)


def restore_argv(tool: str, snapshot: str, member: Member, members: Sequence[Member], token: str) -> list[str]:
    """Arguments (after the binary) of one member's restore: same snapshot, new token, new data dir."""
    return ["snapshot", "restore", snapshot, "--name", member.name, "--initial-cluster", initial_cluster(members),
            "--initial-cluster-token", token, "--initial-advertise-peer-urls", member.peer_url,
            "--data-dir", member.data_dir]


def restore_marker(sha256: str, member: Member, members: Sequence[Member], token: str) -> dict[str, Any]:
    """What a restored data dir records, so a second run can tell it is already done."""
    return {"snapshot_sha256": sha256, "name": member.name, "initial_cluster": initial_cluster(members),
            "initial_cluster_token": token}


# ------------------------------------------------------------------ what a snapshot holds

def registry_resource(key: str) -> str | None:
    """/registry/<resource>/... -> resource (group-qualified resources keep their group: apps/deployments)."""
    if not key.startswith("/registry/"):
        return None
    parts = key[len("/registry/"):].split("/")
    if len(parts) >= 3 and "." in parts[0]:  # /registry/<group>/<resource>/... (CRDs, aggregated APIs)
        return f"{parts[0]}/{parts[1]}"
    return parts[0] or None


def summarise_kvs(kvs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """From ``etcdctl get --prefix /registry/ -w json`` kvs: keys per resource, and Secret encryption."""
    counts: dict[str, int] = {}
    secrets: dict[str, Any] = {"total": 0, "encrypted": 0, "plaintext": 0, "providers": {}}
    providers: dict[str, int] = {}
    for kv in kvs:
        key = base64.b64decode(kv["key"]).decode(errors="replace")
        resource = registry_resource(key)
        if resource is None:
            continue
        counts[resource] = counts.get(resource, 0) + 1
        if resource == "secrets":
            value = base64.b64decode(kv.get("value", ""))
            secrets["total"] += 1
            provider = kms_provider(value)
            if provider is None:
                secrets["plaintext"] += 1
            else:
                secrets["encrypted"] += 1
                providers[provider] = providers.get(provider, 0) + 1
    secrets["providers"] = providers
    return {"keys_per_resource": dict(sorted(counts.items())), "secrets": secrets}


def kms_provider(value: bytes) -> str | None:
    """The KMS provider name of an encrypted value (``k8s:enc:kms:v2:<name>:...``), None if not KMS-encrypted."""
    for prefix in (KMS_PREFIX, KMS_V1_PREFIX):
        if value.startswith(prefix.encode()):
            rest = value[len(prefix):]
            name, sep, _tail = rest.partition(b":")
            return name.decode(errors="replace") if sep else None
    return None


def swift_object_names(prefix: str, snapshot_name: str) -> tuple[str, str]:
    """Object names of a snapshot and its sidecar in Swift (pure)."""
    return prefix + snapshot_name, prefix + snapshot_name + SIDECAR_SUFFIX


def swift_needs_upload(local_sha256: str, remote_metadata: dict[str, str] | None) -> bool:
    """Upload unless Swift holds an object whose recorded sha256 is the local one (pure).

    ``remote_metadata`` is the object's user metadata (``X-Object-Meta-*``, keys lower-cased by the
    SDK), or None when the object does not exist.
    """
    if not remote_metadata:
        return True
    recorded = {k.lower(): v for k, v in remote_metadata.items()}.get("sha256")
    return recorded != local_sha256
