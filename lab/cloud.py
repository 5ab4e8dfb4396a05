"""The lab cloud: OpenStack services from PyPI on 127.0.0.1.

Each service has a config dir under ``<lab>/data/<name>``, its databases in
the lab's MariaDB, an API served by gunicorn (``lab/wsgi.py`` adapts the stock
WSGI entry points), and its other processes (conductor, scheduler, worker...)
started from the services' venv. Initialisation (DB migrations, cells) runs
once; a marker file records it. Keystone's catalog and service users are
registered by ``seed_keystone.py`` from ``CATALOG``.

Test drivers, said plainly: Nova runs its fake virt driver, Cinder its fake
logging volume driver, Manila its dummy share driver, Octavia its noop
compute/network/amphora drivers behind the real ``amphora`` provider, and a lab
process plays the Open vSwitch agent (it reports heartbeats over Neutron's RPC
and marks ports ACTIVE; it plugs nothing).
"""

from __future__ import annotations

import base64
import json
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .backing import MariaDB, RabbitMQ, database_url
from .core import HOST, LAB_DIR, PORTS, REPO_ROOT, Lab, LabError, Process, ensure_venv, log, run, wait_for, write_private

KEYSTONE_URL = f"http://{HOST}:{PORTS['keystone']}/v3"
REGION = "RegionOne"
COMPUTE_HOST = "lab-compute-1"


@dataclass(frozen=True)
class CatalogEntry:
    user: str          # the service's own Keystone user (admin + service roles in project "service")
    service_name: str
    service_type: str
    url: str


CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry("barbican", "barbican", "key-manager", f"http://{HOST}:{PORTS['barbican']}"),
    CatalogEntry("placement", "placement", "placement", f"http://{HOST}:{PORTS['placement']}"),
    CatalogEntry("glance", "glance", "image", f"http://{HOST}:{PORTS['glance']}"),
    CatalogEntry("neutron", "neutron", "network", f"http://{HOST}:{PORTS['neutron']}"),
    CatalogEntry("nova", "nova", "compute", f"http://{HOST}:{PORTS['nova']}/v2.1"),
    CatalogEntry("cinder", "cinderv3", "volumev3", f"http://{HOST}:{PORTS['cinder']}/v3/%(project_id)s"),
    CatalogEntry("octavia", "octavia", "load-balancer", f"http://{HOST}:{PORTS['octavia']}"),
    CatalogEntry("manila", "manilav2", "sharev2", f"http://{HOST}:{PORTS['manila']}/v2"),
    CatalogEntry("swift", "swift", "object-store", f"http://{HOST}:{PORTS['swift']}/v1/AUTH_%(project_id)s"),
)


def service_password(lab: Lab, user: str) -> str:
    return lab.secret(f"{user}_service_password")


def _auth_section(lab: Lab, section: str, user: str, extra: str = "") -> str:
    """A keystoneauth password section (the service's own user in project "service")."""
    return f"""[{section}]
auth_type = password
auth_url = {KEYSTONE_URL}
username = {user}
password = {service_password(lab, user)}
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = {REGION}
{extra}
"""


def _authtoken(lab: Lab, user: str) -> str:
    return _auth_section(lab, "keystone_authtoken", user, f"www_authenticate_uri = {KEYSTONE_URL}\n"
                         "service_token_roles_required = true\n")


def _common(lab: Lab, name: str, *, rpc: bool = True) -> str:
    lines = ["[DEFAULT]", "debug = false", "use_stderr = true", f"state_path = {lab.data / name / 'state'}"]
    if rpc:
        lines.append(f"transport_url = {RabbitMQ().transport_url(lab)}")
    return "\n".join(lines) + "\n"


def _endpoint_up(url: str) -> bool:
    """The API answers (any HTTP status below 500: version documents are 300, some paths 401)."""
    try:
        with urllib.request.urlopen(url, timeout=3):  # noqa: S310 - loopback only
            return True
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class Api:
    """A WSGI API served by gunicorn from the service dir."""

    port: int
    env: dict[str, str]
    threads: int = 8


