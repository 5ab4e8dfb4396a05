"""A small Kubernetes REST client (JSON over HTTPS, bearer token from a kubeconfig): no new dependency in the
services' virtualenv, and nothing between this stand-in and the wire protocol."""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml


class KubeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


# (group/version prefix, plural, namespaced) of each kind the stand-ins touch.
KINDS: dict[str, tuple[str, str, bool]] = {
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "Service": ("/api/v1", "services", True),
    "Secret": ("/api/v1", "secrets", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Event": ("/api/v1", "events", True),
    "PersistentVolume": ("/api/v1", "persistentvolumes", False),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
    "StorageClass": ("/apis/storage.k8s.io/v1", "storageclasses", False),
    "VolumeAttachment": ("/apis/storage.k8s.io/v1", "volumeattachments", False),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "DaemonSet": ("/apis/apps/v1", "daemonsets", True),
}


class Kube:
    def __init__(self, kubeconfig: Path, timeout: float = 30) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context_name = config.get("current-context") or config["contexts"][0]["name"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = cluster["server"].rstrip("/")
        self.token = user.get("token", "")
        self.timeout = timeout
        self.context = ssl.create_default_context()
        if cluster.get("certificate-authority-data"):
            self.context.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif cluster.get("certificate-authority"):
            self.context.load_verify_locations(cafile=cluster["certificate-authority"])
        if cluster.get("insecure-skip-tls-verify"):
            self.context.check_hostname = False
            self.context.verify_mode = ssl.CERT_NONE
        if user.get("client-certificate-data"):
            with tempfile.NamedTemporaryFile("w", delete=False) as cert, tempfile.NamedTemporaryFile("w", delete=False) as key:
                cert.write(base64.b64decode(user["client-certificate-data"]).decode())
                key.write(base64.b64decode(user["client-key-data"]).decode())
            self.context.load_cert_chain(cert.name, key.name)
            Path(cert.name).unlink()
            Path(key.name).unlink()

    # ------------------------------------------------------------------ plumbing

    def path(self, kind: str, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        prefix, plural, namespaced = KINDS[kind]
        path = prefix
        if namespaced and namespace:
            path += f"/namespaces/{namespace}"
        path += f"/{plural}"
        if name:
            path += f"/{urllib.parse.quote(name)}"
        if sub:
            path += f"/{sub}"
        return path

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:  # noqa: S310
                text = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = json.loads(raw).get("message", raw.decode(errors="replace"))
            except ValueError:
                message = raw.decode(errors="replace")
            raise KubeError(exc.code, message) from exc
        return json.loads(text) if text else None

    # ------------------------------------------------------------------ verbs

    def list(self, kind: str, namespace: str | None = None, label_selector: str = "") -> list[dict[str, Any]]:
        path = self.path(kind, namespace)
        if label_selector:
            path += "?labelSelector=" + urllib.parse.quote(label_selector)
        return list(self.request("GET", path).get("items") or [])

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.request("GET", self.path(kind, namespace, name)))
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise

    def create(self, kind: str, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.request("POST", self.path(kind, namespace), body))

    def replace(self, kind: str, namespace: str | None, name: str, body: dict[str, Any], sub: str = "") -> dict[str, Any]:
        return dict(self.request("PUT", self.path(kind, namespace, name, sub), body))

    def patch(self, kind: str, namespace: str | None, name: str, body: Any, sub: str = "",
              content_type: str = "application/merge-patch+json") -> dict[str, Any] | None:
        try:
            return dict(self.request("PATCH", self.path(kind, namespace, name, sub), body, content_type))
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        try:
            self.request("DELETE", self.path(kind, namespace, name))
        except KubeError as exc:
            if exc.code == 404:
                return False
            raise
        return True
