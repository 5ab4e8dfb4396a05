from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _etcd as e

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("template,member,expected", [
    ("etcd-{member}-{timestamp}.db", "https://10.0.0.1:2379", "etcd-10.0.0.1-2379-20261129T120000Z.db"),
    ("snap-{timestamp}.db", "x", "snap-20261129T120000Z.db"),
])
def test_render_name(template: str, member: str, expected: str) -> None:
    assert e.render_name(template, NOW, member) == expected


@pytest.mark.parametrize("template,message", [
    ("etcd.db", "must contain {timestamp}"),
    ("{host}-{timestamp}.db", "unknown field"),
    ("../{timestamp}.db", "a file name, not a path"),
    (".{timestamp}.db", "not hidden"),
])
def test_render_name_rejects(template: str, message: str) -> None:
    with pytest.raises(e.EtcdInputError, match=message):
        e.render_name(template, NOW, "m")


@pytest.mark.parametrize("output,expected", [
    ('{"hash":861091195,"revision":3,"totalKey":8,"totalSize":20480}',
     {"hash": 861091195, "revision": 3, "total_keys": 8, "total_size": 20480}),
    ('Deprecated: use etcdutl\n{"hash":1,"revision":2,"totalKey":3,"totalSize":4}',
     {"hash": 1, "revision": 2, "total_keys": 3, "total_size": 4}),
])
def test_parse_status(output: str, expected: dict[str, int]) -> None:
    assert e.parse_status(output) == expected


@pytest.mark.parametrize("output", ["", "snapshot file integrity check failed", '{"hash": 1}'])
def test_parse_status_rejects(output: str) -> None:
    with pytest.raises(e.EtcdInputError, match="cannot read the snapshot status"):
        e.parse_status(output)


def test_parse_endpoint_status() -> None:
    out = ('[{"Endpoint":"http://127.0.0.1:2379","Status":{"header":{"revision":3},"version":"3.5.1",'
           '"dbSize":20480}}]')
    assert e.parse_endpoint_status(out) == {"version": "3.5.1", "db_size": 20480, "revision": 3}


@pytest.mark.parametrize("has_utl,version,tool", [
    (True, (3, 4, 23), "etcdutl"), (False, (3, 4, 23), "etcdctl"), (False, (3, 5, 1), "etcdctl"),
    (True, (3, 6, 0), "etcdutl"),
])
def test_offline_tool(has_utl: bool, version: tuple[int, int, int], tool: str) -> None:
    assert e.offline_tool(has_utl, version) == tool


def test_offline_tool_needs_etcdutl_from_36() -> None:
    with pytest.raises(e.EtcdInputError, match="etcd 3.6 removed"):
        e.offline_tool(False, (3, 6, 2))


@pytest.mark.parametrize("free,db,ok", [(10**9, 10**8, True), (112 * 2**20, 100 * 2**20, True),
                                        (100 * 2**20, 100 * 2**20, False), (0, 0, False)])
def test_enough_space(free: int, db: int, ok: bool) -> None:
    assert e.enough_space(free, db) is ok


def snaps(*ages_minutes: int) -> list[e.Snapshot]:
    return [e.Snapshot(f"/s/{m}", NOW - timedelta(minutes=m), "x") for m in ages_minutes]


@pytest.mark.parametrize("ages,window,expected", [
    ([5, 90], 3600, "/s/5"), ([90], 3600, None), ([5], 0, None), ([1, 5], 3600, "/s/1"), ([], 3600, None),
])
def test_in_window(ages: list[int], window: int, expected: str | None) -> None:
    found = e.in_window(snaps(*ages), NOW, window)
    assert (found.path if found else None) == expected


@pytest.mark.parametrize("ages,keep,max_days,deleted", [
    ([0, 60, 120], 2, None, ["/s/120"]),
    ([0, 60, 120], 1, None, ["/s/60", "/s/120"]),
    ([0, 60 * 24 * 3, 60 * 24 * 9], None, 7, [f"/s/{60 * 24 * 9}"]),
    ([60 * 24 * 30], 5, 7, []),  # the newest always stays, however old
    ([0, 60], None, None, []),
])
def test_retention(ages: list[int], keep: int | None, max_days: float | None, deleted: list[str]) -> None:
    assert [s.path for s in e.retention(snaps(*ages), keep, max_days, NOW)] == deleted


