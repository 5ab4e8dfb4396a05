# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of the cloud_provider_openstack role: plain data in, errors or plans out.

- cluster name and load balancer name checks (cloud-provider-openstack names each Service's load balancer
  ``kube_service_<cluster>_<namespace>_<service>`` and cuts it to 255 characters);
- the ``[LoadBalancer]`` rules (the ``ovn`` provider only balances by ``SOURCE_IP_PORT``);
- the StorageClass plan against the cloud's Cinder volume types (missing and retired types refused);
- which credential action a run takes (keep the configured one, create the first, rotate);
- ``cloud.conf`` as sections of data, its text, and the checksum that rolls the pods.
Shared with the preflight (volume types behind each planned StorageClass).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable, Mapping, Sequence

DEFAULT_CLUSTER_NAMES = ("kubernetes", "cluster.local")
LB_NAME_PREFIX = "kube_service_"
LB_NAME_MAX = 255
RETIRED_PREFIX = "RETIRED:"
CINDER_PROVISIONER = "cinder.csi.openstack.org"
CINDER_TOPOLOGY_KEY = "topology.cinder.csi.openstack.org/zone"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
RECLAIM_POLICIES = ("Delete", "Retain")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
OVN_LB_METHOD = "SOURCE_IP_PORT"
# [Global] keys in the order cloud.conf lists them; other sections keep the order they are given in.
GLOBAL_KEYS = ("auth-url", "region", "application-credential-id", "application-credential-secret", "ca-file")
SECTION_ORDER = ("Global", "LoadBalancer", "BlockStorage", "Metadata")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_STORAGE_CLASS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def cluster_name_errors(name: Any) -> list[str]:
    """What is wrong with a cluster name used as cloud-provider-openstack's --cluster-name."""
    if not isinstance(name, str) or not name.strip():
        return ["cluster name is empty: set cloud_provider_openstack_cluster_name (or k8s_openstack_cluster_name)"]
    errors = []
    if name in DEFAULT_CLUSTER_NAMES:
        errors.append(f"cluster name '{name}' is a default ({', '.join(DEFAULT_CLUSTER_NAMES)}): two clusters left "
                      "on a default in one project share load balancer names and delete each other's; "
                      "choose a name unique in the project")
    if "_" in name:
        errors.append(f"cluster name '{name}' contains '_': the cloud provider parses load balancer names "
                      f"{LB_NAME_PREFIX}<cluster>_<namespace>_<service> at '_'; use '-' instead")
    if len(name) > 253:
        errors.append(f"cluster name '{name[:40]}...' is {len(name)} characters long; use at most 253")
    bad_labels = [label for label in name.split(".") if not _DNS_LABEL.match(label)]
    if bad_labels and "_" not in name:
        errors.append(f"cluster name '{name}' is not a DNS name: each dot-separated part must be 1-63 lowercase "
                      "letters, digits or '-', starting and ending with a letter or digit")
    return errors


def lb_name(cluster: str, namespace: str, service: str) -> str:
    """The load balancer name cloud-provider-openstack gives a Service of type LoadBalancer."""
    return f"{LB_NAME_PREFIX}{cluster}_{namespace}_{service}"


def lb_name_errors(cluster: str, services: Sequence[Mapping[str, Any]]) -> list[str]:
    """Expected Services whose load balancer name would be cut at 255 characters (or that are malformed)."""
    errors = []
    for index, service in enumerate(services):
        if not isinstance(service, Mapping) or not service.get("namespace") or not service.get("name"):
            errors.append(f"expected service #{index}: give namespace and name, got {service!r}")
            continue
        name = lb_name(cluster, str(service["namespace"]), str(service["name"]))
        if len(name) > LB_NAME_MAX:
            errors.append(f"service {service['namespace']}/{service['name']}: load balancer name {name[:60]}... is "
                          f"{len(name)} characters long; the cloud provider cuts it at {LB_NAME_MAX}, so names "
                          "can collide: shorten the cluster name, namespace or service name")
    return errors


def longest_lb_name(cluster: str, services: Sequence[Mapping[str, Any]]) -> int:
    """Length of the longest load balancer name of the expected Services (0 when none)."""
    return max((len(lb_name(cluster, str(s.get("namespace")), str(s.get("name")))) for s in services
                if isinstance(s, Mapping)), default=0)


