"""lb_service_watch against the lab Kubernetes API, the lab's cloud-provider stand-ins and the real Octavia and
Neutron: a healthy LoadBalancer Service passes every check; a floating IP deleted behind the CCM's back fails
the checks that follow; bad input fails clearly. (The drill's use of it is tested in test_rotation_end_to_end.)"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import openstack
import pytest
from k8s_fixtures import KUBECTL
from labtest import LAB_HOME

from ansible_collections.deployopen.k8s_openstack.plugins.modules import lb_service_watch

pytestmark = pytest.mark.usefixtures("lab_is_up")
KUBECONFIG = str(LAB_HOME / "kubeconfig")
CLOUD = "lab-k8s-cluster"
# The lab's Octavia runs noop drivers: no health messages (OFFLINE), VIP ports not in Neutron (FIP unbound).
LAB_RELAXED = {"operating_statuses": ["ONLINE", "OFFLINE"], "floating_ip": "exists"}


def kubectl(*args: str, stdin: str | None = None) -> str:
    return subprocess.run([KUBECTL, f"--kubeconfig={KUBECONFIG}", *args], input=stdin, capture_output=True,
                          text=True, check=True, timeout=120).stdout


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[str, str]]:
    namespace = f"it-watch-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace)
    kubectl("apply", "--validate=false", "-f", "-", stdin=f"""
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {namespace}}}
spec:
  type: LoadBalancer
  selector: {{app: none}}
  ports: [{{port: 80, targetPort: 8080, protocol: TCP}}]
""")
    deadline = time.monotonic() + 120
    while not kubectl("-n", namespace, "get", "service", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}"):
        assert time.monotonic() < deadline, "no ingress for the test Service"
        time.sleep(1)
    yield namespace, "web"
    # The Service first (the CCM deletes its load balancer and floating IP), then the namespace.
    kubectl("-n", namespace, "delete", "service", "web", "--wait=true", "--timeout=120s")
    kubectl("delete", "namespace", namespace, "--wait=false")


def watch_in_background(run_module: Any, args: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def target() -> None:
        result.update(run_module(lb_service_watch.main, args))

    thread = threading.Thread(target=target)
    thread.start()
    return thread, result


def test_a_healthy_service_passes_every_check(run_module: Any, service: tuple[str, str]) -> None:
    namespace, name = service
    result = run_module(lb_service_watch.main, {"kubeconfig": KUBECONFIG, "namespace": namespace, "name": name,
                                                "cloud": CLOUD, "interval": 0.5, "max_seconds": 3, **LAB_RELAXED})
    assert result["checks"] >= 4 and result["failed_checks"] == 0, result.get("failures")
    assert result["checked"] == ["service", "octavia"] and result["stopped_by"] == "max_seconds"
    assert result["baseline"]["ingress"].startswith("203.0.113.") and result["baseline"]["load_balancer_id"]
    assert result["changed"] is False


def test_default_checks_see_what_the_lab_octavia_cannot_do(run_module: Any, service: tuple[str, str]) -> None:
    """The strict defaults are not vacuous: the noop drivers' OFFLINE status and unbound floating IP fail them."""
    namespace, name = service
    result = run_module(lb_service_watch.main, {"kubeconfig": KUBECONFIG, "namespace": namespace, "name": name,
                                                "cloud": CLOUD, "interval": 0.5, "max_seconds": 1})
    assert result["failed_checks"] == result["checks"] >= 1
    problems = result["first_failure"]["problems"]
    assert "load balancer operating_status OFFLINE" in problems
    assert any(p.startswith("floating IP 203.0.113.") and "not the VIP port" in p for p in problems)


def test_a_floating_ip_deleted_behind_the_ccm_fails_the_checks(run_module: Any, service: tuple[str, str],
                                                               tmp_path: Path) -> None:
    namespace, name = service
    stop = tmp_path / "stop"
    thread, result = watch_in_background(run_module, {
        "kubeconfig": KUBECONFIG, "namespace": namespace, "name": name, "cloud": CLOUD, "interval": 0.5,
        "max_seconds": 60, "stop_file": str(stop), **LAB_RELAXED})
    time.sleep(3)
    conn = openstack.connect(cloud=CLOUD)
    ingress = kubectl("-n", namespace, "get", "service", name, "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
    fip = next(conn.network.ips(floating_ip_address=ingress))
    deleted_at = time.time()
    conn.network.delete_ip(fip)
    time.sleep(3)
    stop.touch()
    thread.join(30)
    assert not thread.is_alive()
    assert result["stopped_by"] == "stop_file"
    assert result["checks"] >= 8
    assert 1 <= result["failed_checks"] < result["checks"]  # healthy before the deletion, failing after it
    first = result["first_failure"]
    assert first["at"] >= deleted_at - 0.5
    assert any(ingress in p for p in first["problems"]), first
    assert result["longest_outage_seconds"] > 0


@pytest.mark.parametrize("args,message", [
    ({"interval": 0}, "interval, max_seconds and tcp_timeout must be greater than 0"),
    ({"kubeconfig": "/nonexistent/kubeconfig"}, "kubeconfig /nonexistent/kubeconfig does not exist"),
    ({"context": "no-such-context"}, "cannot load the kubeconfig"),
])
def test_bad_input_fails_clearly(run_module: Any, args: dict[str, Any], message: str) -> None:
    result = run_module(lb_service_watch.main, {"kubeconfig": KUBECONFIG, "namespace": "default", "name": "x",
                                                "check_octavia": False, **args})
    assert result.get("failed") is True and message in result["msg"]
    assert "Traceback" not in result["msg"]


def test_unreachable_keystone_fails_at_start(run_module: Any) -> None:
    result = run_module(lb_service_watch.main, {
        "kubeconfig": KUBECONFIG, "namespace": "default", "name": "x",
        "auth": {"auth_url": "http://127.0.0.1:9/v3", "username": "u", "password": "p", "project_name": "p",
                 "user_domain_name": "Default", "project_domain_name": "Default"}, "api_timeout": 5})
    assert result.get("failed") is True and "127.0.0.1:9" in result["msg"]
