#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cloud_capacity_info
short_description: Read a project's quotas and usage, volume types and Octavia offer, and check a cluster plan
version_added: 0.2.0
description:
  - Reads, for one project, the quotas and current usage of compute (Nova), block storage (Cinder), network
    (Neutron) and load balancer (Octavia), plus the Nova flavors, Cinder volume types, Octavia providers and
    flavors, and the names of the project's servers and load balancers.
  - A service that is not in the catalog is reported as absent (C(services.<type>=false)), not an error.
    A service that answers with an error (for example HTTP 403 on its quota) is reported in C(errors).
  - Octavia's quota API carries no usage, so its usage is counted from the project's load balancers,
    listeners and pools.
  - With I(plan), also checks the planned cluster against what was read (the preflight) and returns the
    findings and the tables. The module never fails because of a finding; the
    C(deployopen.k8s_openstack.preflight) role does.
  - Only reads.
author:
  - DeployOpen Engineering (@deployopen)
extends_documentation_fragment:
  - deployopen.k8s_openstack.openstack
  - deployopen.k8s_openstack.attributes
attributes:
  check_mode:
    support: full
    details: Only reads; runs the same in check mode.
  diff_mode:
    support: none
options:
  project:
    description:
      - Name or ID of the project to read. Defaults to the project the connection is scoped to.
      - Reading another project's quotas needs an administrator; a name is looked up in Keystone.
    type: str
  plan:
    description:
      - The planned cluster. When given, the result has C(preflight) with the demand, the quota rows and the
        findings. Counts are whole numbers; sizes are GiB; flavors are Nova flavor names.
    type: dict
    suboptions:
      cluster_name:
        description: Cluster name as given to the cloud controller manager (load balancer names derive from it).
        type: str
      environment:
        description: Environment; C(production) turns an etcd with fewer than 5 members into a warning.
        type: str
      nodes:
        description:
          - Node groups, each C(role), C(count), C(flavor) and optional C(name_prefix). Servers named
            C(<name_prefix>1..count) that exist already are counted in the usage, not demanded again.
        type: list
        elements: dict
        required: true
      upgrade_surge:
        description:
          - Extra nodes during a rolling upgrade, C(count) and optional C(flavor) (default the largest node
            flavor).
        type: dict
      boot_from_volume:
        description: Whether nodes boot from a Cinder root volume (each one volume of I(plan.root_volume_gb)).
        type: bool
        default: false
      root_volume_gb:
        description: Size of a node's root volume when booting from volume.
        type: int
      root_volume_type:
        description: Volume type of the root volumes, checked like a StorageClass's.
        type: str
      ports_per_node:
        description: Neutron ports each node takes.
        type: int
        default: 1
      cluster_networks:
        description: Networks the deployment creates (not counting existing ones).
        type: int
        default: 0
      cluster_security_groups:
        description: Security groups the deployment creates for its nodes.
        type: int
        default: 0
      manage_security_groups:
        description: Whether the cloud controller manager creates a security group per LoadBalancer Service.
        type: bool
        default: true
      services:
        description:
          - Expected Services of type LoadBalancer, each C(namespace), C(name), C(ports) (a list). Each takes
            one load balancer, a listener and a pool per port, a VIP port, a floating IP and a security group.
        type: list
        elements: dict
        default: []
      pvcs:
        description: Expected PersistentVolumeClaims, each C(name), C(count), C(size_gb), C(storage_class).
        type: list
        elements: dict
        default: []
      storage_classes:
        description: Planned StorageClasses, each C(name) and C(volume_type) (a Cinder volume type).
        type: list
        elements: dict
        default: []
      octavia_provider:
        description: Octavia provider the cluster uses (for example C(amphora) or C(ovn)).
        type: str
      octavia_flavor:
        description: Octavia flavor (name or ID) the cluster uses, if any.
        type: str
      etcd_members:
        description: Number of etcd members.
        type: int
        required: true
"""

EXAMPLES = r"""
- name: Read the cluster project's capacity
  deployopen.k8s_openstack.cloud_capacity_info:
    cloud: k8s-cluster
  register: capacity

