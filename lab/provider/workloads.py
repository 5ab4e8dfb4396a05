"""The workloads the stand-ins play, as the upstream Helm charts name them (openstack-cloud-controller-manager,
openstack-cinder-csi): created in kube-system when absent, so the lab cluster looks like a cluster where the
charts are installed, and a rollout restart of them is what makes the stand-ins re-read their credential.

Created once and never overwritten: an operator (or a test) may change or replace them, as on a real cluster.
"""

from __future__ import annotations

from typing import Any

from .kube import Kube, KubeError

NAMESPACE = "kube-system"
MANAGED_BY = "lab.provider"
# Pods that must run before the CCM has initialised the nodes, on control-plane nodes too (as the charts set).
_TOLERATE_ALL = [{"operator": "Exists"}]


def _workload(kind: str, name: str, component: str, image: str, node_selector: dict[str, str] | None = None,
              replicas: int | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": component}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": component, "image": image,
                                              "args": ["--cloud-config=/etc/config/cloud.conf"]}],
                              "tolerations": _TOLERATE_ALL,
                              "volumes": [{"name": "cloud-config", "secret": {"secretName": "cloud-config"}}]}}}
    if node_selector:
        spec["template"]["spec"]["nodeSelector"] = node_selector
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {**labels, "app.kubernetes.io/managed-by": MANAGED_BY}},
            "spec": spec}


CONTROL_PLANE = {"node-role.kubernetes.io/control-plane": ""}
WORKLOADS = (
    _workload("DaemonSet", "openstack-cloud-controller-manager", "openstack-cloud-controller-manager",
              "registry.k8s.io/provider-os/openstack-cloud-controller-manager:v1.33.0", CONTROL_PLANE),
    _workload("Deployment", "openstack-cinder-csi-controllerplugin", "controllerplugin",
              "registry.k8s.io/provider-os/cinder-csi-plugin:v1.33.0", CONTROL_PLANE, replicas=1),
    _workload("DaemonSet", "openstack-cinder-csi-nodeplugin", "nodeplugin",
              "registry.k8s.io/provider-os/cinder-csi-plugin:v1.33.0"),
)


def ensure_workloads(kube: Kube) -> list[str]:
    """Create the workloads that do not exist; the names of those created."""
    created = []
    for body in WORKLOADS:
        kind, name = body["kind"], body["metadata"]["name"]
        if kube.get(kind, NAMESPACE, name) is not None:
            continue
        try:
            kube.create(kind, NAMESPACE, body)
        except KubeError as exc:
            if exc.code != 409:  # created meanwhile: fine
                raise
        created.append(f"{kind}/{name}")
    return created
