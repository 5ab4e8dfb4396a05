#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: lb_service_watch
short_description: Check a LoadBalancer Service continuously until told to stop, and count failed checks
version_added: 0.2.0
description:
  - Samples a Kubernetes Service of type C(LoadBalancer) every I(interval) seconds until I(stop_file) appears
    or I(max_seconds) pass, and returns how many checks ran and how many failed, with the first failures.
  - "Each check: the Service exists, keeps type C(LoadBalancer), its ingress address and the load balancer of
    its C(loadbalancer.openstack.org/load-balancer-id) annotation as at the first check; with a cloud, the
    Octavia load balancer is not in C(ERROR)/C(OFFLINE)/being deleted and the ingress address reaches its VIP
    (the VIP itself, or a floating IP bound to the VIP port); with I(tcp), a TCP connection to the ingress
    address succeeds on every port of the Service."
  - Meant to run in the background during a change (C(async) with C(poll=0)), then to be stopped by creating
    I(stop_file) and collected with C(ansible.builtin.async_status). A failed check is a measurement, not a
    module failure; the module fails only when it cannot start (unreadable kubeconfig, no cloud).
  - Checks only the control-plane state unless I(tcp=true). Where load balancers have no data path (Octavia
    on noop drivers, as in a lab), leave I(tcp) off and say so in the evidence.
author:
  - DeployOpen Engineering (@deployopen)
extends_documentation_fragment:
  - deployopen.k8s_openstack.attributes
  - deployopen.k8s_openstack.openstack
attributes:
  check_mode:
    support: full
    details: Only reads; runs the same in check mode.
  diff_mode:
    support: none
