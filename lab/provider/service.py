"""``CloudProvider``: the cloud-provider stand-ins as a lab service (``lab up`` starts it after the Kubernetes
API). It runs from the services' venv (openstacksdk, PyYAML) and does nothing until the collection's
cloud_provider_openstack role (or a test) writes the ``cloud-config`` Secret, as the real pods would."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from ..core import REPO_ROOT, Lab, Process, ensure_venv, log, wait_for
from ..k8s.service import K8sApi

CLUSTER_NAME = "lab-k8s"
NODE_PREFIX = "k8s-cluster-"


class CloudProvider:
    name = "cloud-provider"

    def dir(self, lab: Lab) -> Path:
        return lab.data / "cloud-provider"

    def install(self, lab: Lab) -> None:
        ensure_venv(lab)

    def argv(self, lab: Lab) -> list[str | Path]:
        return [lab.venv_bin("python"), "-m", "lab.provider", "--kubeconfig", K8sApi().kubeconfig(lab),
                "--cluster-name", CLUSTER_NAME, "--state-dir", self.dir(lab), "--node-prefix", NODE_PREFIX,
                "--interval", "1", "--ensure-workloads"]

    def start(self, lab: Lab) -> None:
        started = time.monotonic()
        self.dir(lab).mkdir(parents=True, exist_ok=True)
        proc = Process(lab, self.name)
        proc.start(self.argv(lab), cwd=REPO_ROOT)
        # Up = running and publishing its status (it waits for the cloud-config Secret on its own).
        wait_for("cloud-provider stand-ins", (self.dir(lab) / "status.json").exists, 30, proc)
        log(f"cloud-provider stand-ins up (cluster {CLUSTER_NAME}, state {self.dir(lab)}, "
            f"{time.monotonic() - started:.1f}s)")

    def stop(self, lab: Lab) -> None:
        Process(lab, self.name).stop()

    def reset(self, lab: Lab) -> None:
        """What it created in the cloud is not deleted here: a reset of the cloud wipes it with the databases."""
        shutil.rmtree(self.dir(lab), ignore_errors=True)

    def status(self, lab: Lab) -> dict[str, object]:
        running = Process(lab, self.name).pid() is not None
        try:
            published = json.loads((self.dir(lab) / "status.json").read_text())
        except (OSError, ValueError):
            published = {}
        return {"running": running, "up": running, "state_dir": str(self.dir(lab)), **published}