def load_balancer_errors(options: Mapping[str, Any]) -> list[str]:
    """Rules of the [LoadBalancer] section that the cloud provider only reports at run time."""
    errors = []
    provider = str(options.get("lb-provider") or "").lower()
    method = options.get("lb-method")
    if provider == "ovn" and method != OVN_LB_METHOD:
        errors.append(f"[LoadBalancer] lb-provider ovn balances only by {OVN_LB_METHOD}: set lb-method to "
                      f"{OVN_LB_METHOD} (it is {method or 'unset, which means ROUND_ROBIN'})")
    for key, value in options.items():
        if isinstance(value, (dict, list)):
            errors.append(f"[LoadBalancer] {key} must be a single value, got {type(value).__name__}")
    return errors


def storage_class_declaration_errors(classes: Any) -> list[str]:
    """What is wrong with the declared StorageClasses, before the cloud is asked anything."""
    if not isinstance(classes, list):
        return [f"storage classes must be a list, got {type(classes).__name__}"]
    errors: list[str] = []
    seen: set[str] = set()
    defaults = []
    for index, item in enumerate(classes):
        if not isinstance(item, Mapping):
            errors.append(f"storage class #{index} must be a mapping, got {type(item).__name__}")
            continue
        name = str(item.get("name") or "")
        label = f"storage class '{name}'" if name else f"storage class #{index}"
        if not name or not _STORAGE_CLASS_NAME.match(name):
            errors.append(f"{label}: name must be a DNS subdomain (lowercase letters, digits, '-', '.')")
        elif name in seen:
            errors.append(f"{label} is declared twice")
        seen.add(name)
        if not item.get("volume_type"):
            errors.append(f"{label}: volume_type (the Cinder volume type) is missing")
        policy = item.get("reclaim_policy", "Delete")
        if policy not in RECLAIM_POLICIES:
            errors.append(f"{label}: reclaim_policy must be one of {', '.join(RECLAIM_POLICIES)}, got {policy!r}")
        mode = item.get("volume_binding_mode", "WaitForFirstConsumer")
        if mode not in BINDING_MODES:
            errors.append(f"{label}: volume_binding_mode must be one of {', '.join(BINDING_MODES)}, got {mode!r}")
        parameters = item.get("parameters") or {}
        if not isinstance(parameters, Mapping):
            errors.append(f"{label}: parameters must be a mapping")
        elif "type" in parameters and parameters["type"] != item.get("volume_type"):
            errors.append(f"{label}: parameters.type ({parameters['type']}) contradicts volume_type "
                          f"({item.get('volume_type')}); set only volume_type")
        zones = item.get("zones") or []
        if not isinstance(zones, list) or not all(isinstance(z, str) and z for z in zones):
            errors.append(f"{label}: zones must be a list of availability zone names")
        if item.get("default", False) is True:
            defaults.append(name or f"#{index}")
        elif not isinstance(item.get("default", False), bool):
            errors.append(f"{label}: default must be true or false")
    if len(defaults) > 1:
        errors.append(f"more than one default storage class: {', '.join(defaults)}; a claim without a class "
                      "gets whichever one Kubernetes picks; mark exactly one with default: true")
    return errors


def is_retired(volume_type: Mapping[str, Any], retired_names: Iterable[str]) -> bool:
    """A volume type is retired when its description starts with RETIRED: or the inventory lists it."""
    description = str(volume_type.get("description") or "")
    return description.startswith(RETIRED_PREFIX) or volume_type.get("name") in set(retired_names)


def storage_class_manifest(item: Mapping[str, Any]) -> dict[str, Any]:
    """The StorageClass object for one declared class (assumes the declaration was checked)."""
    parameters = {"type": item["volume_type"], **{k: str(v) for k, v in (item.get("parameters") or {}).items()
                                                  if k != "type"}}
    manifest: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": item["name"],
            # Written as "false" too, so that moving the default to another class takes it from this one.
            "annotations": {DEFAULT_CLASS_ANNOTATION: "true" if item.get("default") is True else "false"},
        },
        "provisioner": CINDER_PROVISIONER,
        "parameters": parameters,
        "reclaimPolicy": item.get("reclaim_policy", "Delete"),
        "allowVolumeExpansion": bool(item.get("allow_volume_expansion", True)),
        "volumeBindingMode": item.get("volume_binding_mode", "WaitForFirstConsumer"),
    }
    if item.get("zones"):
        manifest["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": CINDER_TOPOLOGY_KEY, "values": list(item["zones"])}]}]
    return manifest