options:
  kubeconfig:
    description: Kubeconfig of the cluster. Default as the Kubernetes client finds it (C(KUBECONFIG), C(~/.kube/config)).
    type: path
  context:
    description: Context of the kubeconfig to use.
    type: str
  namespace:
    description: Namespace of the Service.
    type: str
    required: true
  name:
    description: Name of the Service.
    type: str
    required: true
  check_octavia:
    description:
      - Also check the Octavia load balancer and its floating IP, with the connection options (I(cloud), I(auth)).
      - Use an identity other than the credential being changed, so the watch measures the load balancer and
        not its own access.
    type: bool
    default: true
  operating_statuses:
    description:
      - Octavia operating statuses that count as serving. C(OFFLINE) means administratively down, or no health
        messages from the amphorae (what Octavia on noop drivers reports forever).
    type: list
    elements: str
    default: [ONLINE, DEGRADED, NO_MONITOR, DRAINING]
  floating_ip:
    description:
      - How the floating IP with the Service's ingress address is checked (when the address is not the VIP itself).
      - C(bound) it exists and is bound to the load balancer's VIP port; C(exists) it exists (where VIP ports are
        not in Neutron, as with Octavia's noop network driver); C(none) not checked.
    type: str
    choices: [bound, exists, none]
    default: bound
  tcp:
    description: Also open a TCP connection to the ingress address on each port of the Service.
    type: bool
    default: false
  tcp_timeout:
    description: Seconds a TCP connection may take.
    type: float
    default: 2
  interval:
    description: Seconds between the starts of two checks.
    type: float
    default: 1
  max_seconds:
    description: Stop after this many seconds even without I(stop_file) (keep it below the task's C(async)).
    type: int
    default: 600
  stop_file:
    description: Stop after the check during which this file appears. Without it, the watch runs I(max_seconds).
    type: path
requirements:
  - kubernetes >= 24.2.0 (the official Python client)
  - openstacksdk >= 4.0.0 (with I(check_octavia))
"""

EXAMPLES = r"""
- name: Watch the ingress Service while the credential rotates
  deployopen.k8s_openstack.lb_service_watch:
    kubeconfig: /etc/kubernetes/admin.conf
    namespace: ingress-nginx
    name: ingress-nginx-controller
    cloud: ops-readonly
    tcp: true
    stop_file: /var/tmp/rotation-watch.stop
    max_seconds: 900
  async: 960
  poll: 0
  register: watch_job

# ... the change ...

- name: Stop the watch
  ansible.builtin.file:
    path: /var/tmp/rotation-watch.stop
    state: touch
    mode: "0600"

- name: Collect what it measured
  ansible.builtin.async_status:
    jid: "{{ watch_job.ansible_job_id }}"
  register: watch
  until: watch.finished
  retries: 30
  delay: 1

- name: Zero failed checks is the pass rule
  ansible.builtin.assert:
    that: watch.checks > 0 and watch.failed_checks == 0
"""

RETURN = r"""
checks:
  description: How many checks ran.
  returned: always
  type: int
failed_checks:
  description: How many checks found a problem.
  returned: always
  type: int
availability:
  description: Share of checks without a problem (null when no check ran).
  returned: always
  type: float
first_failure:
  description: The first failed check (C(at), epoch seconds, and C(problems)), or null.
  returned: always
  type: dict
failures:
  description: The first 20 failed checks.
  returned: always
  type: list
  elements: dict
failures_not_kept:
  description: Failed checks beyond the first 20.
  returned: always
  type: int
longest_outage_seconds:
  description: Longest run of consecutive failed checks, first to last, in seconds.
  returned: always
  type: float
watched_seconds:
  description: From the first check to the last.
  returned: always
  type: float
baseline:
  description: What the first check saw (C(ingress), C(load_balancer_id), C(ports)), compared with in later checks.
  returned: always
  type: dict
checked:
  description: What each check covered (C(service), C(octavia), C(tcp)).
  returned: always
  type: list
  elements: str
stopped_by:
  description: C(stop_file) or C(max_seconds).
  returned: always
  type: str
"""

import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._lb_watch import (  # noqa: E402
    FLOATING_IP_CHECKS,
    LB_SERVING_OPERATING,
    WatchLog,
    ingress_address,
    load_balancer_id,
    load_balancer_problems,
    service_ports,
    service_problems,
    tcp_problems,
)
from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._openstack import (  # noqa: E402
    Cloud,
    auth_secrets,
    describe_error,
    is_not_found,
    openstack_argument_spec,
    sdk_errors,
)

KUBERNETES_IMPORT_ERROR: str | None
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
except ImportError:  # pragma: no cover - reported in main()
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
else:
    KUBERNETES_IMPORT_ERROR = None


def read_service(core: Any, namespace: str, name: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The Service as plain data (None when absent), or the API's error as a problem."""
    try:
        response = core.read_namespaced_service(name, namespace, _preload_content=False, _request_timeout=10)
        return json.loads(response.data), []
    except ApiException as exc:
        if exc.status == 404:
            return None, []
        return None, [f"Kubernetes API: HTTP {exc.status} {exc.reason}"]
    except Exception as exc:  # noqa: BLE001 - an unreachable API is a failed check, not a crash
        return None, [f"Kubernetes API: {type(exc).__name__}: {exc}"]


def read_octavia(cloud: Cloud, lb_id: str, ingress: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    if not lb_id:
        return None, None, ["Service has no load-balancer-id annotation"]
    try:
        lb = cloud.conn.load_balancer.get_load_balancer(lb_id).to_dict(computed=False)
    except sdk_errors() as exc:
        if is_not_found(exc):
            return None, None, []
        return None, None, [describe_error(exc, f"reading load balancer {lb_id}", cloud.target)]
    fip = None
    if ingress and ingress != lb.get("vip_address"):  # the floating IP in front of the VIP
        try:
            found = list(cloud.conn.network.ips(floating_ip_address=ingress))
        except sdk_errors() as exc:
            return lb, None, [describe_error(exc, f"reading floating IP {ingress}", cloud.target)]
        fip = found[0].to_dict(computed=False) if found else None
    return lb, fip, []


def tcp_results(address: str, ports: list[int], timeout: float) -> list[tuple[int, str]]:
    results = []
    for port in ports:
        try:
            with socket.create_connection((address, port), timeout=timeout):
                results.append((port, ""))
        except OSError as exc:
            results.append((port, str(exc) or type(exc).__name__))
    return results


def main() -> None:
    module = AnsibleModule(
        argument_spec=openstack_argument_spec(
            kubeconfig={"type": "path"},
            context={"type": "str"},
            namespace={"type": "str", "required": True},
            name={"type": "str", "required": True},
            check_octavia={"type": "bool", "default": True},
            operating_statuses={"type": "list", "elements": "str", "default": list(LB_SERVING_OPERATING)},
            floating_ip={"type": "str", "default": "bound", "choices": list(FLOATING_IP_CHECKS)},
            tcp={"type": "bool", "default": False},
            tcp_timeout={"type": "float", "default": 2},
            interval={"type": "float", "default": 1},
            max_seconds={"type": "int", "default": 600},
            stop_file={"type": "path"},
        ),
        supports_check_mode=True,
    )
    params = module.params
    # Before any fail_json: a cloud/auth dict's secrets must not reach the result's invocation.
    module.no_log_values.update(auth_secrets(params))
    if KUBERNETES_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    if params["interval"] <= 0 or params["max_seconds"] <= 0 or params["tcp_timeout"] <= 0:
        module.fail_json(msg="interval, max_seconds and tcp_timeout must be greater than 0")
    if params["kubeconfig"] and not os.path.isfile(params["kubeconfig"]):
        module.fail_json(msg=f"kubeconfig {params['kubeconfig']} does not exist")
    try:
        api_client = k8s_config.new_client_from_config(config_file=params["kubeconfig"], context=params["context"])
    except Exception as exc:  # noqa: BLE001 - any kubeconfig problem is reported with what to fix
        module.fail_json(msg=f"cannot load the kubeconfig ({params['kubeconfig'] or 'default'}): {exc}")
    core = k8s_client.CoreV1Api(api_client)
    cloud = Cloud(module) if params["check_octavia"] else None
    namespace, name = params["namespace"], params["name"]

    first, first_problems = read_service(core, namespace, name)
    # What later checks compare with: taken from the first Service read (if the API did not answer at first,
    # from the first answer after that).
    baseline: dict[str, Any] = {"ingress": "", "load_balancer_id": "", "ports": []}
    checked = ["service"] + (["octavia"] if cloud else []) + (["tcp"] if params["tcp"] else [])
    log = WatchLog()
    started = time.monotonic()
    stopped_by = "max_seconds"
    while True:
        began = time.monotonic()
        at = time.time()
        service, problems = (first, first_problems) if log.checks == 0 else read_service(core, namespace, name)
        if service is not None and not baseline["ingress"] and not baseline["load_balancer_id"]:
            baseline.update(ingress=ingress_address(service), load_balancer_id=load_balancer_id(service),
                            ports=service_ports(service))
        if service is not None or not problems:
            problems = problems + service_problems(service, baseline)
        address = ingress_address(service)
        if cloud is not None and service is not None:
            lb, fip, cloud_problems = read_octavia(cloud, load_balancer_id(service), address)
            problems += cloud_problems or load_balancer_problems(lb, fip, address, params["operating_statuses"],
                                                                 params["floating_ip"])
        if params["tcp"] and address:
            problems += tcp_problems(tcp_results(address, service_ports(service), params["tcp_timeout"]))
        log.record(at, problems)
        if params["stop_file"] and os.path.exists(params["stop_file"]):
            stopped_by = "stop_file"
            break
        if time.monotonic() - started >= params["max_seconds"]:
            break
        time.sleep(max(0.0, params["interval"] - (time.monotonic() - began)))
    module.exit_json(changed=False, baseline=baseline, checked=checked, stopped_by=stopped_by, **log.summary())


if __name__ == "__main__":
    main()