@dataclass
class OpenStackService:
    """Base of the lab's OpenStack services (subclasses fill the hooks)."""

    name: str
    databases: tuple[str, ...] = ()
    processes: tuple[str, ...] = ()        # non-API processes, started in this order
    stop_signals: dict[str, int] = field(default_factory=dict)

    # ----- hooks
    def config_files(self, lab: Lab) -> dict[str, str]:
        raise NotImplementedError

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return []

    def api(self, lab: Lab) -> Api | None:
        return None

    def process_argv(self, lab: Lab, process: str) -> list[str | Path]:
        return [lab.venv_bin(process), *self.config_args(lab)]

    def config_args(self, lab: Lab) -> list[str | Path]:
        return ["--config-file", self.dir(lab) / f"{self.name}.conf"]

    def process_env(self, lab: Lab) -> dict[str, str]:
        return {}

    def after_start(self, lab: Lab) -> None:
        """Wait for what the API alone does not show (workers registered, cells...)."""

    # ----- shared behaviour
    def dir(self, lab: Lab) -> Path:
        return lab.data / self.name

    def url(self) -> str:
        api_port = PORTS.get(self.name)
        return f"http://{HOST}:{api_port}/"

    def install(self, lab: Lab) -> None:
        ensure_venv(lab)

    def write_config(self, lab: Lab) -> None:
        base = self.dir(lab)
        for sub in ("", "state", "locks"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        for filename, text in self.config_files(lab).items():
            write_private(base / filename, text)  # they hold passwords

    def start(self, lab: Lab) -> None:
        started = time.monotonic()
        self.write_config(lab)
        marker = self.dir(lab) / "initialised"
        if not marker.exists():
            mariadb = MariaDB()
            for db in self.databases:
                mariadb.ensure_database(lab, db, self.name, lab.secret(self.name + "_db_password"))
            for cmd in self.init_commands(lab):
                run(cmd, env=self.process_env(lab), cwd=self.dir(lab))
            marker.write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z\n"))
            log(f"{self.name} initialised ({time.monotonic() - started:.1f}s)")
        api = self.api(lab)
        if api is not None:
            self._write_gunicorn_conf(lab, api)
            proc = Process(lab, f"{self.name}-api")
            proc.start([lab.venv_bin("gunicorn")], env={**self.process_env(lab), **api.env}, cwd=self.dir(lab))
        for name in self.processes:
            Process(lab, name).start(self.process_argv(lab, name), env=self.process_env(lab), cwd=self.dir(lab))
        if api is not None:
            wait_for(f"{self.name} API", lambda: _endpoint_up(self.url()), 180, Process(lab, f"{self.name}-api"))
        for name in self.processes:
            if Process(lab, name).pid() is None:
                raise LabError(f"{name} exited; last log lines of {Process(lab, name).logfile}:\n"
                               f"{Process(lab, name).tail()}")
        self.after_start(lab)
        log(f"{self.name} up at {self.url()} ({time.monotonic() - started:.1f}s)")

    def _write_gunicorn_conf(self, lab: Lab, api: Api) -> None:
        (self.dir(lab) / "gunicorn.conf.py").write_text(f"""# Settings live here, not on the command line: several OpenStack WSGI apps parse sys.argv.
bind = "{HOST}:{api.port}"
workers = 1
worker_class = "gthread"
threads = {api.threads}
# keepalive 0: a kept-alive socket races openstacksdk's polling (RemoteDisconnected).
keepalive = 0
timeout = 300
pythonpath = "{REPO_ROOT}"
wsgi_app = "lab.wsgi:application"
accesslog = "-"
control_socket_disable = True
""")

    def process_names(self) -> list[str]:
        return [f"{self.name}-api", *self.processes]

    def stop(self, lab: Lab) -> None:
        for name in reversed(self.process_names()):
            Process(lab, name).stop(self.stop_signals.get(name, 15))

    def reset(self, lab: Lab) -> None:
        if MariaDB().status(lab)["up"]:
            for db in self.databases:
                MariaDB().sql(lab, f"DROP DATABASE IF EXISTS `{db}`;")
        shutil.rmtree(self.dir(lab), ignore_errors=True)

    def status(self, lab: Lab) -> dict[str, object]:
        procs = {name: Process(lab, name).pid() is not None for name in self.process_names()
                 if name != f"{self.name}-api" or self.api(lab) is not None}
        up = all(procs.values()) and (self.api(lab) is None or _endpoint_up(self.url()))
        return {"url": self.url(), "processes": procs, "up": up}


def _venv_etc(lab: Lab, project: str, filename: str) -> Path:
    return lab.venv / "etc" / project / filename


# ------------------------------------------------------------------ Barbican

class Barbican(OpenStackService):
    def __init__(self) -> None:
        super().__init__("barbican", databases=("barbican",))

    def process_env(self, lab: Lab) -> dict[str, str]:
        # Barbican finds barbican.conf only through oslo.config's default search ($HOME among them).
        return {"HOME": str(self.dir(lab))}

    def config_files(self, lab: Lab) -> dict[str, str]:
        kek = _kek(lab)
        return {"barbican.conf": _common(lab, self.name, rpc=False) + f"""host_href = http://{HOST}:{PORTS['barbican']}
sql_connection = {database_url(lab, 'barbican')}
db_auto_create = false

[database]
connection = {database_url(lab, 'barbican')}

[queue]
# Orders complete synchronously inside the API: no worker, no RabbitMQ.
enable = false

[keystone_notifications]
enable = false

[secretstore]
enabled_secretstore_plugins = store_crypto

[crypto]
enabled_crypto_plugins = simple_crypto

[simple_crypto_plugin]
kek = {kek}

[oslo_concurrency]
lock_path = {self.dir(lab) / 'locks'}

{_authtoken(lab, 'barbican')}"""}

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return [[lab.venv_bin("barbican-manage"), "db", "upgrade"]]

    def api(self, lab: Lab) -> Api | None:
        return Api(PORTS["barbican"], {"LAB_WSGI_PASTE": str(_venv_etc(lab, "barbican", "barbican-api-paste.ini"))})


def _kek(lab: Lab) -> str:
    """simple_crypto's key-encryption key: 32 random bytes, base64, generated once per lab."""
    store = lab.home / "barbican-kek"
    if not store.exists():
        import secrets as _s

        write_private(store, base64.b64encode(_s.token_bytes(32)).decode())
    return store.read_text().strip()


# ------------------------------------------------------------------ Placement

class Placement(OpenStackService):
    def __init__(self) -> None:
        super().__init__("placement", databases=("placement",))

    def process_env(self, lab: Lab) -> dict[str, str]:
        return {"OS_PLACEMENT_CONFIG_DIR": str(self.dir(lab))}

    def config_files(self, lab: Lab) -> dict[str, str]:
        return {"placement.conf": _common(lab, self.name, rpc=False) + f"""
[placement_database]
connection = {database_url(lab, 'placement')}

[api]
auth_strategy = keystone

{_authtoken(lab, 'placement')}"""}

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return [[lab.venv_bin("placement-manage"), *self.config_args(lab), "db", "sync"]]

    def api(self, lab: Lab) -> Api | None:
        return Api(PORTS["placement"], {"LAB_WSGI_MODULE": "placement.wsgi.api"})


# ------------------------------------------------------------------ Glance

class Glance(OpenStackService):
    def __init__(self) -> None:
        super().__init__("glance", databases=("glance",))

    def config_args(self, lab: Lab) -> list[str | Path]:
        return ["--config-file", self.dir(lab) / "glance-api.conf"]

    def process_env(self, lab: Lab) -> dict[str, str]:
        return {"OS_GLANCE_CONFIG_DIR": str(self.dir(lab))}

    def config_files(self, lab: Lab) -> dict[str, str]:
        base = self.dir(lab)
        return {
            "glance-api-paste.ini": _venv_etc(lab, "glance", "glance-api-paste.ini").read_text(),
            "glance-api.conf": _common(lab, self.name, rpc=False) + f"""enabled_backends = file:file

[database]
connection = {database_url(lab, 'glance')}

[paste_deploy]
flavor = keystone

[glance_store]
default_backend = file

[file]
filesystem_store_datadir = {base / 'images'}

[os_glance_staging_store]
filesystem_store_datadir = {base / 'staging'}

[os_glance_tasks_store]
filesystem_store_datadir = {base / 'tasks'}

[oslo_concurrency]
lock_path = {base / 'locks'}

{_authtoken(lab, 'glance')}""",
        }

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return [[lab.venv_bin("glance-manage"), *self.config_args(lab), "db_sync"]]

    def api(self, lab: Lab) -> Api | None:
        return Api(PORTS["glance"], {"LAB_WSGI_MODULE": "glance.wsgi.api"})


# ------------------------------------------------------------------ Neutron

class Neutron(OpenStackService):
    def __init__(self) -> None:
        super().__init__("neutron", databases=("neutron",), processes=("neutron-rpc-server", "lab-ovs-agent"))

    def config_args(self, lab: Lab) -> list[str | Path]:
        return ["--config-file", self.dir(lab) / "neutron.conf", "--config-file", self.dir(lab) / "ml2_conf.ini"]

    def process_argv(self, lab: Lab, process: str) -> list[str | Path]:
        if process == "lab-ovs-agent":
            return [lab.venv_bin("python"), LAB_DIR / "fake_ovs_agent.py", *self.config_args(lab)]
        return super().process_argv(lab, process)

    def process_env(self, lab: Lab) -> dict[str, str]:
        return {"PYTHONPATH": str(REPO_ROOT), "LAB_HOME": str(lab.home), "LAB_COMPUTE_HOST": COMPUTE_HOST,
                "OS_CLIENT_CONFIG_FILE": str(lab.clouds_yaml)}

    def after_start(self, lab: Lab) -> None:
        # The agent writes a heartbeat file after each state report Neutron accepted.
        heartbeat = lab.run / "lab-ovs-agent.heartbeat"
        since = time.time()
        wait_for("lab OVS agent reporting to neutron",
                 lambda: heartbeat.exists() and heartbeat.stat().st_mtime >= since - 30, 60,
                 Process(lab, "lab-ovs-agent"))

    def config_files(self, lab: Lab) -> dict[str, str]:
        base = self.dir(lab)
        return {
            "neutron.conf": _common(lab, self.name) + f"""core_plugin = ml2
service_plugins = router
auth_strategy = keystone
api_paste_config = {_venv_etc(lab, 'neutron', 'api-paste.ini')}
allow_overlapping_ips = true
notify_nova_on_port_status_changes = true
notify_nova_on_port_data_changes = true
rpc_workers = 1
# 0: the RPC worker consumes the agents' state reports too (one process less).
rpc_state_report_workers = 0
# No DHCP agent runs in the lab.
dhcp_agent_notification = false
enable_traditional_dhcp = false

[database]
connection = {database_url(lab, 'neutron')}

[oslo_concurrency]
lock_path = {base / 'locks'}

[agent]
report_interval = 10

{_authtoken(lab, 'neutron')}
{_auth_section(lab, 'nova', 'neutron')}
{_auth_section(lab, 'placement', 'neutron')}""",
            "ml2_conf.ini": """[ml2]
type_drivers = flat,vxlan
tenant_network_types = vxlan
mechanism_drivers = openvswitch
extension_drivers = port_security

[ml2_type_flat]
flat_networks = public

[ml2_type_vxlan]
vni_ranges = 1000:1999
""",
        }

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return [[lab.venv_bin("neutron-db-manage"), *self.config_args(lab), "upgrade", "heads"]]

    def api(self, lab: Lab) -> Api | None:
        argv = json.dumps(["neutron-api", *map(str, self.config_args(lab))])
        return Api(PORTS["neutron"], {"LAB_WSGI_MODULE": "neutron.wsgi.api", "LAB_WSGI_ARGV": argv})


# ------------------------------------------------------------------ Nova

class Nova(OpenStackService):
    def __init__(self) -> None:
        super().__init__("nova", databases=("nova_api", "nova", "nova_cell0"),
                         processes=("nova-conductor", "nova-scheduler", "nova-compute"))

    def process_env(self, lab: Lab) -> dict[str, str]:
        return {"OS_NOVA_CONFIG_DIR": str(self.dir(lab))}

    def start(self, lab: Lab) -> None:
        self._ensure_node_identity(lab)
        super().start(lab)

    def _ensure_node_identity(self, lab: Lab) -> None:
        """nova-compute refuses to start again without its node identity file (``state_path/compute_id``).
        The driver writes it on the first start (FakeDriverWithoutFakeNodes, a stable node like a real
        driver's); a lab that lacks it (made with the plain FakeDriver, whose node UUIDs change per process)
        gets back the UUID of the compute node Nova's database holds for the lab host."""
        identity = self.dir(lab) / "state" / "compute_id"
        if identity.exists() or not (self.dir(lab) / "initialised").exists():
            return
        out = MariaDB().sql(lab, "SELECT uuid FROM nova.compute_nodes WHERE host='" + COMPUTE_HOST
                            + "' AND deleted=0 ORDER BY id DESC LIMIT 1;")
        rows = [line.strip() for line in out.splitlines()[1:] if line.strip()]
        if rows:
            identity.parent.mkdir(parents=True, exist_ok=True)
            identity.write_text(rows[0] + "\n")
            log(f"nova: node identity {rows[0]} restored from the database into {identity}")

    def url(self) -> str:
        return f"http://{HOST}:{PORTS['nova']}/"

    def config_files(self, lab: Lab) -> dict[str, str]:
        base = self.dir(lab)
        return {
            "api-paste.ini": _venv_etc(lab, "nova", "api-paste.ini").read_text(),
            "nova.conf": _common(lab, self.name) + f"""host = {COMPUTE_HOST}
my_ip = {HOST}
compute_driver = fake.FakeDriverWithoutFakeNodes
instances_path = {base / 'instances'}
enabled_apis = osapi_compute
# No real agent plugs VIFs: do not wait for network-vif-plugged events.
vif_plugging_is_fatal = false
vif_plugging_timeout = 0

[api]
auth_strategy = keystone

[api_database]
connection = {database_url(lab, 'nova', 'nova_api')}

[database]
connection = {database_url(lab, 'nova', 'nova')}

[wsgi]
api_paste_config = {base / 'api-paste.ini'}

[scheduler]
discover_hosts_in_cells_interval = 2
workers = 1

[conductor]
workers = 1

[vnc]
enabled = false

[oslo_concurrency]
lock_path = {base / 'locks'}

{_authtoken(lab, 'nova')}
{_auth_section(lab, 'placement', 'nova')}
{_auth_section(lab, 'neutron', 'nova')}
{_auth_section(lab, 'cinder', 'nova', 'os_region_name = ' + REGION)}
{_auth_section(lab, 'service_user', 'nova', 'send_service_user_token = true')}
[glance]
region_name = {REGION}
""",
        }

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        manage: list[str | Path] = [lab.venv_bin("nova-manage"), "--config-file", self.dir(lab) / "nova.conf"]
        return [[*manage, "api_db", "sync"],
                [*manage, "cell_v2", "map_cell0", "--database_connection", database_url(lab, "nova", "nova_cell0")],
                [*manage, "cell_v2", "create_cell", "--name", "cell1"],
                [*manage, "db", "sync"]]

    def api(self, lab: Lab) -> Api | None:
        return Api(PORTS["nova"], {"LAB_WSGI_MODULE": "nova.wsgi.osapi_compute"})

    def after_start(self, lab: Lab) -> None:
        # The scheduler maps the compute host into cell1 (discover_hosts_in_cells_interval); servers
        # only build after that, so wait for the mapping here rather than in every test.
        manage: list[str | Path] = [lab.venv_bin("nova-manage"), "--config-file", self.dir(lab) / "nova.conf"]

        def mapped() -> bool:
            out = run([*manage, "cell_v2", "list_hosts"])
            return COMPUTE_HOST in out
        wait_for("nova-compute mapped into cell1", mapped, 120, Process(lab, "nova-compute"))


# ------------------------------------------------------------------ Cinder

class Cinder(OpenStackService):
    def __init__(self) -> None:
        super().__init__("cinder", databases=("cinder",), processes=("cinder-scheduler", "cinder-volume"))

    def config_files(self, lab: Lab) -> dict[str, str]:
        base = self.dir(lab)
        return {"cinder.conf": _common(lab, self.name) + f"""auth_strategy = keystone
api_paste_config = {_venv_etc(lab, 'cinder', 'api-paste.ini')}
my_ip = {HOST}
host = {COMPUTE_HOST}
enabled_backends = fake
osapi_volume_workers = 1

[database]
connection = {database_url(lab, 'cinder')}

[oslo_concurrency]
lock_path = {base / 'locks'}

[fake]
# Cinder's own test driver (ships in the wheel): volumes are records, attach/detach run the real flows.
volume_driver = cinder.tests.fake_driver.FakeLoggingVolumeDriver
volume_backend_name = fake

{_authtoken(lab, 'cinder')}
{_auth_section(lab, 'nova', 'cinder')}
{_auth_section(lab, 'service_user', 'cinder', 'send_service_user_token = true')}"""}

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return [[lab.venv_bin("cinder-manage"), *self.config_args(lab), "db", "sync"]]

    def api(self, lab: Lab) -> Api | None:
        argv = json.dumps(["cinder-api", *map(str, self.config_args(lab))])
        return Api(PORTS["cinder"], {"LAB_WSGI_MODULE": "cinder.wsgi.api", "LAB_WSGI_ARGV": argv})


# ------------------------------------------------------------------ Octavia

class Octavia(OpenStackService):
    def __init__(self) -> None:
        # The worker ignores SIGTERM for a long time; SIGINT stops it.
        super().__init__("octavia", databases=("octavia",), processes=("octavia-worker",),
                         stop_signals={"octavia-worker": 2})

    def _certs(self, lab: Lab) -> dict[str, Path]:
        """Octavia insists on real certificate files, even with noop drivers: one self-signed pair."""
        certs = self.dir(lab) / "certs"
        paths = {"key": certs / "lab.key", "cert": certs / "lab.crt", "pem": certs / "lab.pem"}
        if not paths["pem"].exists():
            certs.mkdir(parents=True, exist_ok=True)
            run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
                 "-subj", "/CN=octavia-lab", "-keyout", paths["key"], "-out", paths["cert"]])
            paths["pem"].write_text(paths["cert"].read_text() + paths["key"].read_text())
            for path in paths.values():
                path.chmod(0o600)
        return paths

    def config_files(self, lab: Lab) -> dict[str, str]:
        base = self.dir(lab)
        certs = self._certs(lab)
        return {"octavia.conf": _common(lab, self.name) + f"""
[api_settings]
auth_strategy = keystone
enabled_provider_drivers = amphora:Octavia amphora driver (noop compute/network/amphora in the lab)
default_provider_driver = amphora

[database]
connection = {database_url(lab, 'octavia')}

[controller_worker]
amphora_driver = amphora_noop_driver
compute_driver = compute_noop_driver
network_driver = network_noop_driver
volume_driver = volume_noop_driver
image_driver = image_noop_driver
loadbalancer_topology = SINGLE
workers = 1
client_ca = {certs['cert']}

[certificates]
cert_manager = noop_cert_manager
ca_certificate = {certs['cert']}
ca_private_key = {certs['key']}

[haproxy_amphora]
client_cert = {certs['pem']}
server_ca = {certs['cert']}

[task_flow]
jobboard_enabled = false
engine = serial

[oslo_messaging]
topic = octavia_prov

[oslo_concurrency]
lock_path = {base / 'locks'}

{_authtoken(lab, 'octavia')}
{_auth_section(lab, 'service_auth', 'octavia')}"""}

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return [[lab.venv_bin("octavia-db-manage"), *self.config_args(lab), "upgrade", "head"]]

    def api(self, lab: Lab) -> Api | None:
        argv = json.dumps(["octavia-api", *map(str, self.config_args(lab))])
        return Api(PORTS["octavia"], {"LAB_WSGI_FACTORY": "octavia.api.app:setup_app", "LAB_WSGI_ARGV": argv})


