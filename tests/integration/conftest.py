"""Fixtures for the integration tests, which run against the lab's real services (``make lab-up``).

A missing lab fails the tests with the command to run: a skip would hide a missing service.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import uuid
from typing import Any, Callable, Iterator

import openstack
import pytest
from ansible.module_utils.testing import patch_module_args
from labtest import CLOUDS_YAML, USER_CLOUD, ModuleRunner, delete_family


@pytest.fixture(scope="session")
def lab_is_up() -> None:
    """The lab's Keystone answers (tests of Keystone-backed modules and drills depend on this)."""
    if not CLOUDS_YAML.exists():
        pytest.fail(f"the lab is not set up ({CLOUDS_YAML} missing): run `make lab-up` first", pytrace=False)
    os.environ["OS_CLIENT_CONFIG_FILE"] = str(CLOUDS_YAML)
    try:
        openstack.connect(cloud=USER_CLOUD).authorize()
    except Exception as exc:  # noqa: BLE001 - any failure means the lab is not usable
        pytest.fail(f"the lab's Keystone does not answer ({exc}): run `make lab-up`", pytrace=False)


@pytest.fixture(scope="session")
def user_conn(lab_is_up: None) -> openstack.connection.Connection:
    return openstack.connect(cloud=USER_CLOUD)


@pytest.fixture(scope="session")
def keystone_url(user_conn: openstack.connection.Connection) -> str:
    return str(user_conn.config.get_auth_args()["auth_url"])


@pytest.fixture
def family(user_conn: openstack.connection.Connection) -> Iterator[str]:
    """A unique credential base name; every credential of its family is deleted afterwards."""
    base = f"it-{uuid.uuid4().hex[:10]}"
    yield base
    delete_family(user_conn, base)


@pytest.fixture
def run_module() -> ModuleRunner:
    """Run a module's main() in-process through AnsibleModule, as Ansible would, and return its result."""

    def _run(main: Callable[[], None], args: dict[str, Any], check: bool = False, diff: bool = False) -> dict[str, Any]:
        module_args = {**args, "_ansible_check_mode": check, "_ansible_diff": diff}
        out = io.StringIO()
        with patch_module_args(module_args), contextlib.redirect_stdout(out):
            with pytest.raises(SystemExit):
                main()
        return json.loads(out.getvalue())

    return _run
