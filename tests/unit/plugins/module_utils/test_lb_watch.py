from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _lb_watch as w

LB_ID = "5c4b9f0e-1111-4d7a-9a39-000000000001"
VIP_PORT = "port-vip"


def service(kind: str = "LoadBalancer", ip: str | None = "203.0.113.10", lb_id: str | None = LB_ID,
            ports: tuple[int, ...] = (80,)) -> dict[str, Any]:
    svc: dict[str, Any] = {"metadata": {"name": "web", "namespace": "default", "annotations": {}},
                           "spec": {"type": kind, "ports": [{"port": p} for p in ports]},
                           "status": {"loadBalancer": {"ingress": [{"ip": ip}] if ip else []}}}
    if lb_id:
        svc["metadata"]["annotations"][w.LB_ID_ANNOTATION] = lb_id
    return svc


def lb(provisioning: str = "ACTIVE", operating: str = "ONLINE", vip: str = "10.0.0.5") -> dict[str, Any]:
    return {"id": LB_ID, "provisioning_status": provisioning, "operating_status": operating,
            "vip_address": vip, "vip_port_id": VIP_PORT}


BASELINE = {"ingress": "203.0.113.10", "load_balancer_id": LB_ID, "ports": [80]}


def test_reading_a_service() -> None:
    svc = service(ports=(80, 443))
    assert (w.ingress_address(svc), w.load_balancer_id(svc), w.service_ports(svc)) == ("203.0.113.10", LB_ID, [80, 443])
    hostname = service(ip=None)
    hostname["status"]["loadBalancer"]["ingress"] = [{"hostname": "lb.example.com"}]
    assert w.ingress_address(hostname) == "lb.example.com"
    assert (w.ingress_address(None), w.load_balancer_id(None), w.service_ports(None)) == ("", "", [])


@pytest.mark.parametrize("svc,expected", [
    (service(), []),
    (None, ["Service not found"]),
    (service(kind="ClusterIP"), ["Service type is ClusterIP, not LoadBalancer"]),
    (service(ip=None), ["Service has no load balancer ingress"]),
    (service(ip="203.0.113.99"), ["ingress changed from 203.0.113.10 to 203.0.113.99"]),
    (service(lb_id="other"), [f"load balancer changed from {LB_ID} to other"]),
    (service(lb_id=None), [f"load balancer changed from {LB_ID} to (none)"]),
])
def test_service_problems(svc: dict[str, Any] | None, expected: list[str]) -> None:
    assert w.service_problems(svc, BASELINE) == expected


def test_service_without_a_baseline_only_needs_an_ingress() -> None:
    assert w.service_problems(service(ip="198.51.100.1", lb_id="x"), {"ingress": "", "load_balancer_id": ""}) == []


FIP_OK = {"floating_ip_address": "203.0.113.10", "port_id": VIP_PORT}


@pytest.mark.parametrize("balancer,fip,ingress,expected", [
    (lb(), FIP_OK, "203.0.113.10", []),
    (lb(provisioning="PENDING_UPDATE"), FIP_OK, "203.0.113.10", []),  # an update in progress still serves
    (lb(operating="NO_MONITOR"), FIP_OK, "203.0.113.10", []),
    (lb(vip="203.0.113.10"), None, "203.0.113.10", []),  # ingress is the VIP itself: no floating IP needed
    (None, FIP_OK, "203.0.113.10", ["load balancer not found in Octavia"]),
    (lb(provisioning="ERROR"), FIP_OK, "203.0.113.10", ["load balancer provisioning_status ERROR"]),
    (lb(provisioning="PENDING_DELETE"), FIP_OK, "203.0.113.10", ["load balancer provisioning_status PENDING_DELETE"]),
    (lb(operating="OFFLINE"), FIP_OK, "203.0.113.10", ["load balancer operating_status OFFLINE"]),
    (lb(operating="ERROR"), FIP_OK, "203.0.113.10", ["load balancer operating_status ERROR"]),
    ({**lb(), "admin_state_up": False}, FIP_OK, "203.0.113.10",
     ["load balancer is administratively down (admin_state_up false)"]),
    (lb(), None, "203.0.113.10", ["no floating IP 203.0.113.10 (and it is not the VIP 10.0.0.5)"]),
    (lb(), {"port_id": None}, "203.0.113.10",
     ["floating IP 203.0.113.10 is bound to port (none), not the VIP port port-vip"]),
    (lb(), {"port_id": "other"}, "203.0.113.10",
     ["floating IP 203.0.113.10 is bound to port other, not the VIP port port-vip"]),
])
def test_load_balancer_problems(balancer: dict[str, Any] | None, fip: dict[str, Any] | None, ingress: str,
                                expected: list[str]) -> None:
    assert w.load_balancer_problems(balancer, fip, ingress) == expected