MEMBERS = [{"name": "a", "peer_url": "https://10.0.0.1:2380", "data_dir": "/d/a"},
           {"name": "b", "peer_url": "https://10.0.0.2:2380", "data_dir": "/d/b"}]


def test_restore_argv_and_marker() -> None:
    members = e.parse_members(MEMBERS)
    argv = e.restore_argv("etcdutl", "/s.db", members[1], members, "tok")
    assert argv == ["snapshot", "restore", "/s.db", "--name", "b",
                    "--initial-cluster", "a=https://10.0.0.1:2380,b=https://10.0.0.2:2380",
                    "--initial-cluster-token", "tok", "--initial-advertise-peer-urls", "https://10.0.0.2:2380",
                    "--data-dir", "/d/b"]
    assert e.restore_marker("abc", members[0], members, "tok")["snapshot_sha256"] == "abc"


@pytest.mark.parametrize("raw,message", [
    ([], "members is empty"),
    ([{"name": "a", "peer_url": "https://x:2380"}], "lacks data_dir"),
    ([{"name": "a", "peer_url": "10.0.0.1:2380", "data_dir": "/d"}], "must look like"),
    ([MEMBERS[0], {**MEMBERS[1], "name": "a"}], "duplicate names"),
    ([MEMBERS[0], {**MEMBERS[1], "data_dir": "/d/a"}], "duplicate data_dirs"),
])
def test_parse_members_rejects(raw: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(e.EtcdInputError, match=message):
        e.parse_members(raw)


@pytest.mark.parametrize("key,resource", [
    ("/registry/pods/default/web-0", "pods"),
    ("/registry/services/specs/default/web", "services"),
    ("/registry/apiextensions.k8s.io/customresourcedefinitions/x", "apiextensions.k8s.io/customresourcedefinitions"),
    ("/registry/deployments/default/web", "deployments"),
    ("/other/key", None),
])
def test_registry_resource(key: str, resource: str | None) -> None:
    assert e.registry_resource(key) == resource


def kv(key: str, value: bytes) -> dict[str, str]:
    return {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value).decode()}


def test_summarise_kvs() -> None:
    summary = e.summarise_kvs([
        kv("/registry/secrets/a/x", b"k8s:enc:kms:v2:barbican:\x00\x01"),
        kv("/registry/secrets/a/y", b"k8s:enc:kms:v2:vault:\x02"),
        kv("/registry/secrets/a/z", b"\x6b\x38\x73\x00plain protobuf"),
        kv("/registry/pods/a/p", b"pod"),
        kv("/compact_rev_key", b"x"),
    ])
    assert summary["keys_per_resource"] == {"pods": 1, "secrets": 3}
    assert summary["secrets"] == {"total": 3, "encrypted": 2, "plaintext": 1,
                                  "providers": {"barbican": 1, "vault": 1}}


@pytest.mark.parametrize("value,provider", [
    (b"k8s:enc:kms:v2:barbican:data", "barbican"), (b"k8s:enc:kms:v1:old:data", "old"),
    (b"k8s:enc:aescbc:v1:key1:data", None), (b"k8s:enc:kms:v2:", None), (b"plain", None),
])
def test_kms_provider(value: bytes, provider: str | None) -> None:
    assert e.kms_provider(value) == provider


def test_swift_object_names() -> None:
    assert e.swift_object_names("cluster-a/", "etcd-x.db") == ("cluster-a/etcd-x.db", "cluster-a/etcd-x.db.json")
    assert e.swift_object_names("", "s.db") == ("s.db", "s.db.json")


@pytest.mark.parametrize("remote,upload", [
    (None, True),                                   # no object
    ({}, True),                                     # object without a recorded sha256
    ({"sha256": "abc"}, False),                     # the same content
    ({"Sha256": "abc"}, False),                     # header case does not matter
    ({"sha256": "other"}, True),                    # another snapshot under that name: replace it
])
def test_swift_needs_upload(remote: dict[str, str] | None, upload: bool) -> None:
    assert e.swift_needs_upload("abc", remote) is upload
