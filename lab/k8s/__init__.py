"""The lab's Kubernetes API server: a small server, written for the lab, that speaks the Kubernetes wire
protocol (discovery, CRUD, patch, watch, Status errors) over HTTPS, stores objects in the lab's etcd under
``/registry/...`` like kube-apiserver, and encrypts Secrets at rest the way the Barbican KMS v2 plugin does.

It is a stand-in, not kube-apiserver: see docs/k8s_api.md for what it is not.
"""