def test_load_balancer_checks_can_be_relaxed_where_octavia_has_no_data_plane() -> None:
    """Octavia on noop drivers: no health messages (OFFLINE) and VIP ports Neutron does not know (FIP unbound)."""
    unbound = {"floating_ip_address": "203.0.113.10", "port_id": None}
    relaxed: dict[str, Any] = {"operating_statuses": ["ONLINE", "OFFLINE"], "floating_ip_check": "exists"}
    assert w.load_balancer_problems(lb(operating="OFFLINE"), unbound, "203.0.113.10", **relaxed) == []
    # Still caught when relaxed: the floating IP gone, the LB in ERROR or being deleted.
    assert w.load_balancer_problems(lb(operating="OFFLINE"), None, "203.0.113.10", **relaxed) == [
        "no floating IP 203.0.113.10 (and it is not the VIP 10.0.0.5)"]
    assert w.load_balancer_problems(lb(provisioning="PENDING_DELETE", operating="OFFLINE"), unbound,
                                    "203.0.113.10", **relaxed) == ["load balancer provisioning_status PENDING_DELETE"]
    assert w.load_balancer_problems(lb(), None, "203.0.113.10", floating_ip_check="none") == []


def test_tcp_problems() -> None:
    assert w.tcp_problems([(80, ""), (443, "")]) == []
    assert w.tcp_problems([(80, ""), (443, "Connection refused")]) == ["TCP 443: Connection refused"]


def test_watch_log_counts_failures_and_the_longest_outage() -> None:
    log = w.WatchLog()
    for at, problems in [(100.0, []), (101.0, ["a"]), (102.0, ["b"]), (103.5, ["c"]), (104.0, []), (105.0, ["d"]),
                         (106.0, [])]:
        log.record(at, problems)
    summary = log.summary()
    assert (summary["checks"], summary["failed_checks"]) == (7, 4)
    assert summary["availability"] == pytest.approx(3 / 7, abs=1e-6)
    assert summary["first_failure"] == {"at": 101.0, "problems": ["a"]}
    assert summary["longest_outage_seconds"] == 2.5  # 101.0 .. 103.5
    assert summary["watched_seconds"] == 6.0
    assert summary["failures_not_kept"] == 0


def test_watch_log_without_failures_and_empty() -> None:
    log = w.WatchLog()
    assert log.summary()["checks"] == 0 and log.summary()["availability"] is None
    log.record(1.0, [])
    log.record(2.0, [])
    assert (log.summary()["failed_checks"], log.summary()["availability"], log.summary()["first_failure"]) == (0, 1.0, None)


def test_watch_log_keeps_only_the_first_failures() -> None:
    log = w.WatchLog()
    for i in range(w.MAX_FAILURES_KEPT + 5):
        log.record(float(i), [f"p{i}"])
    summary = log.summary()
    assert len(summary["failures"]) == w.MAX_FAILURES_KEPT and summary["failures_not_kept"] == 5
    assert summary["failures"][-1]["problems"] == [f"p{w.MAX_FAILURES_KEPT - 1}"]
