"""``python -m lab.provider --kubeconfig K --cluster-name lab-k8s --state-dir D [--interval 1]``"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from .ccm import CloudControllerManager
from .component import Component, log
from .csi import CinderCSI
from .kube import Kube, KubeError
from .workloads import ensure_workloads


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lab.provider", description=(
        "The lab's cloud-provider stand-ins: openstack-cloud-controller-manager, Cinder CSI and the kubelet's "
        "node registration, driving the lab cloud with the credential of Secret kube-system/cloud-config."))
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--cluster-name", required=True, help="the CCM's --cluster-name and Cinder CSI's --cluster")
    parser.add_argument("--state-dir", type=Path, required=True,
                        help="what it created, fault switches (faults.json), volume data, status.json")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between passes (default 1)")
    parser.add_argument("--node-prefix", default="k8s-cluster-", help="Nova servers whose name starts with this "
                        "are the cluster's nodes (default k8s-cluster-)")
    parser.add_argument("--node-sync-seconds", type=float, default=5.0,
                        help="how often Nova's server list is read (the CCM's node monitor period; default 5)")
    parser.add_argument("--only", choices=("ccm", "csi"), help="run one component only")
    parser.add_argument("--ensure-workloads", action="store_true",
                        help="create the workloads the stand-ins play (the charts' DaemonSets/Deployment in "
                             "kube-system) when absent; their rollout restart is what re-reads the credential")
    args = parser.parse_args(argv)
    if "_" in args.cluster_name:
        parser.error("--cluster-name must not contain '_': the CCM parses load balancer names on '_'")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    kube = Kube(args.kubeconfig)
    if args.ensure_workloads:
        try:
            created = ensure_workloads(kube)
        except (KubeError, OSError) as exc:
            print(f"lab.provider: cannot create the stand-ins' workloads: {exc}", file=sys.stderr)
            return 1
        if created:
            log("main", f"created {', '.join(created)} in kube-system")
    components: list[Component] = []
    if args.only in (None, "ccm"):
        components.append(CloudControllerManager(kube, args.cluster_name, args.state_dir, args.interval,
                                                 node_prefix=args.node_prefix,
                                                 node_sync_seconds=args.node_sync_seconds))
    if args.only in (None, "csi"):
        components.append(CinderCSI(kube, args.cluster_name, args.state_dir, args.interval))
    done = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for component in components:
        component.start()
    log("main", f"running {', '.join(c.name for c in components)} for cluster {args.cluster_name} "
                f"against {kube.server}")
    done.wait()
    for component in components:
        component.stop()
    for component in components:
        component.thread.join(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
