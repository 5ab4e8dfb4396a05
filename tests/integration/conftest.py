"""Fixtures for the integration tests, which run against the lab's real services (``make lab-up``).

A missing lab fails the tests with the command to run: a skip would hide a missing service.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import openstack
import pytest
from ansible.module_utils.testing import patch_module_args
from k8s_fixtures import ETCD_ENDPOINTS, Cluster, LabK8s, api_client_for, start_lab_k8s, stop_lab_k8s
from kubernetes import client
from labtest import CLOUDS_YAML, USER_CLOUD, ModuleRunner, delete_family

from lab.k8s.etcd import Etcd, EtcdError


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


# ------------------------------------------------------------------ the Kubernetes API tests (helpers in k8s_fixtures)

@pytest.fixture(scope="session")
def lab_etcd() -> Etcd:
    """The lab's etcd answers (the API server stores everything there)."""
    etcd = Etcd(ETCD_ENDPOINTS, timeout=3)
    try:
        etcd.revision()
    except EtcdError as exc:
        pytest.fail(f"the lab's etcd does not answer ({exc}): run `make lab-up`", pytrace=False)
    return etcd


@pytest.fixture(scope="module")
def lab_k8s(tmp_path_factory: pytest.TempPathFactory, lab_etcd: Etcd) -> Iterator[LabK8s]:
    server = start_lab_k8s(tmp_path_factory.mktemp("k8s-api"))
    yield server
    stop_lab_k8s(server)


@pytest.fixture(scope="module", params=["lab", "real"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if request.param == "real":
        path = os.environ.get("KUBECONFIG")
        if not path:
            pytest.skip("KUBECONFIG is not set: no real cluster to run the conformance tests against")
        api = api_client_for(Path(path.split(os.pathsep)[0]))
        yield Cluster("real", Path(path.split(os.pathsep)[0]), api, None)
        api.close()
        return
    request.getfixturevalue("lab_etcd")
    server = start_lab_k8s(tmp_path_factory.mktemp("k8s-cluster"))
    api = api_client_for(server.kubeconfig)
    yield Cluster("lab", server.kubeconfig, api, server)
    api.close()
    stop_lab_k8s(server)


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace of this test's own, deleted afterwards."""
    name = f"it-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(cluster.api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
