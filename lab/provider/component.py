"""What the CCM and the CSI controller share: the cached credential and its "restart", the state file, the
fault switches and the status they publish."""

from __future__ import annotations

import base64
import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import openstack.config
from openstack.connection import Connection
from openstack.exceptions import SDKException

from ..core import write_private
from .kube import Kube, KubeError
from .logic import CloudConf, CloudConfError, parse_cloud_conf, template_hash

NAMESPACE = "kube-system"
SECRET_NAME = "cloud-config"
SECRET_KEY = "cloud.conf"
STATUS_CONFIGMAP = "lab-cloud-provider"
_status_lock = threading.Lock()


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def log(component: str, msg: str) -> None:
    print(f"[lab.provider {time.strftime('%H:%M:%S')} {component}] {msg}", flush=True)


def connect(conf: CloudConf) -> Connection:
    """A connection with exactly the application credential of cloud.conf: no clouds.yaml, no OS_* variables."""
    region = openstack.config.OpenStackConfig(load_yaml_config=False, load_envvars=False).get_one(
        auth_type="v3applicationcredential",
        auth={"auth_url": conf.auth_url, "application_credential_id": conf.application_credential_id,
              "application_credential_secret": conf.application_credential_secret},
        region_name=conf.region, interface="public")
    return Connection(config=region)