- name: Check a planned cluster against it
  deployopen.k8s_openstack.cloud_capacity_info:
    cloud: k8s-cluster
    plan:
      cluster_name: prod-eu1
      environment: production
      nodes:
        - {role: control, count: 3, flavor: m1.large, name_prefix: prod-eu1-control-}
        - {role: worker, count: 6, flavor: m1.xlarge, name_prefix: prod-eu1-worker-}
      upgrade_surge: {count: 1}
      services:
        - {namespace: ingress, name: ingress-nginx, ports: [80, 443]}
      pvcs:
        - {name: postgres, count: 3, size_gb: 100, storage_class: fast}
      storage_classes:
        - {name: fast, volume_type: fast-ssd}
      octavia_provider: amphora
      etcd_members: 5
  register: preflight

- name: Show what is wrong
  ansible.builtin.debug:
    msg: "{{ preflight.preflight.findings_table }}"
"""

RETURN = r"""
project:
  description: The project that was read.
  returned: always
  type: dict
  contains:
    id:
      description: Project ID.
      type: str
    name:
      description: Project name (when known).
      type: str
user:
  description: The identity that read (C(id), and C(name) when the cloud configuration names the user).
  returned: always
  type: dict
services:
  description:
    - For each service, whether it is in the catalog. C(compute), C(block_storage), C(network) and
      C(load_balancer) are read; C(identity), C(image), C(key_manager) and C(shared_file_system) are only
      looked up.
  returned: always
  type: dict
  sample: {compute: true, block_storage: true, network: true, load_balancer: false, key_manager: true}
quotas:
  description:
    - Per service, per resource, the C(limit) (-1 is unlimited) and what is C(in_use). Absent services are missing.
    - Resource names are the module's, the same for every service (C(floating_ips), C(security_groups), C(load_balancers), ...).
  returned: always
  type: dict
  sample: {compute: {cores: {limit: 40, in_use: 12}}, load_balancer: {load_balancers: {limit: 10, in_use: 1}}}
flavors:
  description: Nova flavors visible to the project (C(name), C(id), C(vcpus), C(ram) in MiB, C(disk) in GiB).
  returned: always
  type: list
  elements: dict
volume_types:
  description: Cinder volume types visible to the project (C(name), C(id), C(description), C(is_public)).
  returned: always
  type: list
  elements: dict
load_balancer_providers:
  description: Octavia providers (C(name), C(description)).
  returned: always
  type: list
  elements: dict
load_balancer_flavors:
  description: Octavia flavors (C(name), C(id), C(description), C(is_enabled)).
  returned: always
  type: list
  elements: dict
servers:
  description: Names of the project's servers.
  returned: always
  type: list
  elements: str
load_balancers:
  description: Names of the project's load balancers.
  returned: always
  type: list
  elements: str
errors:
  description: Per service, why it could not be read (the service is in the catalog but refused or failed).
  returned: always
  type: dict
preflight:
  description: The plan checked against the cloud.
  returned: when I(plan) is given
  type: dict
  contains:
    demand:
      description: What the plan will create, per C(service.resource).
      type: dict
    demand_breakdown:
      description: One line per contribution to the demand.
      type: list
      elements: str
    rows:
      description: Per quota, C(limit), C(in_use), C(headroom), C(demand) and C(status) (C(ok), C(SHORT), C(absent), C(unknown)).
      type: list
      elements: dict
    findings:
      description: What is wrong, each C(severity) (C(error) or C(warning)), C(check), C(subject), C(message).
      type: list
      elements: dict
    problems:
      description: Number of findings of severity error.
      type: int
    warnings:
      description: Number of findings of severity warning.
      type: int
    capacity_table:
      description: The quota rows as a text table.
      type: str
    findings_table:
      description: The findings as a text table.
      type: str