# ------------------------------------------------------------------ Manila

class Manila(OpenStackService):
    def __init__(self) -> None:
        super().__init__("manila", databases=("manila",), processes=("manila-scheduler", "manila-share"))

    def config_files(self, lab: Lab) -> dict[str, str]:
        base = self.dir(lab)
        return {"manila.conf": _common(lab, self.name) + f"""auth_strategy = keystone
api_paste_config = {_venv_etc(lab, 'manila', 'api-paste.ini')}
my_ip = {HOST}
host = {COMPUTE_HOST}
enabled_share_backends = dummy
enabled_share_protocols = NFS,CIFS
default_share_type = default
osapi_share_workers = 1

[database]
connection = {database_url(lab, 'manila')}

[oslo_concurrency]
lock_path = {base / 'locks'}

[dummy]
# Manila's own test driver (ships in the wheel): shares are records with fake export locations.
share_driver = manila.tests.share.drivers.dummy.DummyDriver
driver_handles_share_servers = false
share_backend_name = dummy

{_authtoken(lab, 'manila')}"""}

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        return [[lab.venv_bin("manila-manage"), *self.config_args(lab), "db", "sync"]]

    def api(self, lab: Lab) -> Api | None:
        argv = json.dumps(["manila-api", *map(str, self.config_args(lab))])
        return Api(PORTS["manila"], {"LAB_WSGI_MODULE": "manila.wsgi.api", "LAB_WSGI_ARGV": argv})


