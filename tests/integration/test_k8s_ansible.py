"""kubernetes.core (the modules the collection's roles use to apply to a cluster) against the lab API server:
apply, wait, idempotence, check mode, info, delete. The playbook runs with ansible-playbook, as in a real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from k8s_fixtures import LabK8s, api_client_for, apps_api, core_api
from labtest import ansible_playbook

PLAY = [{"hosts": "localhost", "gather_facts": False, "vars": {"ns": "default"}, "tasks": [
    {"name": "ConfigMap", "kubernetes.core.k8s": {
        "state": "present", "definition": {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "from-ansible", "namespace": "{{ ns }}"},
                                           "data": {"a": "1"}}}, "register": "configmap"},
    {"name": "Deployment (applied, waited for)", "kubernetes.core.k8s": {
        "state": "present", "apply": True, "wait": True, "wait_timeout": 60, "definition": {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ans", "namespace": "{{ ns }}"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "ans"}},
                     "template": {"metadata": {"labels": {"app": "ans"}}, "spec": {
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}}},
     "register": "deployment"},
    {"name": "Pods", "kubernetes.core.k8s_info": {"kind": "Pod", "namespace": "{{ ns }}",
                                                  "label_selectors": ["app=ans"]}, "register": "pods"},
    {"name": "Report", "check_mode": False, "ansible.builtin.copy": {
        "dest": "{{ report }}", "mode": "0600",
        "content": "{{ {'configmap': configmap.changed, 'deployment': deployment.changed, "
                   "'pods': pods.resources | map(attribute='status.phase') | list} | to_json }}"}}]}]


def run(tmp_path: Path, server: LabK8s, *extra: str) -> tuple[Any, dict[str, Any]]:
    playbook = tmp_path / "k8s.yml"
    playbook.write_text(yaml.safe_dump(PLAY, sort_keys=False))
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter={{ ansible_playbook_python }}\n")
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    result = ansible_playbook(str(playbook), "-e", f"report={report}", *extra, inventory=inventory,
                              env={"K8S_AUTH_KUBECONFIG": str(server.kubeconfig)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return result, json.loads(report.read_text()) if report.exists() else {}


def test_kubernetes_core_apply_wait_idempotent(tmp_path: Path, lab_k8s: LabK8s) -> None:
    core = core_api(api_client_for(lab_k8s.kubeconfig))
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ansible-node"}})
    try:
        _checked, predicted = run(tmp_path, lab_k8s, "--check")
        assert predicted["configmap"] is True and predicted["deployment"] is True
        assert "from-ansible" not in [c.metadata.name for c in core.list_namespaced_config_map("default").items]
        _first, report = run(tmp_path, lab_k8s)
        assert report == {"configmap": True, "deployment": True, "pods": ["Running", "Running"]}
        deployment = apps_api(api_client_for(lab_k8s.kubeconfig)).read_namespaced_deployment("ans", "default")
        assert deployment.status.ready_replicas == 2
        _second, report = run(tmp_path, lab_k8s)
        assert report == {"configmap": False, "deployment": False, "pods": ["Running", "Running"]}
        assert core.read_namespaced_config_map("from-ansible", "default").data == {"a": "1"}
    finally:
        core.delete_node("ansible-node")