class StateFile:
    """A JSON document in the state dir, rewritten atomically (what the stand-in created survives a restart)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    def section(self, name: str) -> dict[str, Any]:
        return self.data.setdefault(name, {})

    def save(self) -> None:
        write_private(self.path, json.dumps(self.data, indent=2, sort_keys=True) + "\n")


def faults(state_dir: Path) -> dict[str, Any]:
    """Fault switches for the orphan drills: ``faults.json`` in the state dir, read on every pass."""
    path = state_dir / "faults.json"
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


class Component:
    """One of the real pods the stand-in plays: it reads cloud.conf when it starts and keeps it until its
    Deployment's pod template changes (a rollout restarts the pod), as the CCM and CSI pods do."""

    name = "component"
    # The workload whose pods this component plays, by (kind, name) in kube-system: the first that exists
    # counts (upstream manifests, the Helm charts and this collection do not all use the same kind and name).
    workloads: tuple[tuple[str, str], ...] = ()
    event_source = "lab.provider"

    def __init__(self, kube: Kube, cluster: str, state_dir: Path, interval: float) -> None:
        self.kube = kube
        self.cluster = cluster
        self.state_dir = state_dir
        self.interval = interval
        self.conn: Connection | None = None
        self.conf: CloudConf | None = None
        self.template = "unset"
        self.restarts = 0
        self._next_start = 0.0
        self.restart_failing = False
        self._last_failure = ""
        self.error = ""
        self.state = StateFile(state_dir / f"{self.name}.json")
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=self.name, daemon=True)

    # ------------------------------------------------------------------ credential

    def read_cloud_conf(self) -> tuple[CloudConf | None, str]:
        """cloud.conf from the Secret, or why not."""
        secret = self.kube.get("Secret", NAMESPACE, SECRET_NAME)
        if secret is None:
            return None, f"Secret {NAMESPACE}/{SECRET_NAME} not found: waiting"
        encoded = (secret.get("data") or {}).get(SECRET_KEY)
        if not encoded:
            return None, f"Secret {NAMESPACE}/{SECRET_NAME} has no key {SECRET_KEY}: waiting"
        try:
            return parse_cloud_conf(base64.b64decode(encoded).decode()), ""
        except (CloudConfError, ValueError) as exc:
            return None, f"Secret {NAMESPACE}/{SECRET_NAME}: {exc}"

    def workload(self) -> dict[str, Any] | None:
        for kind, name in self.workloads:
            found = self.kube.get(kind, NAMESPACE, name)
            if found is not None:
                return found
        return None

    def ensure_started(self) -> bool:
        """(Re)start when the Deployment's template changed or the component never started; False: not running.

        A Deployment's RollingUpdate keeps the old pod until the new one is up: a new "pod" that cannot start
        (Secret missing or unreadable, cloud.conf invalid, the credential refused by Keystone) leaves the old
        one - the cached connection - running, and is retried every few seconds, as a crash-looping pod is.
        """
        current = template_hash(self.workload())
        if self.conn is not None and current == self.template:
            self.restart_failing = False
            return True
        self.restart_failing = True
        if time.monotonic() < self._next_start:
            return self.conn is not None
        try:
            conf, failure = self.read_cloud_conf()
        except KubeError as exc:  # e.g. Secrets unreadable while the KMS plugin's Barbican is down
            conf, failure = None, f"Secret {NAMESPACE}/{SECRET_NAME} unreadable: {exc}"
        conn = None
        if conf is not None:
            try:
                conn = connect(conf)
                conn.authorize()
            except Exception as exc:  # noqa: BLE001 - any failure to authenticate keeps the old pod running
                failure = f"cannot authenticate with application credential {conf.application_credential_id}: {exc}"
                conn = None
        if conn is None or conf is None:
            self._next_start = time.monotonic() + 5
            message = ("new pod not starting (the running one keeps its credential): " if self.conn else
                       "not starting: ") + failure
            if message != self.error:
                log(self.name, message)
            self.error = message
            return self.conn is not None
        if self.conn is not None:
            self.conn.close()
        self.conn, self.conf, self.template = conn, conf, current
        self.restart_failing = False
        self.restarts += 1
        self.on_restart()
        log(self.name, f"started (restart {self.restarts}) with application credential "
                       f"{conf.application_credential_id}, pod template {current or '(no Deployment)'}")
        return True

    # ------------------------------------------------------------------ loop

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                running = self.ensure_started()
                if running and not self.restart_failing:
                    self.error = ""
                if running:
                    self.reconcile()
                    self._last_failure = ""
            except (KubeError, OSError, SDKException) as exc:
                # An API or the cloud answering badly (or not at all): said once, retried every pass.
                message = f"{type(exc).__name__}: {exc}"
                if message != self._last_failure:
                    log(self.name, f"pass failed: {message}")
                self.error = self._last_failure = message
            except Exception as exc:  # noqa: BLE001 - a controller keeps running; status and log say what failed
                self.error = f"{type(exc).__name__}: {exc}"
                log(self.name, "pass failed:\n" + traceback.format_exc())
            try:
                self.publish_status()
            except Exception as exc:  # noqa: BLE001
                log(self.name, f"status not published: {exc}")
            self.stopping.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def reconcile(self) -> None:
        raise NotImplementedError

    def on_restart(self) -> None:
        """A new pod starts with empty memory (what it created is in the state dir and the cloud)."""

    def event(self, obj: dict[str, Any], reason: str, message: str, warning: bool = False) -> None:
        """An Event on the object, as the real controllers record them (kubectl describe / get events)."""
        meta = obj["metadata"]
        now = now_rfc3339()
        namespace = meta.get("namespace") or "default"
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
                "involvedObject": {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", ""),
                                   "name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid")},
                "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
                "source": {"component": self.event_source}, "reportingComponent": self.event_source,
                "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            self.kube.create("Event", namespace, body)
        except KubeError as exc:
            log(self.name, f"event {reason} not recorded: {exc}")

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, str]:
        return {f"{self.name}.application-credential-id": self.conf.application_credential_id if self.conf and self.conn else "",
                f"{self.name}.pod-template-hash": self.template if self.template != "unset" else "",
                f"{self.name}.restarts": str(self.restarts),
                f"{self.name}.error": self.error}

    def publish_status(self) -> None:
        """status.json in the state dir and ConfigMap kube-system/lab-cloud-provider (rewritten on change)."""
        mine = self.status()
        with _status_lock:
            path = self.state_dir / "status.json"
            try:
                combined = json.loads(path.read_text())
            except (OSError, ValueError):
                combined = {}
            if all(combined.get(k) == v for k, v in mine.items()):
                return
            combined.update(mine)
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": STATUS_CONFIGMAP, "namespace": NAMESPACE,
                                 "labels": {"app.kubernetes.io/managed-by": "lab.provider"}},
                    "data": combined}
            try:
                if self.kube.patch("ConfigMap", NAMESPACE, STATUS_CONFIGMAP, {"data": mine}) is None:
                    self.kube.create("ConfigMap", NAMESPACE, body)
            except KubeError as exc:
                if exc.code != 409:
                    raise
            write_private(path, json.dumps(combined, indent=2, sort_keys=True) + "\n")
