# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of ``lb_service_watch``: what is wrong with one sample of a LoadBalancer Service (its Kubernetes
object, its Octavia load balancer, its floating IP, TCP connections to its ingress), and the summary of a
series of samples. Plain data in, plain data out."""

from __future__ import annotations

from typing import Any

# Octavia provisioning statuses of a load balancer that is going or gone (an update in progress still serves).
LB_BAD_PROVISIONING = ("ERROR", "DELETED", "PENDING_DELETE")
# Operating statuses of a load balancer that answers (OFFLINE: administratively down or no health messages).
LB_SERVING_OPERATING = ("ONLINE", "DEGRADED", "NO_MONITOR", "DRAINING")
FLOATING_IP_CHECKS = ("bound", "exists", "none")
LB_ID_ANNOTATION = "loadbalancer.openstack.org/load-balancer-id"
MAX_FAILURES_KEPT = 20


def ingress_address(service: dict[str, Any] | None) -> str:
    """The first ingress IP (or hostname) of a Service's load balancer status, or ''."""
    if not service:
        return ""
    ingress = (((service.get("status") or {}).get("loadBalancer") or {}).get("ingress")) or []
    if not ingress:
        return ""
    return str(ingress[0].get("ip") or ingress[0].get("hostname") or "")


def service_ports(service: dict[str, Any] | None) -> list[int]:
    return [int(p["port"]) for p in ((service or {}).get("spec") or {}).get("ports") or [] if p.get("port")]


def load_balancer_id(service: dict[str, Any] | None) -> str:
    return str((((service or {}).get("metadata") or {}).get("annotations") or {}).get(LB_ID_ANNOTATION) or "")


def service_problems(service: dict[str, Any] | None, baseline: dict[str, Any]) -> list[str]:
    """The Service exists, is of type LoadBalancer and keeps the ingress and load balancer it had at the start."""
    if service is None:
        return ["Service not found"]
    problems = []
    kind = ((service.get("spec") or {}).get("type")) or "ClusterIP"
    if kind != "LoadBalancer":
        problems.append(f"Service type is {kind}, not LoadBalancer")
    address = ingress_address(service)
    if not address:
        problems.append("Service has no load balancer ingress")
    elif baseline.get("ingress") and address != baseline["ingress"]:
        problems.append(f"ingress changed from {baseline['ingress']} to {address}")
    lb_id = load_balancer_id(service)
    if baseline.get("load_balancer_id") and lb_id != baseline["load_balancer_id"]:
        problems.append(f"load balancer changed from {baseline['load_balancer_id']} to {lb_id or '(none)'}")
    return problems


def load_balancer_problems(lb: dict[str, Any] | None, floating_ip: dict[str, Any] | None, ingress: str,
                           operating_statuses: tuple[str, ...] | list[str] = LB_SERVING_OPERATING,
                           floating_ip_check: str = "bound") -> list[str]:
    """The Octavia load balancer is there and serving, and the ingress address reaches its VIP: either it is
    the VIP itself, or a floating IP with that address exists (``exists``) and is bound to the VIP port
    (``bound``)."""
    if lb is None:
        return ["load balancer not found in Octavia"]
    problems = []
    provisioning = str(lb.get("provisioning_status") or "")
    operating = str(lb.get("operating_status") or "")
    if provisioning in LB_BAD_PROVISIONING:
        problems.append(f"load balancer provisioning_status {provisioning}")
    if lb.get("admin_state_up") is False:
        problems.append("load balancer is administratively down (admin_state_up false)")
    if operating not in operating_statuses:
        problems.append(f"load balancer operating_status {operating or '(none)'}")
    if floating_ip_check != "none" and ingress and ingress != lb.get("vip_address"):
        if floating_ip is None:
            problems.append(f"no floating IP {ingress} (and it is not the VIP {lb.get('vip_address')})")
        elif floating_ip_check == "bound" and floating_ip.get("port_id") != lb.get("vip_port_id"):
            problems.append(f"floating IP {ingress} is bound to port {floating_ip.get('port_id') or '(none)'}, "
                            f"not the VIP port {lb.get('vip_port_id')}")
    return problems


def tcp_problems(results: list[tuple[int, str]]) -> list[str]:
    """``results``: (port, error) per TCP connection attempt, error '' when it connected."""
    return [f"TCP {port}: {error}" for port, error in results if error]


class WatchLog:
    """Samples of a watch: counts, the failures (the first ones kept whole) and the longest outage."""

    def __init__(self) -> None:
        self.checks = 0
        self.failed = 0
        self.failures: list[dict[str, Any]] = []
        self.first_at: float | None = None
        self.last_at: float | None = None
        self._streak_start: float | None = None
        self.longest_outage = 0.0

    def record(self, at: float, problems: list[str]) -> None:
        self.checks += 1
        self.first_at = at if self.first_at is None else self.first_at
        self.last_at = at
        if problems:
            self.failed += 1
            if len(self.failures) < MAX_FAILURES_KEPT:
                self.failures.append({"at": round(at, 3), "problems": list(problems)})
            if self._streak_start is None:
                self._streak_start = at
            self.longest_outage = max(self.longest_outage, at - self._streak_start)
        else:
            self._streak_start = None

    def summary(self) -> dict[str, Any]:
        span = (self.last_at - self.first_at) if self.first_at is not None and self.last_at is not None else 0.0
        return {"checks": self.checks, "failed_checks": self.failed,
                "availability": round((self.checks - self.failed) / self.checks, 6) if self.checks else None,
                "first_failure": self.failures[0] if self.failures else None,
                "failures": self.failures, "failures_not_kept": max(0, self.failed - len(self.failures)),
                "longest_outage_seconds": round(self.longest_outage, 3), "watched_seconds": round(span, 3)}
