#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_snapshot
short_description: Take, verify and restore etcd snapshots, with a sha256 sidecar and retention
version_added: 0.1.0
description:
  - C(state=saved) takes a snapshot from one member with C(etcdctl snapshot save) into I(dest), written as a
    hidden partial file, fsynced, checked with C(snapshot status), then renamed; mode 0600. A sidecar JSON
    (C(<snapshot>.json)) records revision, hash, total keys, size, sha256, the member's etcd version and the
    time. A snapshot taken within I(window) seconds is not taken again. Retention deletes beyond the newest
    I(keep) and older than I(max_age_days) (the newest always stays).
  - C(state=verified) restores a snapshot into a scratch directory, starts a throwaway member on a free
    loopback port, reads it, and reports keys per Kubernetes resource under C(/registry/) and whether Secret
    values are encrypted (C(k8s:enc:kms:v2:<provider>:)) and by which provider. Nothing else is touched.
  - C(state=restored) restores a snapshot into a new data directory for each of I(members) (same snapshot,
    a new I(initial_cluster_token)) after checking its sha256 against the sidecar. It refuses a non-empty data
    directory unless I(force). It does not start members.
  - Offline work (status, restore) uses C(etcdutl) when present (required from etcd 3.6), else C(etcdctl).
author:
  - DeployOpen Engineering (@deployopen)
extends_documentation_fragment:
  - deployopen.k8s_openstack.attributes
attributes:
  check_mode:
    support: full
    details: Predicts the snapshot path, the restores and the deletions; runs read-only checks only.
  diff_mode:
    support: none
