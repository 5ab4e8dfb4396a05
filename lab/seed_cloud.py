"""Seed the lab cloud as the cluster's tenant, through the APIs, idempotently.

Runs in the services' virtualenv after every service is up (``lab up``):
- quotas of project ``k8s-cluster`` (moderate values the preflight plans against);
- external network ``public`` (flat, router:external) with the FIP pool ``public-subnet``;
- tenant network ``k8s-cluster-net``/``k8s-cluster-subnet`` and router ``k8s-cluster-router``;
- flavors ``lab.control``/``lab.worker``, image ``lab-image``;
- servers standing for the cluster's nodes (3 control, 3 workers) in server group ``k8s-cluster-nodes``;
- Cinder volume types ``standard``, ``fast-ssd`` and ``legacy-hdd`` (marked retired in its description);
- Octavia flavor ``lb.small`` (amphora, single topology);
- Barbican AES-256 key ``lab-k8s-kms`` (an order, as the cluster's identity; the name the barbican_kms role uses);
- Manila share type ``default``.
Every name is looked up first: a second run creates nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openstack  # noqa: E402
from openstack.connection import Connection  # noqa: E402
from openstack.identity.v3._proxy import Proxy as IdentityV3  # noqa: E402

from lab.core import CLUSTER_KMS_KEY, Lab, log, wait_for  # noqa: E402

PROJECT = "k8s-cluster"
NODES = [f"k8s-cluster-control-{i}" for i in (1, 2, 3)] + [f"k8s-cluster-worker-{i}" for i in (1, 2, 3)]
QUOTAS: dict[str, dict[str, Any]] = {
    "compute": {"instances": 12, "cores": 48, "ram": 98304, "server_groups": 5, "server_group_members": 12},
    "volume": {"volumes": 30, "gigabytes": 1000, "snapshots": 30},
    "network": {"networks": 5, "subnets": 10, "ports": 60, "routers": 2, "floating_ips": 10,
                "security_groups": 20, "security_group_rules": 200},
    "load_balancer": {"load_balancer": 10, "listener": 20, "pool": 20, "member": 100, "health_monitor": 20},
}
VOLUME_TYPES = {
    "standard": "General purpose block storage",
    "fast-ssd": "Low-latency block storage",
    "legacy-hdd": "RETIRED: replaced by standard; no new volumes",
}
# The barbican_kms role names the key `<cluster>-kms`: the seed makes the lab cluster's (cluster `lab-k8s`).
KMS_KEY = CLUSTER_KMS_KEY
FLAVORS = {"lab.control": (2, 4096, 20), "lab.worker": (4, 8192, 40)}


def first(items: Any) -> Any:
    return next(iter(items), None)


def seed_quotas(admin: Connection, project_id: str) -> None:
    admin.compute.update_quota_set(project_id, user=None, **QUOTAS["compute"])
    admin.block_storage.update_quota_set(project_id, **QUOTAS["volume"])
    admin.network.update_quota(project_id, **QUOTAS["network"])
    admin.load_balancer.update_quota(project_id, **QUOTAS["load_balancer"])


def seed_networks(admin: Connection, user: Connection) -> dict[str, str]:
    public = admin.network.find_network("public")
    if public is None:
        public = admin.network.create_network(name="public", is_router_external=True, is_shared=False,
                                              provider_network_type="flat", provider_physical_network="public")
    if admin.network.find_subnet("public-subnet") is None:
        # TEST-NET-3 (RFC 5737): documentation addresses, never routed; nothing here carries packets.
        admin.network.create_subnet(name="public-subnet", network_id=public.id, ip_version=4,
                                    cidr="203.0.113.0/24", gateway_ip="203.0.113.1", is_dhcp_enabled=False,
                                    allocation_pools=[{"start": "203.0.113.10", "end": "203.0.113.250"}])
    net = user.network.find_network("k8s-cluster-net") or user.network.create_network(name="k8s-cluster-net")
    subnet = user.network.find_subnet("k8s-cluster-subnet") or user.network.create_subnet(
        name="k8s-cluster-subnet", network_id=net.id, ip_version=4, cidr="10.20.0.0/24",
        dns_nameservers=[], is_dhcp_enabled=True)
    router = user.network.find_router("k8s-cluster-router")
    if router is None:
        router = user.network.create_router(name="k8s-cluster-router",
                                            external_gateway_info={"network_id": public.id})
        user.network.add_interface_to_router(router, subnet=subnet.id)
    return {"public": public.id, "net": net.id, "subnet": subnet.id, "router": router.id}


def seed_compute(admin: Connection, user: Connection, net_id: str, lab: Lab) -> None:
    for name, (vcpus, ram, disk) in FLAVORS.items():
        if admin.compute.find_flavor(name) is None:
            admin.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
    image = admin.image.find_image("lab-image")
    if image is None:
        # A few KiB of zeros: the fake virt driver never reads it.
        blob = lab.data / "lab-image.raw"
        blob.write_bytes(b"\0" * 4096)
        image = admin.image.create_image(name="lab-image", filename=str(blob), disk_format="raw",
                                         container_format="bare", visibility="public", wait=True)
    group = user.compute.find_server_group("k8s-cluster-nodes") or user.compute.create_server_group(
        name="k8s-cluster-nodes", policy="soft-anti-affinity")
    existing = {s.name: s for s in user.compute.servers()}
    for name in NODES:
        if name in existing:
            continue
        flavor = admin.compute.find_flavor("lab.control" if "control" in name else "lab.worker",
                                           ignore_missing=False)
        role = "control-plane" if "control" in name else "worker"
        user.compute.create_server(name=name, flavor_id=flavor.id, image_id=image.id,
                                   networks=[{"uuid": net_id}], scheduler_hints={"group": group.id},
                                   metadata={"k8s_cluster": PROJECT, "k8s_role": role})

    def settled(server_name: str) -> bool:
        found = user.compute.find_server(server_name)
        return found is not None and user.compute.get_server(found.id).status in ("ACTIVE", "ERROR")

    for name in NODES:
        wait_for(f"server {name} ACTIVE", lambda n=name: settled(n), 180)  # type: ignore[misc]
        server = user.compute.get_server(user.compute.find_server(name, ignore_missing=False).id)
        if server.status != "ACTIVE":
            raise SystemExit(f"seed: server {name} is {server.status}: {server.fault}")


def seed_block_storage(admin: Connection) -> None:
    for name, description in VOLUME_TYPES.items():
        vtype = admin.block_storage.find_type(name)
        if vtype is None:
            admin.block_storage.create_type(name=name, description=description,
                                            extra_specs={"volume_backend_name": "fake"})


def seed_octavia(admin: Connection) -> None:
    profile = admin.load_balancer.find_flavor_profile("lab-single") or admin.load_balancer.create_flavor_profile(
        name="lab-single", provider_name="amphora", flavor_data=json.dumps({"loadbalancer_topology": "SINGLE"}))
    if admin.load_balancer.find_flavor("lb.small") is None:
        admin.load_balancer.create_flavor(name="lb.small", flavor_profile_id=profile.id, is_enabled=True,
                                          description="Single amphora (noop drivers in the lab)")


def seed_barbican(user: Connection) -> str:
    found = [s for s in user.key_manager.secrets(name=KMS_KEY) if s.status == "ACTIVE"]
    if found:
        return str(found[0].secret_ref)
    order = user.key_manager.create_order(type="key", meta={
        "name": KMS_KEY, "algorithm": "aes", "bit_length": 256, "mode": "cbc"})
    order_id = str(order.order_ref).rsplit("/", 1)[1]
    wait_for("Barbican order ACTIVE", lambda: user.key_manager.get_order(order_id).status == "ACTIVE", 60)
    return str(user.key_manager.get_order(order_id).secret_ref)


def seed_manila(admin: Connection) -> None:
    if not any(t.name == "default" for t in admin.shared_file_system.share_types()):
        admin.shared_file_system.create_share_type(
            name="default", extra_specs={"driver_handles_share_servers": "false"})


def main() -> None:
    lab = Lab.from_env()
    os.environ["OS_CLIENT_CONFIG_FILE"] = str(lab.clouds_yaml)
    admin = openstack.connect(cloud="lab-admin")
    user = openstack.connect(cloud="lab-k8s-cluster")
    started = time.monotonic()
    project = cast(IdentityV3, admin.identity).find_project(PROJECT, ignore_missing=False)
    seed_quotas(admin, project.id)
    ids = seed_networks(admin, user)
    seed_block_storage(admin)
    seed_octavia(admin)
    seed_manila(admin)
    key_ref = seed_barbican(user)
    seed_compute(admin, user, ids["net"], lab)
    log(f"cloud seeded in {time.monotonic() - started:.1f}s: networks, router, 6 servers, volume types, "
        f"lb.small, share type default, key {key_ref.rsplit('/', 1)[1]}")


if __name__ == "__main__":
    main()
