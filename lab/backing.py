"""Backing services of the lab cloud: MariaDB and RabbitMQ from Debian
packages, run as the lab's own processes (own data dirs, own loopback
ports), never the system instances."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from .core import HOST, PORTS, Lab, Process, apt_install, log, port_open, run, wait_for

MARIADB_SOCKET_NAME = "mariadb.sock"


class MariaDB:
    """One MariaDB server for every OpenStack service's database."""

    name = "mariadb"

    def _dir(self, lab: Lab) -> Path:
        return lab.data / "mariadb"

    def socket(self, lab: Lab) -> Path:
        return lab.run / MARIADB_SOCKET_NAME

    def install(self, lab: Lab) -> None:
        apt_install(["mariadb-server", "mariadb-client"], ["mariadbd", "mariadb-install-db", "mariadb"])

    def _write_config(self, lab: Lab) -> Path:
        base = self._dir(lab)
        base.mkdir(parents=True, exist_ok=True)
        conf = base / "my.cnf"
        conf.write_text(f"""[mariadbd]
datadir = {base / 'db'}
socket = {self.socket(lab)}
pid-file = {lab.run / 'mariadbd.pid-native'}
bind-address = {HOST}
port = {PORTS['mariadb']}
user = root
skip-name-resolve
max_connections = 1000
# Lab only: no fsync, no binary log, small buffers. Migrations of nine services run
# several times faster; a crash of the lab machine may lose the lab's data.
innodb_flush_log_at_trx_commit = 0
innodb_doublewrite = 0
innodb_flush_method = nosync
sync_binlog = 0
skip-log-bin
# The lab's databases are a few MiB: small caches keep the whole lab under 4 GiB.
innodb_buffer_pool_size = 32M
innodb_log_buffer_size = 4M
key_buffer_size = 8M
table_open_cache = 400
performance_schema = OFF
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
""")
        return conf

    def start(self, lab: Lab) -> None:
        started = time.monotonic()
        conf = self._write_config(lab)
        datadir = self._dir(lab) / "db"
        if not (datadir / "mysql").exists():
            run(["mariadb-install-db", f"--defaults-file={conf}", "--auth-root-authentication-method=socket",
                 "--skip-test-db"])
        proc = Process(lab, "mariadb")
        proc.start(["mariadbd", f"--defaults-file={conf}"])
        wait_for("mariadb", lambda: self.socket(lab).exists() and port_open(PORTS["mariadb"]), 60, proc)
        log(f"mariadb up on {HOST}:{PORTS['mariadb']} ({time.monotonic() - started:.1f}s)")

    def sql(self, lab: Lab, statement: str) -> str:
        """Run SQL as the lab's root over the lab's own socket."""
        return run(["mariadb", f"--socket={self.socket(lab)}", "-uroot", "--batch", "-e", statement])

    def ensure_database(self, lab: Lab, db: str, user: str, password: str) -> None:
        self.sql(lab, f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4;"
                      f"CREATE USER IF NOT EXISTS '{user}'@'{HOST}' IDENTIFIED BY '{password}';"
                      f"ALTER USER '{user}'@'{HOST}' IDENTIFIED BY '{password}';"
                      f"GRANT ALL PRIVILEGES ON `{db}`.* TO '{user}'@'{HOST}';")

    def stop(self, lab: Lab) -> None:
        Process(lab, "mariadb").stop()

    def reset(self, lab: Lab) -> None:
        shutil.rmtree(self._dir(lab), ignore_errors=True)

    def status(self, lab: Lab) -> dict[str, object]:
        running = Process(lab, "mariadb").pid() is not None
        return {"port": PORTS["mariadb"], "running": running, "up": running and port_open(PORTS["mariadb"])}


def database_url(lab: Lab, service: str, db: str | None = None) -> str:
    return (f"mysql+pymysql://{service}:{lab.secret(service + '_db_password')}@{HOST}:{PORTS['mariadb']}/"
            f"{db or service}?charset=utf8mb4")


class RabbitMQ:
    """RabbitMQ with its own epmd, node name, data and log dirs on loopback ports."""

    name = "rabbitmq"
    user = "openstack"

    def _dir(self, lab: Lab) -> Path:
        return lab.data / "rabbitmq"

    def install(self, lab: Lab) -> None:
        apt_install(["rabbitmq-server"], ["/usr/lib/rabbitmq/bin/rabbitmq-server", "epmd"])

    def _env(self, lab: Lab) -> dict[str, str]:
        base = self._dir(lab)
        return {
            # The Erlang cookie lives in HOME: the lab's own, not the system's.
            "HOME": str(base),
            "RABBITMQ_NODENAME": "lab@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": HOST,
            "RABBITMQ_NODE_PORT": str(PORTS["rabbitmq"]),
            "RABBITMQ_DIST_PORT": str(PORTS["rabbitmq-dist"]),
            "ERL_EPMD_ADDRESS": HOST,
            "ERL_EPMD_PORT": str(PORTS["epmd"]),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(lab.logs / "rabbitmq"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        }

    def transport_url(self, lab: Lab) -> str:
        return f"rabbit://{self.user}:{lab.secret('rabbitmq_password')}@{HOST}:{PORTS['rabbitmq']}/"

    def start(self, lab: Lab) -> None:
        started = time.monotonic()
        base = self._dir(lab)
        base.mkdir(parents=True, exist_ok=True)
        (base / "enabled_plugins").write_text("[].\n")
        # default_user/pass apply when the node first initialises its database.
        (base / "rabbitmq.conf").write_text(f"""listeners.tcp.1 = {HOST}:{PORTS['rabbitmq']}
default_user = {self.user}
default_pass = {lab.secret('rabbitmq_password')}
loopback_users = none
vm_memory_high_watermark.absolute = 512MiB
disk_free_limit.absolute = 50MB
""")
        (base / "rabbitmq.conf").chmod(0o600)
        env = self._env(lab)
        epmd = Process(lab, "epmd")
        epmd.start(["epmd", "-address", HOST, "-port", str(PORTS["epmd"])], env=env)
        wait_for("epmd", lambda: port_open(PORTS["epmd"]), 20, epmd)
        proc = Process(lab, "rabbitmq")
        proc.start(["/usr/lib/rabbitmq/bin/rabbitmq-server"], env=env, cwd=base)
        wait_for("rabbitmq", lambda: port_open(PORTS["rabbitmq"]), 120, proc)
        log(f"rabbitmq up on {HOST}:{PORTS['rabbitmq']} ({time.monotonic() - started:.1f}s)")

    def stop(self, lab: Lab) -> None:
        Process(lab, "rabbitmq").stop()
        Process(lab, "epmd").stop()

    def reset(self, lab: Lab) -> None:
        shutil.rmtree(self._dir(lab), ignore_errors=True)

    def status(self, lab: Lab) -> dict[str, object]:
        running = Process(lab, "rabbitmq").pid() is not None and Process(lab, "epmd").pid() is not None
        return {"port": PORTS["rabbitmq"], "running": running, "up": running and port_open(PORTS["rabbitmq"])}