options:
  state:
    description: What to do.
    type: str
    choices: [saved, verified, restored]
    default: saved
  endpoints:
    description:
      - Client URLs of the members to take the snapshot from (the first that answers is used), with C(saved).
    type: list
    elements: str
    default: [https://127.0.0.1:2379]
  cacert:
    description: CA certificate of the members (kubeadm - C(/etc/kubernetes/pki/etcd/ca.crt)).
    type: path
  cert:
    description: Client certificate (kubeadm - C(/etc/kubernetes/pki/etcd/healthcheck-client.crt)).
    type: path
  key:
    description: Client key (kubeadm - C(/etc/kubernetes/pki/etcd/healthcheck-client.key)).
    type: path
  dest:
    description: Folder for snapshots and sidecars, with C(saved); created with mode 0700.
    type: path
  name_template:
    description: File name of a new snapshot; C({timestamp}) (UTC) is required, C({member}) is the endpoint.
    type: str
    default: "etcd-{member}-{timestamp}.db"
  window:
    description: Seconds during which a snapshot already in I(dest) counts as current (not taken again); 0 always takes one.
    type: int
    default: 0
  keep:
    description: Keep the newest N snapshots in I(dest) (with their sidecars).
    type: int
  max_age_days:
    description: Delete snapshots older than this (the newest always stays).
    type: float
  snapshot:
    description: Snapshot file, with C(verified) and C(restored).
    type: path
  members:
    description: The members to restore, with C(restored); each has C(name), C(peer_url), C(data_dir).
    type: list
    elements: dict
  initial_cluster_token:
    description: New cluster token for the restored cluster, with C(restored).
    type: str
  force:
    description: With C(restored), restore into a data directory that is not empty (its content is moved aside).
    type: bool
    default: false
  etcdctl_path:
    description: etcdctl binary.
    type: path
    default: etcdctl
  etcdutl_path:
    description: etcdutl binary; used when present.
    type: path
    default: etcdutl
  etcd_path:
    description: etcd binary, for the throwaway member of C(verified).
    type: path
    default: etcd
  command_timeout:
    description: Seconds allowed for one etcd command.
    type: int
    default: 300
  swift_container:
    description:
      - With C(saved), also copy the snapshot and its sidecar to this Swift container (created if missing),
        through openstacksdk as I(swift_cloud). Objects carry their sha256 as
        metadata (C(X-Object-Meta-Sha256)); an object already there with the same sha256 is not uploaded
        again, so a reused snapshot whose copy is missing gets its copy.
      - Objects over 5 GiB are uploaded as a static large object by openstacksdk.
    type: str
  swift_prefix:
    description: Prefix of the object names in I(swift_container) (e.g. C(cluster-a/)).
    type: str
    default: ""
  swift_cloud:
    description:
      - The cloud holding I(swift_container), as the C(cloud) option of C(openstack.cloud) modules takes it -
        a C(clouds.yaml) entry name, or a dict of C(openstack.connect) arguments (C(auth), C(region_name)...).
        Unset, openstacksdk reads C(OS_CLOUD) / C(OS_*) from the environment.
      - A separate option because I(cacert), I(cert) and I(key) here are etcd's TLS files.
      - Secret values in its C(auth) are masked in every output.
    type: raw
requirements:
  - etcdctl (and etcdutl for etcd 3.5+ offline work) on the host
  - openstacksdk, only with I(swift_container)
notes:
  - Retention (I(keep), I(max_age_days)) applies to I(dest) only; expire Swift copies with the container's
    own policy (for example C(X-Delete-After) set by a lifecycle job).
"""

EXAMPLES = r"""
- name: Snapshot the kubeadm etcd of a control-plane host, keep a week
  deployopen.k8s_openstack.etcd_snapshot:
    endpoints: [https://127.0.0.1:2379]
    cacert: /etc/kubernetes/pki/etcd/ca.crt
    cert: /etc/kubernetes/pki/etcd/healthcheck-client.crt
    key: /etc/kubernetes/pki/etcd/healthcheck-client.key
    dest: /var/backups/etcd
    window: 3600
    keep: 14
    max_age_days: 7
  register: snap

- name: Snapshot and keep a copy in Swift (same connection options as openstack.cloud)
  deployopen.k8s_openstack.etcd_snapshot:
    endpoints: [https://127.0.0.1:2379]
    dest: /var/backups/etcd
    window: 3600
    swift_container: etcd-backups
    swift_prefix: "{{ cluster_name }}/"
    swift_cloud: backup-project

- name: Verify what the snapshot holds
  deployopen.k8s_openstack.etcd_snapshot:
    state: verified
    snapshot: "{{ snap.snapshot }}"
  register: verified

- name: Restore it into new data dirs for a 3-member cluster
  deployopen.k8s_openstack.etcd_snapshot:
    state: restored
    snapshot: "{{ snap.snapshot }}"
    initial_cluster_token: etcd-restored-20261129
    members:
      - {name: etcd-1, peer_url: https://10.0.0.11:2380, data_dir: /var/lib/etcd-restored}
"""

RETURN = r"""
snapshot:
  description: Path of the snapshot (taken, reused, verified or restored).
  returned: always
  type: str
sidecar:
  description: The sidecar record (revision, hash, total_keys, total_size, sha256, etcd_version, taken_at, endpoint).
  returned: state is saved or restored
  type: dict
reused:
  description: With C(saved), true when a snapshot within the window was found and none was taken.
  returned: state is saved
  type: bool
deleted:
  description: Snapshots removed by retention (or that would be, in check mode).
  returned: state is saved
  type: list
  elements: str
keys_per_resource:
  description: With C(verified), keys under C(/registry/) per resource.
  returned: state is verified
  type: dict
secrets:
  description: With C(verified), Secret counts - total, encrypted, plaintext, providers (name to count).
  returned: state is verified
  type: dict
restored:
  description: With C(restored), the members restored in this run (or that would be).
  returned: state is restored
  type: list
  elements: str
swift:
  description:
    - With I(swift_container), the copy - C(container) and C(objects), each with C(name), C(sha256) and
      C(uploaded) (true when this run uploaded it, or would in check mode).
  returned: state is saved and swift_container is set
  type: dict
"""

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._etcd import (  # noqa: E402
    PARTIAL_PREFIX,
    PARTIAL_SUFFIX,
    RESTORE_MARKER,
    SIDECAR_SUFFIX,
    EtcdInputError,
    Member,
    Snapshot,
    enough_space,
    in_window,
    offline_tool,
    parse_endpoint_status,
    parse_members,
    parse_sidecar,
    parse_status,
    parse_version,
    render_name,
    restore_argv,
    restore_marker,
    retention,
    summarise_kvs,
    swift_needs_upload,
    swift_object_names,
)
from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._openstack import (  # noqa: E402
    Cloud,
    auth_secrets,
    is_not_found,
    sdk_errors,
)

CHUNK = 4 * 1024 * 1024


def sha256_file(path: str) -> str:
    return file_digests(path)[0]


def file_digests(path: str) -> tuple[str, str]:
    """sha256 and md5 in one read (md5 only because Swift's ETag is one: not for security)."""
    sha = hashlib.sha256()
    md5 = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            sha.update(block)
            md5.update(block)
    return sha.hexdigest(), md5.hexdigest()


def write_json_atomic(path: str, data: dict[str, Any]) -> None:
    tmp = os.path.join(os.path.dirname(path), PARTIAL_PREFIX + os.path.basename(path) + PARTIAL_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def find_binary(module: AnsibleModule, name: str) -> str | None:
    """An executable by absolute path or on PATH; None when there is none."""
    if os.path.isabs(name):
        return name if os.access(name, os.X_OK) else None
    return module.get_bin_path(name)


class Etcd:
    """The etcd binaries on this host, run with a timeout; every failure becomes a clear fail_json."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        params = module.params
        etcdctl = find_binary(module, params["etcdctl_path"])
        if not etcdctl:
            module.fail_json(msg=f"etcdctl not found ({params['etcdctl_path']}): install etcd-client or set "
                                 "etcdctl_path")
        self.etcdctl: str = etcdctl or ""
        self.etcdutl = find_binary(module, params["etcdutl_path"])
        self.ctl_version = parse_version(self.run([self.etcdctl, "version"], "reading etcdctl's version"))
        try:
            self.offline = offline_tool(self.etcdutl is not None, self.ctl_version)
        except EtcdInputError as exc:
            module.fail_json(msg=str(exc))

    @property
    def offline_bin(self) -> str:
        return str(self.etcdutl if self.offline == "etcdutl" else self.etcdctl)

    def tls_args(self) -> list[str]:
        params = self.module.params
        args = []
        for option in ("cacert", "cert", "key"):
            if params[option]:
                if not os.path.isfile(params[option]):
                    self.module.fail_json(msg=f"{option} {params[option]} does not exist or is not a file: give "
                                              "the member's TLS files (kubeadm keeps them in /etc/kubernetes/pki/etcd)")
                args.append(f"--{option}={params[option]}")
        return args

    def attempt(self, argv: list[str]) -> tuple[int, str, str]:
        """Run a command with ETCDCTL_API=3 under coreutils' timeout (rc 124 when it ran out of time)."""
        limit = str(self.module.params["command_timeout"])
        rc, out, err = self.module.run_command(["timeout", limit, *argv], environ_update={"ETCDCTL_API": "3"})
        return int(rc), str(out), str(err)

    def run(self, argv: list[str], action: str) -> str:
        rc, out, err = self.attempt(argv)
        if rc == 124:
            self.module.fail_json(msg=f"{action}: {' '.join(argv[:3])} did not finish in "
                                      f"{self.module.params['command_timeout']}s (command_timeout)")
        if rc != 0:
            self.module.fail_json(msg=f"{action} failed: {(err or out).strip()[-800:]}", rc=rc, cmd=" ".join(argv))
        return out

    def status(self, snapshot: str) -> dict[str, int]:
        out = self.run([self.offline_bin, "snapshot", "status", snapshot, "-w", "json"],
                       f"reading the status of {snapshot}")
        try:
            return parse_status(out)
        except EtcdInputError as exc:
            self.module.fail_json(msg=f"{snapshot} is not a readable etcd snapshot: {exc}")
            raise


# ------------------------------------------------------------------ saved

def existing_snapshots(dest: str) -> list[Snapshot]:
    found: list[Snapshot] = []
    if not os.path.isdir(dest):
        return found
    for entry in os.listdir(dest):
        if entry.endswith(SIDECAR_SUFFIX) and not entry.startswith(PARTIAL_PREFIX):
            snap_path = os.path.join(dest, entry[: -len(SIDECAR_SUFFIX)])
            if os.path.isfile(snap_path):
                try:
                    with open(os.path.join(dest, entry)) as handle:
                        found.append(parse_sidecar(handle.read(), snap_path))
                except (OSError, ValueError, KeyError):
                    continue  # not ours or damaged: never deleted, never reused
    return found


def run_saved(module: AnsibleModule, etcd: Etcd) -> dict[str, Any]:
    result = take_snapshot(module, etcd)
    if module.params["swift_container"]:
        result["swift"] = copy_to_swift(module, result["snapshot"], bool(result.get("reused")) or
                                        not module.check_mode)
        result["changed"] = result["changed"] or any(o["uploaded"] for o in result["swift"]["objects"])
    return result


def copy_to_swift(module: AnsibleModule, snapshot: str, exists: bool) -> dict[str, Any]:
    """Copy the snapshot and its sidecar to Swift unless an object with the same sha256 is there."""
    container = module.params["swift_container"]
    names = swift_object_names(module.params["swift_prefix"], os.path.basename(snapshot))
    cloud = Cloud(module, params={"cloud": module.params["swift_cloud"]})
    conn = cloud.conn
    if not exists:
        # Check mode, new snapshot: nothing local to compare yet; both objects would be uploaded.
        return {"container": container, "objects": [{"name": n, "sha256": None, "uploaded": True} for n in names]}
    sidecar_path = snapshot + SIDECAR_SUFFIX
    with open(sidecar_path) as handle:
        sidecar = json.load(handle)
    local = [(names[0], snapshot, sidecar["sha256"], sidecar.get("md5")), (names[1], sidecar_path, None, None)]
    objects = []
    container_exists = True
    try:
        conn.object_store.get_container_metadata(container)
    except sdk_errors() as exc:
        if not is_not_found(exc):
            cloud.fail(exc, f"reading Swift container {container}")
        container_exists = False
    if not container_exists and not module.check_mode:
        try:
            conn.object_store.create_container(name=container)
        except sdk_errors() as exc:
            cloud.fail(exc, f"creating Swift container {container}")
    for name, path, sha256, md5 in local:
        if sha256 is None or md5 is None:
            sha256, md5 = file_digests(path)
        remote: dict[str, str] | None = None
        if container_exists:
            try:
                remote = dict(conn.object_store.get_object_metadata(name, container=container).metadata or {})
            except sdk_errors() as exc:
                if not is_not_found(exc):
                    cloud.fail(exc, f"reading Swift object {container}/{name}")
        upload = swift_needs_upload(sha256, remote)
        if upload and not module.check_mode:
            try:
                conn.create_object(container, name, filename=path, md5=md5, sha256=sha256,
                                   metadata={"sha256": sha256})
            except sdk_errors() as exc:
                cloud.fail(exc, f"uploading {path} to Swift {container}/{name}")
        objects.append({"name": name, "sha256": sha256, "uploaded": upload})
    return {"container": container, "objects": objects}


def take_snapshot(module: AnsibleModule, etcd: Etcd) -> dict[str, Any]:
    params = module.params
    if not params["dest"]:
        module.fail_json(msg="state=saved needs dest (a folder for the snapshots)")
    dest = params["dest"]
    now = datetime.now(timezone.utc)
    snapshots = existing_snapshots(dest)
    recent = in_window(snapshots, now, params["window"])
    if recent is not None:
        with open(recent.path + SIDECAR_SUFFIX) as handle:
            sidecar = json.load(handle)
        return {"changed": False, "reused": True, "snapshot": recent.path, "sidecar": sidecar, "deleted": []}

    tls = etcd.tls_args()
    endpoint: str = ""
    member_status: dict[str, Any] = {}
    errors = []
    for candidate in params["endpoints"]:
        rc, out, err = etcd.attempt([etcd.etcdctl, f"--endpoints={candidate}", *tls, "--dial-timeout=5s",
                                     "--command-timeout=10s", "endpoint", "status", "-w", "json"])
        if rc == 0:
            endpoint, member_status = candidate, parse_endpoint_status(out)
            break
        errors.append(f"{candidate}: {(err or out).strip().splitlines()[-1:]}")
    if not endpoint:
        module.fail_json(msg=f"no etcd member answered ({'; '.join(errors)}): check endpoints, the TLS files and "
                             "that the member is running")
    try:
        name = render_name(params["name_template"], now, endpoint)
    except EtcdInputError as exc:
        module.fail_json(msg=str(exc))
    path = os.path.join(dest, name)
    doomed = retention([*snapshots, Snapshot(path, now, "")], params["keep"], params["max_age_days"], now)
    if module.check_mode:
        return {"changed": True, "reused": False, "snapshot": path, "sidecar": {},
                "deleted": [s.path for s in doomed]}

    os.makedirs(dest, mode=0o700, exist_ok=True)
    free = shutil.disk_usage(dest).free
    if not enough_space(free, member_status["db_size"]):
        module.fail_json(msg=f"not enough space in {dest}: {free} bytes free, the database is "
                             f"{member_status['db_size']} bytes (needs 10% more): free space or choose another dest")
    partial = os.path.join(dest, PARTIAL_PREFIX + name + PARTIAL_SUFFIX)
    try:
        etcd.run([etcd.etcdctl, f"--endpoints={endpoint}", *tls, "snapshot", "save", partial],
                 f"taking a snapshot from {endpoint}")
        os.chmod(partial, 0o600)
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        status = etcd.status(partial)
        digest, md5 = file_digests(partial)
        sidecar = {**status, "sha256": digest, "md5": md5, "etcd_version": member_status["version"], "endpoint": endpoint,
                   "taken_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "file": name,
                   "bytes": os.path.getsize(partial), "tool": etcd.offline}
        os.replace(partial, path)
        write_json_atomic(path + SIDECAR_SUFFIX, sidecar)
        fsync_dir(dest)
    finally:
        # A half-written snapshot never stays looking like a good one.
        for leftover in (partial, partial + ".part"):
            if os.path.exists(leftover):
                os.unlink(leftover)
    for snap in doomed:
        for victim in (snap.path, snap.path + SIDECAR_SUFFIX):
            if os.path.exists(victim):
                os.unlink(victim)
    return {"changed": True, "reused": False, "snapshot": path, "sidecar": sidecar, "deleted": [s.path for s in doomed]}


# ------------------------------------------------------------------ restored

def load_sidecar(module: AnsibleModule, snapshot: str) -> dict[str, Any]:
    sidecar_path = snapshot + SIDECAR_SUFFIX
    if not os.path.isfile(snapshot):
        module.fail_json(msg=f"snapshot {snapshot} does not exist")
    if not os.path.isfile(sidecar_path):
        module.fail_json(msg=f"{sidecar_path} is missing: without the sidecar the snapshot's sha256 cannot be checked")
    with open(sidecar_path) as handle:
        sidecar: dict[str, Any] = json.load(handle)
    return sidecar


def digest_mismatch(snapshot: str, digest: str, sidecar: dict[str, Any]) -> str | None:
    if digest == sidecar.get("sha256"):
        return None
    return (f"{snapshot} is corrupt or truncated: sha256 {digest} does not match the sidecar's "
            f"{sidecar.get('sha256')}; do not restore it")


class BackgroundDigest(threading.Thread):
    """sha256 of the snapshot, computed while the restores run (hashlib releases the GIL on large
    reads): the check costs no wall time, and a mismatch still discards every restored data dir."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.digest: str | None = None
        self.error: OSError | None = None

    def run(self) -> None:
        try:
            self.digest = sha256_file(self.path)
        except OSError as exc:
            self.error = exc


def data_dir_state(member: Member, marker: dict[str, Any]) -> str:
    """empty | done (restored from this snapshot already) | occupied."""
    if not os.path.exists(member.data_dir) or not os.listdir(member.data_dir):
        return "empty"
    marker_path = os.path.join(member.data_dir, RESTORE_MARKER)
    if os.path.isfile(marker_path):
        with open(marker_path) as handle:
            if json.load(handle) == marker:
                return "done"
    return "occupied"


def run_restored(module: AnsibleModule, etcd: Etcd) -> dict[str, Any]:
    params = module.params
    if not params["snapshot"] or not params["initial_cluster_token"]:
        module.fail_json(msg="state=restored needs snapshot and initial_cluster_token (a new one for the new cluster)")
    try:
        members = parse_members(params["members"] or [])
    except EtcdInputError as exc:
        module.fail_json(msg=str(exc))
    snapshot = params["snapshot"]
    sidecar = load_sidecar(module, snapshot)
    token = params["initial_cluster_token"]
    todo = []
    for member in members:
        marker = restore_marker(sidecar["sha256"], member, members, token)
        state = data_dir_state(member, marker)
        if state == "done":
            continue
        if state == "occupied" and not params["force"]:
            module.fail_json(msg=f"data dir {member.data_dir} of {member.name} is not empty: refusing to restore over "
                                 "it (set force=true to move its content aside)")
        todo.append((member, marker, state))
    result = {"changed": bool(todo), "snapshot": snapshot, "sidecar": sidecar,
              "restored": [item[0].name for item in todo]}
    if module.check_mode or not todo:
        # Nothing is written: check the snapshot before saying a restore would (or did) use it.
        problem = digest_mismatch(snapshot, sha256_file(snapshot), sidecar)
        if problem:
            module.fail_json(msg=problem)
        return result
    digest = BackgroundDigest(snapshot)
    digest.start()
    undo: list[tuple[str, str | None]] = []   # (restored data dir, content moved aside or None)
    try:
        for member, marker, state in todo:
            aside = None
            if state == "occupied":
                aside = f"{member.data_dir}.before-restore-{int(time.time())}"
                os.rename(member.data_dir, aside)
            elif os.path.isdir(member.data_dir):
                os.rmdir(member.data_dir)
            undo.append((member.data_dir, aside))
            os.makedirs(os.path.dirname(member.data_dir.rstrip("/")) or "/", exist_ok=True)
            code, out, err = etcd.attempt([etcd.offline_bin, *restore_argv(etcd.offline, snapshot, member, members, token)])
            if code != 0:
                raise RestoreFailed(f"restoring {snapshot} for {member.name} failed (rc {code}): "
                                    f"{(err or out).strip()[-800:]}")
            os.chmod(member.data_dir, 0o700)
        digest.join()
        if digest.error is not None:
            raise RestoreFailed(f"reading {snapshot} for its sha256 failed: {digest.error}")
        problem = digest_mismatch(snapshot, str(digest.digest), sidecar)
        if problem:
            raise RestoreFailed(problem)
    except RestoreFailed as exc:
        digest.join()
        for data_dir, aside in reversed(undo):
            shutil.rmtree(data_dir, ignore_errors=True)
            if aside is not None:
                os.rename(aside, data_dir)
        # A snapshot that is not the recorded one explains a failed restore best: say that first.
        mismatch = digest_mismatch(snapshot, str(digest.digest), sidecar) if digest.digest else None
        module.fail_json(msg=f"{mismatch or exc} (every data dir is back as it was)")
    # The marker is written only once the snapshot is proven: a data dir without it is never "done".
    for member, marker, _state in todo:
        write_json_atomic(os.path.join(member.data_dir, RESTORE_MARKER), marker)
    return result


class RestoreFailed(Exception):
    """A restore step failed; the data dirs are put back before failing."""


# ------------------------------------------------------------------ verified

def stop_pid(pid: int, timeout: float = 15.0) -> None:
    """Stop the throwaway member: SIGTERM, then SIGKILL if it is still there after ``timeout``."""
    if pid <= 0:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        if not os.path.exists(f"/proc/{pid}"):
            return


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_verified(module: AnsibleModule, etcd: Etcd) -> dict[str, Any]:
    params = module.params
    snapshot = params["snapshot"]
    if not snapshot or not os.path.isfile(snapshot):
        module.fail_json(msg=f"state=verified needs an existing snapshot (got {snapshot})")
    status = etcd.status(snapshot)
    etcd_bin = find_binary(module, params["etcd_path"])
    if not etcd_bin:
        module.fail_json(msg=f"etcd binary not found ({params['etcd_path']}): set etcd_path")
    scratch = tempfile.mkdtemp(prefix="etcd-verify-")
    pid = 0
    try:
        client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
        data_dir = os.path.join(scratch, "data")
        verify_member = Member("verify", peer, data_dir)
        etcd.run([etcd.offline_bin, *restore_argv(etcd.offline, snapshot, verify_member, [verify_member],
                                                  "deployopen-verify")], f"restoring {snapshot} into a scratch dir")
        log_path = os.path.join(scratch, "etcd.log")
        # The member must keep running while it is read: the shell starts it in the background (output to
        # a log) and prints its pid; run_command returns once the shell exits.
        rc, out, err = module.run_command(
            ["/bin/sh", "-c", 'exec "$0" "$@" >"$ETCD_VERIFY_LOG" 2>&1 </dev/null & echo $!', etcd_bin,
             "--name", "verify", "--data-dir", data_dir, "--listen-client-urls", client,
             "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"verify={peer}"], environ_update={"ETCD_VERIFY_LOG": log_path})
        if rc != 0 or not out.strip().isdigit():
            module.fail_json(msg=f"could not start a throwaway etcd member: {err or out}")
        pid = int(out.strip())
        deadline = time.monotonic() + 60
        while True:
            if etcd.attempt([etcd.etcdctl, f"--endpoints={client}", "--dial-timeout=1s", "endpoint", "health"])[0] == 0:
                break
            if not os.path.exists(f"/proc/{pid}") or time.monotonic() > deadline:
                with open(log_path) as handle:
                    tail = handle.read()[-800:]
                module.fail_json(msg=f"the throwaway member for {snapshot} did not come up: {tail}")
            time.sleep(0.2)
        out = etcd.run([etcd.etcdctl, f"--endpoints={client}", "get", "--prefix", "/registry/", "-w", "json"],
                       f"reading {snapshot}")
        kvs = json.loads(out).get("kvs") or []
        summary = summarise_kvs(kvs)
    finally:
        stop_pid(pid)
        shutil.rmtree(scratch, ignore_errors=True)
    return {"changed": False, "snapshot": snapshot, "status": status, **summary}


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            state={"type": "str", "default": "saved", "choices": ["saved", "verified", "restored"]},
            endpoints={"type": "list", "elements": "str", "default": ["https://127.0.0.1:2379"]},
            cacert={"type": "path"},
            cert={"type": "path"},
            key={"type": "path", "no_log": False},
            dest={"type": "path"},
            name_template={"type": "str", "default": "etcd-{member}-{timestamp}.db"},
            window={"type": "int", "default": 0},
            keep={"type": "int", "no_log": False},
            max_age_days={"type": "float"},
            snapshot={"type": "path"},
            members={"type": "list", "elements": "dict"},
            initial_cluster_token={"type": "str", "no_log": False},
            force={"type": "bool", "default": False},
            etcdctl_path={"type": "path", "default": "etcdctl"},
            etcdutl_path={"type": "path", "default": "etcdutl"},
            etcd_path={"type": "path", "default": "etcd"},
            command_timeout={"type": "int", "default": 300},
            swift_container={"type": "str"},
            swift_prefix={"type": "str", "default": ""},
            swift_cloud={"type": "raw"},
        ),
        supports_check_mode=True,
    )
    # Before any fail_json: a swift_cloud dict's secrets must not reach the result's invocation.
    module.no_log_values.update(auth_secrets({"cloud": module.params["swift_cloud"]}))
    if module.params["keep"] is not None and module.params["keep"] < 1:
        module.fail_json(msg="keep must be at least 1")
    etcd = Etcd(module)
    state = module.params["state"]
    if state == "saved":
        result = run_saved(module, etcd)
    elif state == "restored":
        result = run_restored(module, etcd)
    else:
        result = run_verified(module, etcd)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