def storage_class_plan(classes: Any, volume_types: Sequence[Mapping[str, Any]],
                       retired_names: Iterable[str] = ()) -> dict[str, Any]:
    """Errors (declaration, missing or retired volume types) and, when there are none, the manifests."""
    errors = storage_class_declaration_errors(classes)
    if errors:
        return {"errors": errors, "manifests": []}
    retired = list(retired_names)
    by_name = {str(vt.get("name")): vt for vt in volume_types}
    available = sorted(name for name, vt in by_name.items() if not is_retired(vt, retired))
    for item in classes:
        wanted = str(item["volume_type"])
        if wanted not in by_name:
            errors.append(f"storage class '{item['name']}': Cinder volume type '{wanted}' does not exist in the "
                          f"cloud (volume types in use: {', '.join(available) or 'none'})")
        elif is_retired(by_name[wanted], retired):
            description = str(by_name[wanted].get("description") or "")
            reason = description if description.startswith(RETIRED_PREFIX) else \
                "listed in cloud_provider_openstack_retired_volume_types"
            errors.append(f"storage class '{item['name']}': Cinder volume type '{wanted}' is retired ({reason}); "
                          f"map the class to a current type ({', '.join(available) or 'none'})")
    if errors:
        return {"errors": errors, "manifests": []}
    return {"errors": [], "manifests": [storage_class_manifest(item) for item in classes]}


def credential_action(configured_id: str, configured_secret: str, family: Sequence[Mapping[str, Any]],
                      rotate: bool) -> dict[str, Any]:
    """What the run does with the application credential.

    ``rotate``: asked for. ``keep``: cloud.conf holds a credential of the family and its secret (Keystone shows
    a secret only at creation, so cloud.conf is where it is kept). ``create``: first deployment, no family yet.
    ``fail``: the family exists but cloud.conf holds none of its secrets; only a rotation can recover that.
    """
    names = [str(m.get("name")) for m in family]
    if rotate:
        return {"action": "rotate", "name": None, "msg": "rotation asked for"}
    current = next((m for m in family if configured_id and m.get("id") == configured_id), None)
    if current is not None and configured_secret:
        return {"action": "keep", "name": current.get("name"), "msg": "cloud.conf holds a live credential"}
    if not family:
        return {"action": "create", "name": None, "msg": "first deployment: no credential yet"}
    held = f"credential {configured_id}, which is not in the family" if configured_id else "no credential"
    if current is not None:
        held = f"credential {configured_id} without its secret"
    return {"action": "fail", "name": None,
            "msg": f"the credential family has {len(names)} member(s) ({', '.join(names)}) but cloud.conf holds "
                   f"{held}; Keystone shows a secret only at creation. Restore cloud.conf, or set "
                   "cloud_provider_openstack_rotate_credential=true to create and prove a successor"}


def _render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ValueError(f"value {text[:20]!r}... contains a line break")
    return text


def cloud_conf_sections(global_options: Mapping[str, Any], load_balancer: Mapping[str, Any] | None = None,
                        block_storage: Mapping[str, Any] | None = None,
                        metadata: Mapping[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """cloud.conf as data: section -> option -> text. Empty values (None, "") are left out, as are empty
    sections other than [Global]; [Global] keys come in a fixed order, the others as given."""
    missing = [key for key in ("auth-url", "region") if not global_options.get(key)]
    if missing:
        raise ValueError(f"[Global] needs {', '.join(missing)}")
    ordered = [k for k in GLOBAL_KEYS if k in global_options] + sorted(k for k in global_options if k not in GLOBAL_KEYS)
    sections: dict[str, dict[str, str]] = {
        "Global": {k: _render_value(global_options[k]) for k in ordered if global_options[k] not in (None, "")}}
    for name, options in (("LoadBalancer", load_balancer), ("BlockStorage", block_storage), ("Metadata", metadata)):
        values = {k: _render_value(v) for k, v in (options or {}).items() if v not in (None, "")}
        if values:
            sections[name] = values
    return sections


def render_ini(sections: Mapping[str, Mapping[str, str]], header: str = "") -> str:
    """INI text, ``key = value`` (the form ini_set_options and the rotation drill read and write)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for index, (section, options) in enumerate(sections.items()):
        if index or lines:
            lines.append("")
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {value}" for key, value in options.items())
    return "\n".join(lines) + "\n"


def config_checksum(text: str) -> str:
    """sha256 of a configuration's text: as a pod annotation, it changes (and rolls the pods) when the text does."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def input_errors(settings: Mapping[str, Any]) -> list[str]:
    """Every input error the role can find without the cloud: cluster name, expected load balancer names,
    [LoadBalancer] rules, StorageClass declarations."""
    cluster = settings.get("cluster_name")
    errors = cluster_name_errors(cluster)
    services = settings.get("expected_services") or []
    if not isinstance(services, list):
        errors.append("expected services must be a list of {namespace, name}")
    elif isinstance(cluster, str):
        errors.extend(lb_name_errors(cluster, services))
    errors.extend(load_balancer_errors(settings.get("load_balancer") or {}))
    errors.extend(storage_class_declaration_errors(settings.get("storage_classes") or []))
    return errors