"""

import traceback  # noqa: E402
from typing import Any, Callable  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._openstack import (  # noqa: E402
    Cloud,
    describe_error,
    openstack_argument_spec,
    sdk_errors,
)
from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._preflight import (  # noqa: E402
    PlanError,
    evaluate,
)

# Catalog service type (as openstacksdk names its proxies) -> our service key. The first four are read;
# the others are only looked up in the catalog (the feature map records whether each is there).
CATALOG = {"compute": "compute", "block-storage": "block_storage", "network": "network",
           "load-balancer": "load_balancer", "identity": "identity", "image": "image",
           "key-manager": "key_manager", "shared-file-system": "shared_file_system"}
# service's resource -> {limit, in_use}
Quotas = dict[str, dict[str, Any]]
# Which service each listing comes from (for error messages).
LISTING_SERVICE = {"flavors": "compute", "servers": "compute", "volume_types": "block_storage",
                   "load_balancer_providers": "load_balancer", "load_balancer_flavors": "load_balancer",
                   "load_balancers": "load_balancer"}
COMPUTE_KEYS = ("instances", "cores", "ram")
CINDER_KEYS = ("volumes", "gigabytes")
# Neutron's quota names -> ours.
NEUTRON_KEYS = {"network": "networks", "port": "ports", "security_group": "security_groups",
                "floatingip": "floating_ips"}

PLAN_SPEC: dict[str, Any] = {
    "cluster_name": {"type": "str"},
    "environment": {"type": "str"},
    "nodes": {"type": "list", "elements": "dict", "required": True},
    "upgrade_surge": {"type": "dict"},
    "boot_from_volume": {"type": "bool", "default": False},
    "root_volume_gb": {"type": "int"},
    "root_volume_type": {"type": "str"},
    "ports_per_node": {"type": "int", "default": 1},
    "cluster_networks": {"type": "int", "default": 0},
    "cluster_security_groups": {"type": "int", "default": 0},
    "manage_security_groups": {"type": "bool", "default": True},
    "services": {"type": "list", "elements": "dict", "default": []},
    "pvcs": {"type": "list", "elements": "dict", "default": []},
    "storage_classes": {"type": "list", "elements": "dict", "default": []},
    "octavia_provider": {"type": "str"},
    "octavia_flavor": {"type": "str"},
    "etcd_members": {"type": "int", "required": True},
}


def _limit_usage(quota_set: Any, keys: tuple[str, ...] | list[str]) -> Quotas:
    """Nova/Cinder quota sets fetched with usage=True: limits as attributes, usage in ``.usage``."""
    usage = quota_set.usage or {}
    limits = {key: getattr(quota_set, key, None) for key in keys}
    return {key: {"limit": limits[key], "in_use": int(usage.get(key) or 0)} for key in keys
            if limits[key] is not None or key in usage}


def read_compute(conn: Any, project_id: str) -> Quotas:
    return _limit_usage(conn.compute.get_quota_set(project_id, usage=True), COMPUTE_KEYS)


def read_block_storage(conn: Any, project_id: str) -> Quotas:
    quota_set = conn.block_storage.get_quota_set(project_id, usage=True)
    # Per-volume-type quotas (volumes_<type>, gigabytes_<type>) come back as extra keys.
    extra = [k for k in (quota_set.usage or {}) if k.startswith(("volumes_", "gigabytes_"))]
    return _limit_usage(quota_set, list(CINDER_KEYS) + sorted(extra))


def read_network(conn: Any, project_id: str) -> Quotas:
    details = conn.network.get_quota(project_id, details=True).to_dict(computed=False)
    out = {}
    for neutron_name, ours in NEUTRON_KEYS.items():
        # The SDK names the attributes like its Quota resource (floating_ips, security_groups, ...).
        value = details.get(ours) or details.get(neutron_name) or {}
        out[ours] = {"limit": value.get("limit"), "in_use": int(value.get("used") or 0)}
    return out


def read_load_balancer(conn: Any, project_id: str) -> Quotas:
    quota = conn.load_balancer.get_quota(project_id)
    defaults = None
    # Octavia's quota carries no usage: count. A member sees its own project's objects only; the filter
    # matters for an administrator reading another project.
    counts = {"load_balancers": conn.load_balancer.load_balancers(project_id=project_id),
              "listeners": conn.load_balancer.listeners(project_id=project_id),
              "pools": conn.load_balancer.pools(project_id=project_id)}
    out = {}
    for key, listing in counts.items():
        limit = getattr(quota, key)
        if limit is None:  # not set for the project: Octavia's default applies
            defaults = defaults or conn.load_balancer.get_quota_default()
            limit = getattr(defaults, key)
        out[key] = {"limit": limit, "in_use": sum(1 for _item in listing)}
    return out


def read_lists(conn: Any, present: dict[str, bool], scope: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """The listings to read, per service that is in the catalog (``scope`` filters another project's)."""
    jobs: dict[str, Callable[[], Any]] = {}
    if present["compute"]:
        jobs["flavors"] = lambda: [{"name": f.name, "id": f.id, "vcpus": f.vcpus, "ram": f.ram, "disk": f.disk}
                                   for f in conn.compute.flavors(details=True)]
        server_scope = {**scope, "all_projects": True} if scope else {}
        jobs["servers"] = lambda: sorted(s.name for s in conn.compute.servers(**server_scope))
    if present["block_storage"]:
        jobs["volume_types"] = lambda: [{"name": t.name, "id": t.id, "description": t.description,
                                         "is_public": t.is_public} for t in conn.block_storage.types()]
    if present["load_balancer"]:
        jobs["load_balancer_providers"] = lambda: [{"name": p.name, "description": p.description}
                                                   for p in conn.load_balancer.providers()]
        jobs["load_balancer_flavors"] = lambda: [{"name": f.name, "id": f.id, "description": f.description,
                                                  "is_enabled": f.is_enabled} for f in conn.load_balancer.flavors()]
        jobs["load_balancers"] = lambda: sorted(lb.name for lb in conn.load_balancer.load_balancers(**scope))
    return jobs


def main() -> None:
    module = AnsibleModule(
        argument_spec=openstack_argument_spec(
            project={"type": "str"},
            plan={"type": "dict", "options": PLAN_SPEC},
        ),
        supports_check_mode=True,
    )
    cloud = Cloud(module)
    conn: Any = cloud.conn  # openstacksdk's proxies are typed as unions of API versions
    try:
        if module.params["project"]:
            found = conn.identity.find_project(module.params["project"], ignore_missing=True)
            if found is None:
                module.fail_json(msg=f"project {module.params['project']!r} not found at {cloud.target} "
                                     "(or this identity may not look projects up: pass its ID)")
            project = {"id": found.id, "name": found.name}
        else:
            project = {"id": conn.current_project_id,
                       "name": (conn.config.get_auth_args() or {}).get("project_name")}
        user = {"id": conn.current_user_id, "name": (conn.config.get_auth_args() or {}).get("username")}
        present = {ours: bool(conn.has_service(sdk_type)) for sdk_type, ours in CATALOG.items()}
    except sdk_errors() as exc:
        cloud.fail(exc, "reading the project and the catalog")

    result: dict[str, Any] = {"changed": False, "project": project, "user": user, "services": present, "quotas": {},
                              "flavors": [], "volume_types": [], "load_balancer_providers": [],
                              "load_balancer_flavors": [], "servers": [], "load_balancers": [], "errors": {}}

    def where(what: str) -> str:
        """The endpoint that failed is the service's, not Keystone's: say so (the error text has its URL)."""
        service = LISTING_SERVICE.get(what, what)
        return f"the {service.replace('_', '-')} endpoint (catalog of {cloud.target})"

    readers = {"compute": read_compute, "block_storage": read_block_storage, "network": read_network,
               "load_balancer": read_load_balancer}
    for service, reader in readers.items():
        if not present[service]:
            continue
        try:
            result["quotas"][service] = reader(conn, project["id"])
        except sdk_errors() as exc:
            # One service refusing (403) or failing is a finding of the preflight, not a crash.
            result["errors"][service] = describe_error(exc, f"reading the {service} quota", where(service))
    scope = {"project_id": project["id"]} if module.params["project"] else {}
    for key, job in read_lists(conn, present, scope).items():
        try:
            result[key] = job()
        except sdk_errors() as exc:
            result["errors"][key] = describe_error(exc, f"listing {key.replace('_', ' ')}", where(key))

    if module.params["plan"] is not None:
        try:
            result["preflight"] = evaluate(module.params["plan"], result)
        except PlanError as exc:
            module.fail_json(msg=f"the plan is not usable: {exc}", exception=traceback.format_exc(), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
