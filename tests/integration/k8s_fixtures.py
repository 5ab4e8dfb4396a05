"""Helpers for the Kubernetes API tests: the lab API server (``python -m lab.k8s``) started as a real process
on a free port against the lab's real etcd, each server under its own etcd key prefix (deleted afterwards);
or, for the ``real`` variant, the cluster $KUBECONFIG points at.

The pytest fixtures built on these (``lab_etcd``, ``lab_k8s``, ``cluster``, ``namespace``) are in conftest.py;
test modules import the helpers they use by name.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from labtest import LAB_HOME, REPO, free_port

from lab.k8s.etcd import Etcd

ETCD_ENDPOINTS = os.environ.get("LAB_ETCD_ENDPOINTS",
                                "http://127.0.0.1:23791,http://127.0.0.1:23792,http://127.0.0.1:23793").split(",")
# kubectl <= 1.36 (the Debian machine image has 1.32): kubectl 1.37 sends protobuf, which the lab API does not speak.
KUBECTL = os.environ.get("KUBECTL", "/usr/bin/kubectl")

__all__ = ["core_api", "apps_api", "storage_api", "coordination_api", "LabK8s", "Cluster", "start_lab_k8s", "stop_lab_k8s",
           "kubectl", "api_client_for", "ETCD_ENDPOINTS", "KUBECTL", "LAB_HOME"]


@dataclass
class LabK8s:
    """One running lab API server."""

    url: str
    data_dir: Path
    prefix: str
    proc: subprocess.Popen[bytes]
    log: Path
    etcd: Etcd
    args: list[str] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def ca(self) -> Path:
        return self.data_dir / "pki" / "ca.crt"

    @property
    def token(self) -> str:
        return (self.data_dir / "token").read_text().strip()

    def raw(self, method: str, path: str, body: Any = None, token: str | None = "",
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """One HTTP request with urllib (no Kubernetes client in the way): status code and decoded JSON."""
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token or self.token}"
        data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=all_headers)
        context = ssl.create_default_context(cafile=str(self.ca))
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as response:  # noqa: S310 - lab
                text = response.read()
                code = response.status
        except urllib.error.HTTPError as exc:
            text, code = exc.read(), exc.code
        try:
            return code, json.loads(text)
        except ValueError:
            return code, text.decode(errors="replace")

    def etcd_value(self, key: str) -> tuple[bytes, int] | None:
        kv, _rev = self.etcd.get((self.prefix + key).encode())
        return (kv.value, kv.mod_revision) if kv else None


def start_lab_k8s(data_dir: Path, *, prefix: str | None = None, extra: list[str] | None = None,
                  controllers: bool = True) -> LabK8s:
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    prefix = prefix or f"/lab-test-{uuid.uuid4().hex[:12]}/registry"
    log = data_dir / f"server-{port}.log"
    args = [sys.executable, "-m", "lab.k8s", "--etcd", ",".join(ETCD_ENDPOINTS), "--port", str(port),
            "--data-dir", str(data_dir), "--prefix", prefix, *(extra or [])]
    if not controllers:
        args.append("--no-controllers")
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    server = LabK8s(f"https://127.0.0.1:{port}", data_dir, prefix, proc, log, Etcd(ETCD_ENDPOINTS), args)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the lab API server exited ({proc.returncode}):\n{log.read_text()}", pytrace=False)
        if server.ca.exists() and server.kubeconfig.exists():
            try:
                code, _body = server.raw("GET", "/readyz", token=None)
                if code == 200:
                    return server
            except OSError:
                pass
        time.sleep(0.2)
    proc.terminate()
    pytest.fail(f"the lab API server did not answer in 30 s:\n{log.read_text()}", pytrace=False)


def stop_lab_k8s(server: LabK8s, wipe: bool = True) -> None:
    """Stop the server this test started (by its own Popen handle) and delete its etcd keys."""
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(5)
    if wipe:
        server.etcd.delete_prefix(server.prefix.rsplit("/registry", 1)[0].encode() + b"/")


def api_client_for(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


@dataclass
class Cluster:
    """What a test runs against: the lab server, or the real cluster $KUBECONFIG names."""

    variant: str  # "lab" or "real"
    kubeconfig: Path
    api: client.ApiClient
    lab: LabK8s | None

    def require_lab(self, why: str) -> LabK8s:
        if self.lab is None:
            pytest.skip(f"lab only: {why}")
        return self.lab


def kubectl(kubeconfig: Path, *args: str, timeout: float = 60, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], input=stdin, text=True,
                          capture_output=True, timeout=timeout, env=env, check=False)


# The client's models declare every field Optional; tests assert on the shapes they get, so they read the
# typed APIs' results as Any instead of narrowing each attribute.
def core_api(api: client.ApiClient) -> Any:
    return client.CoreV1Api(api)


def apps_api(api: client.ApiClient) -> Any:
    return client.AppsV1Api(api)


def storage_api(api: client.ApiClient) -> Any:
    return client.StorageV1Api(api)


def coordination_api(api: client.ApiClient) -> Any:
    return client.CoordinationV1Api(api)
