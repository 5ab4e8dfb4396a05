"""``K8sApi``: the lab's Kubernetes API server as a lab service (``lab up`` starts it after the tenant seed,
because Secrets are encrypted with the seeded Barbican key ``lab-k8s-kms``).

Its encryption is driven by the files the ``barbican_kms`` role renders for the lab cluster
(``<lab>/k8s/barbican-kms/encryption-config.yaml`` and the plugin's ``cloud.conf``) once ``site.yml`` has run;
before that (a fresh lab), by the same two files written here from the lab's clouds.yaml."""

from __future__ import annotations

import json
import shutil
import ssl
import time
import urllib.request
from pathlib import Path

from ..core import CLUSTER_KMS_KEY, HOST, PORTS, REPO_ROOT, Lab, LabError, Process, ensure_venv, log, wait_for, write_private
from .etcd import Etcd, EtcdError
from .kms import KmsError, find_key_id, gcfg_escape

ETCD_URLS = [f"http://{HOST}:{PORTS[m]}" for m in ("etcd-1-client", "etcd-2-client", "etcd-3-client")]
CLUSTER_KEY_NAME = CLUSTER_KMS_KEY
CLUSTER_CLOUD = "lab-k8s-cluster"


def api_port() -> int:
    return PORTS.get("k8s-api", 26443)


class K8sApi:
    name = "k8s-api"

    def dir(self, lab: Lab) -> Path:
        return lab.data / "k8s-api"

    def kubeconfig(self, lab: Lab) -> Path:
        return lab.home / "kubeconfig"

    def url(self) -> str:
        return f"https://{HOST}:{api_port()}"

    def install(self, lab: Lab) -> None:
        ensure_venv(lab)  # cryptography comes with the OpenStack services

    def _kms_files(self, lab: Lab) -> tuple[Path, Path]:
        """The plugin's cloud.conf (the cluster's service user, the seeded key) and the EncryptionConfiguration,
        as the barbican_kms role renders them for a real cluster."""
        import yaml  # the services' venv has PyYAML

        base = self.dir(lab)
        base.mkdir(parents=True, exist_ok=True)
        rendered = lab.home / "k8s" / "barbican-kms"
        if (rendered / "encryption-config.yaml").exists() and (rendered / "cloud.conf").exists():
            return rendered / "cloud.conf", rendered / "encryption-config.yaml"
        auth = yaml.safe_load(lab.clouds_yaml.read_text())["clouds"][CLUSTER_CLOUD]["auth"]
        conf = {"auth-url": auth["auth_url"], "username": auth["username"], "password": auth["password"],
                "user-domain-name": auth.get("user_domain_name", "Default"), "tenant-name": auth["project_name"],
                "tenant-domain-name": auth.get("project_domain_name", "Default"), "region": "RegionOne"}
        cloud_conf = base / "kms-cloud.conf"
        if not cloud_conf.exists():
            try:
                key_id = find_key_id(conf, CLUSTER_KEY_NAME)
            except (KmsError, OSError, ValueError) as exc:
                raise LabError(f"k8s-api: cannot find the Barbican key {CLUSTER_KEY_NAME} (is the seed done?): {exc}") from exc
            lines = ["# barbican-kms-plugin configuration of the lab cluster (written by lab/k8s/service.py)", "[Global]"]
            lines += [f'{k} = "{gcfg_escape(v)}"' for k, v in conf.items()]
            lines += ["", "[KeyManager]", f'key-id = "{key_id}"', ""]
            write_private(cloud_conf, "\n".join(lines))
        encryption = base / "encryption-config.yaml"
        encryption.write_text(json.dumps({
            "apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
            "resources": [{"resources": ["secrets"], "providers": [
                {"kms": {"apiVersion": "v2", "name": "barbican", "endpoint": "unix:///var/lib/kms/kms.sock",
                         "timeout": "10s"}},
                {"identity": {}}]}]}, indent=2) + "\n")
        return cloud_conf, encryption

    def _ready(self, lab: Lab) -> bool:
        ca = self.dir(lab) / "pki" / "ca.crt"
        if not ca.exists():
            return False
        try:
            context = ssl.create_default_context(cafile=str(ca))
            with urllib.request.urlopen(self.url() + "/readyz", timeout=2, context=context) as resp:  # noqa: S310
                return resp.status == 200
        except OSError:
            return False

    def start(self, lab: Lab) -> None:
        started = time.monotonic()
        cloud_conf, encryption = self._kms_files(lab)
        proc = Process(lab, self.name)
        proc.start([lab.venv_bin("python"), "-m", "lab.k8s", "--etcd", ",".join(ETCD_URLS), "--port", str(api_port()),
                    "--host", HOST, "--data-dir", self.dir(lab), "--kubeconfig", self.kubeconfig(lab),
                    "--encryption-config", encryption, "--kms-cloud-config", f"barbican={cloud_conf}"],
                   cwd=REPO_ROOT)
        wait_for("Kubernetes API", lambda: self._ready(lab), 60, proc)
        log(f"k8s-api up at {self.url()} (kubeconfig {self.kubeconfig(lab)}, {time.monotonic() - started:.1f}s)")

    def stop(self, lab: Lab) -> None:
        Process(lab, self.name).stop()

    def reset(self, lab: Lab) -> None:
        """The CA, token, KMS files and kubeconfig go; so do the cluster's objects in etcd (if etcd is up)."""
        shutil.rmtree(self.dir(lab), ignore_errors=True)
        self.kubeconfig(lab).unlink(missing_ok=True)
        try:
            Etcd(ETCD_URLS, timeout=3).delete_prefix(b"/registry/")
        except EtcdError:
            pass  # etcd's own reset wipes its data anyway

    def status(self, lab: Lab) -> dict[str, object]:
        running = Process(lab, self.name).pid() is not None
        return {"url": self.url(), "kubeconfig": str(self.kubeconfig(lab)), "running": running,
                "up": running and self._ready(lab)}