# ------------------------------------------------------------------ Swift

class Swift(OpenStackService):
    """Swift with one replica on one loopback device dir: proxy (keystoneauth) + account/container/object."""

    RINGS = {"account": "swift-account", "container": "swift-container", "object": "swift-object"}

    def __init__(self) -> None:
        super().__init__("swift", processes=("swift-account-server", "swift-container-server",
                                             "swift-object-server", "swift-proxy-server"))

    def url(self) -> str:
        return f"http://{HOST}:{PORTS['swift']}/healthcheck"

    def process_argv(self, lab: Lab, process: str) -> list[str | Path]:
        conf = process.removeprefix("swift-").removesuffix("-server") + "-server.conf"
        # --verbose: log to the console (the lab's log file) as well as syslog.
        return [lab.venv_bin(process), self.dir(lab) / conf, "--verbose"]

    def _server_conf(self, lab: Lab, kind: str) -> str:
        base = self.dir(lab)
        return f"""[DEFAULT]
bind_ip = {HOST}
bind_port = {PORTS['swift-' + kind]}
# 0: serve from this one process (no forked workers).
workers = 0
devices = {base / 'devices'}
mount_check = false
swift_dir = {base}
log_name = {kind}-server

[pipeline:main]
pipeline = {kind}-server

[app:{kind}-server]
use = egg:swift#{kind}

[{kind}-replicator]

[{kind}-auditor]
"""

    def config_files(self, lab: Lab) -> dict[str, str]:
        base = self.dir(lab)
        (base / "devices" / "d1").mkdir(parents=True, exist_ok=True)
        files = {f"{kind}-server.conf": self._server_conf(lab, kind) for kind in self.RINGS}
        files["swift.conf"] = f"""[swift-hash]
swift_hash_path_suffix = {lab.secret('swift_hash_suffix')}
swift_hash_path_prefix = {lab.secret('swift_hash_prefix')}

[storage-policy:0]
name = Policy-0
default = yes
"""
        files["proxy-server.conf"] = f"""[DEFAULT]
bind_ip = {HOST}
bind_port = {PORTS['swift']}
workers = 0
swift_dir = {base}
log_name = proxy-server

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging listing_formats authtoken keystoneauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
www_authenticate_uri = {KEYSTONE_URL}
auth_url = {KEYSTONE_URL}
auth_type = password
username = swift
password = {service_password(lab, 'swift')}
project_name = service
user_domain_name = Default
project_domain_name = Default
delay_auth_decision = true

[filter:keystoneauth]
use = egg:swift#keystoneauth
operator_roles = admin, member

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo
"""
        return files

    def init_commands(self, lab: Lab) -> list[list[str | Path]]:
        builder = lab.venv_bin("swift-ring-builder")
        cmds: list[list[str | Path]] = []
        for ring, port_key in self.RINGS.items():
            cmds += [[builder, f"{ring}.builder", "create", "10", "1", "1"],
                     [builder, f"{ring}.builder", "add", f"r1z1-{HOST}:{PORTS[port_key]}/d1", "100"],
                     [builder, f"{ring}.builder", "rebalance"]]
        return cmds


class TenantSeed:
    """Not a process: seeds the cluster's tenant once every service is up (``seed_cloud.py``)."""

    name = "seed"

    def _marker(self, lab: Lab) -> Path:
        return lab.data / "seeded"

    def install(self, lab: Lab) -> None:
        ensure_venv(lab)

    def start(self, lab: Lab) -> None:
        # Idempotent: a second run finds every resource by name and creates nothing.
        run([lab.venv_bin("python"), LAB_DIR / "seed_cloud.py"], env={"LAB_HOME": str(lab.home)}, quiet=False)
        self._marker(lab).write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z\n"))

    def stop(self, lab: Lab) -> None:
        return None

    def reset(self, lab: Lab) -> None:
        self._marker(lab).unlink(missing_ok=True)

    def status(self, lab: Lab) -> dict[str, object]:
        marker = self._marker(lab)
        return {"seeded_at": marker.read_text().strip() if marker.exists() else None, "up": marker.exists()}


CLOUD_SERVICES: Sequence[OpenStackService] = (
    Barbican(), Placement(), Glance(), Neutron(), Nova(), Cinder(), Octavia(), Manila(), Swift(),
)
