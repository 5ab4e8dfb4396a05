"""Helpers for the integration tests, which run against the lab's real services (``make lab-up``); nothing here is mocked.

A missing lab fails the tests with the command to run: a skip would hide a missing service.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, TypeVar


REPO = Path(__file__).resolve().parents[2]
LAB_HOME = Path(os.environ.get("LAB_HOME", REPO / ".lab"))
CLOUDS_YAML = LAB_HOME / "clouds.yaml"
USER_CLOUD = "lab-k8s-cluster"
ADMIN_CLOUD = "lab-admin"


def list_family(conn: Any, base: str) -> list[Any]:
    """The credentials named ``base`` or ``base-...`` of the connection's user, by name."""
    return sorted((c for c in conn.identity.application_credentials(conn.current_user_id)
                   if c.name == base or c.name.startswith(base + "-")), key=lambda c: c.name)


def delete_family(conn: Any, base: str) -> None:
    for cred in list_family(conn, base):
        conn.identity.delete_application_credential(conn.current_user_id, cred.id)


ModuleRunner = Callable[..., dict[str, Any]]


def ansible_playbook(*args: str, env: dict[str, str] | None = None,
                     inventory: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ansible-playbook from this venv (against the lab inventory unless another is given)."""
    full_env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".build"),
                "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0",
                "ANSIBLE_NOCOLOR": "1", **(env or {})}
    binary = Path(sys.executable).with_name("ansible-playbook")
    return subprocess.run([str(binary), "-i", str(inventory or REPO / "inventories" / "lab"), *args], cwd=REPO, env=full_env,
                          text=True, capture_output=True, check=False, timeout=600)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 90, every: float = 0.25) -> T:
    """Poll until ``probe`` returns something truthy, and return it; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {timeout:.0f}s")
        time.sleep(every)
