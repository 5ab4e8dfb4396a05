"""Cloud-provider stand-ins of the lab: one process playing openstack-cloud-controller-manager, Cinder CSI
(controller and node parts), the kubelet's node registration and the few kube-controller-manager loops they
depend on (PV binder, attach/detach), against the lab's real OpenStack APIs and the lab Kubernetes API.

``python -m lab.provider --kubeconfig K --cluster-name lab-k8s --state-dir D [--interval 1]``; see
docs/lab_provider.md. Pure decisions live in ``logic.py``; the rest is I/O.
"""
