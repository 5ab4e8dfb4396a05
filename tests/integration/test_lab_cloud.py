"""The lab cloud works as a small real OpenStack: each path the collection relies on, end to end,
as the cluster's tenant user (``lab-k8s-cluster``), against the real services ``lab up`` started."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

import openstack
import pytest

from lab.cloud import CATALOG, COMPUTE_HOST

pytestmark = pytest.mark.usefixtures("lab_is_up")


def wait_until(what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    pytest.fail(f"{what} not reached in {timeout:.0f}s (last: {last!r})")


@pytest.fixture
def name() -> str:
    return f"it-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def admin_conn(lab_is_up: None) -> openstack.connection.Connection:
    return openstack.connect(cloud="lab-admin")


@pytest.fixture(scope="module")
def subnet(user_conn: Any) -> Any:
    return user_conn.network.find_subnet("k8s-cluster-subnet", ignore_missing=False)


@pytest.fixture
def server(user_conn: Any, name: str, subnet: Any) -> Iterator[Any]:
    flavor = user_conn.compute.find_flavor("lab.worker", ignore_missing=False)
    image = user_conn.image.find_image("lab-image", ignore_missing=False)
    created = user_conn.compute.create_server(name=name, flavor_id=flavor.id, image_id=image.id,
                                              networks=[{"uuid": subnet.network_id}])
    try:
        yield user_conn.compute.wait_for_server(created, status="ACTIVE", wait=120)
    finally:
        user_conn.compute.delete_server(created)
        user_conn.compute.wait_for_delete(created, wait=120)


def test_catalog_lists_every_lab_service(user_conn: Any) -> None:
    types = {entry["type"] for entry in user_conn.service_catalog}
    missing = [e.service_type for e in CATALOG if e.service_type not in types]
    assert not missing, f"catalog lacks {missing}"


def test_seeded_tenant(user_conn: Any) -> None:
    servers = sorted(s.name for s in user_conn.compute.servers() if s.name.startswith("k8s-cluster-"))
    assert servers == [f"k8s-cluster-control-{i}" for i in (1, 2, 3)] + [f"k8s-cluster-worker-{i}" for i in (1, 2, 3)]
    group = user_conn.compute.find_server_group("k8s-cluster-nodes", ignore_missing=False)
    assert len(group.member_ids) == 6
    types = {t.name: t.description for t in user_conn.block_storage.types()}
    assert {"standard", "fast-ssd", "legacy-hdd"} <= set(types)
    assert types["legacy-hdd"].startswith("RETIRED:")
    keys = list(user_conn.key_manager.secrets(name="lab-k8s-kms"))
    assert [(k.algorithm, k.bit_length, k.status) for k in keys] == [("aes", 256, "ACTIVE")]
    assert user_conn.network.find_network("public").is_router_external


def test_server_gets_a_port_bound_and_active(user_conn: Any, admin_conn: Any, server: Any) -> None:
    ports = list(user_conn.network.ports(device_id=server.id))
    assert len(ports) == 1
    # Binding needs a live OVS agent on the compute host: the lab's agent plays it and marks the port ACTIVE.
    port = wait_until("port ACTIVE", lambda: (p := admin_conn.network.get_port(ports[0].id)).status == "ACTIVE" and p)
    assert (port.binding_host_id, port.binding_vif_type) == (COMPUTE_HOST, "ovs")


def test_volume_attach_and_detach_through_nova(user_conn: Any, server: Any, name: str) -> None:
    volume = user_conn.block_storage.create_volume(name=name, size=1, volume_type="standard")
    try:
        user_conn.block_storage.wait_for_status(volume, "available", wait=60)
        user_conn.compute.create_volume_attachment(server, volume_id=volume.id)
        in_use = user_conn.block_storage.wait_for_status(volume, "in-use", wait=60)
        assert [a["server_id"] for a in in_use.attachments] == [server.id]
        user_conn.compute.delete_volume_attachment(server, volume.id)
        available = user_conn.block_storage.wait_for_status(volume, "available", wait=60)
        assert available.attachments == []
    finally:
        user_conn.block_storage.delete_volume(volume)
        user_conn.block_storage.wait_for_delete(volume, wait=60)


def test_load_balancer_goes_active_and_cascade_deletes(user_conn: Any, subnet: Any, name: str) -> None:
    lbs = user_conn.load_balancer
    lb = lbs.create_load_balancer(name=name, vip_subnet_id=subnet.id, provider="amphora")
    try:
        lb = lbs.wait_for_load_balancer(lb.id, status="ACTIVE", wait=60)
        listener = lbs.create_listener(name=name, load_balancer_id=lb.id, protocol="TCP", protocol_port=80)
        lbs.wait_for_load_balancer(lb.id, status="ACTIVE", wait=60)
        pool = lbs.create_pool(name=name, listener_id=listener.id, protocol="TCP", lb_algorithm="ROUND_ROBIN")
        lbs.wait_for_load_balancer(lb.id, status="ACTIVE", wait=60)
        lbs.create_member(pool, address="10.20.0.50", protocol_port=30080, subnet_id=subnet.id)
        lbs.wait_for_load_balancer(lb.id, status="ACTIVE", wait=60)
        lbs.create_health_monitor(pool_id=pool.id, type="TCP", delay=5, timeout=3, max_retries=2)
        lbs.wait_for_load_balancer(lb.id, status="ACTIVE", wait=60)
        for resource in (lbs.get_listener(listener.id), lbs.get_pool(pool.id)):
            assert resource.provisioning_status == "ACTIVE"
    finally:
        lbs.delete_load_balancer(lb.id, cascade=True)
        wait_until("load balancer deleted", lambda: lbs.find_load_balancer(lb.id) is None, 60)


def test_floating_ip_follows_its_port(user_conn: Any, server: Any) -> None:
    public = user_conn.network.find_network("public", ignore_missing=False)
    port = next(iter(user_conn.network.ports(device_id=server.id)))
    fip = user_conn.network.create_ip(floating_network_id=public.id, port_id=port.id,
                                      description="it: floating IP of a test server")
    try:
        assert fip.floating_ip_address.startswith("203.0.113.")
        wait_until("floating IP ACTIVE", lambda: user_conn.network.get_ip(fip.id).status == "ACTIVE", 30)
        user_conn.network.update_ip(fip, port_id=None)
        wait_until("floating IP DOWN", lambda: user_conn.network.get_ip(fip.id).status == "DOWN", 30)
    finally:
        user_conn.network.delete_ip(fip)


def test_barbican_key_order_and_payload(user_conn: Any, name: str) -> None:
    order = user_conn.key_manager.create_order(
        type="key", meta={"name": name, "algorithm": "aes", "bit_length": 256, "mode": "cbc"})
    order_id = str(order.order_ref).rsplit("/", 1)[1]
    done = wait_until("order ACTIVE", lambda: (o := user_conn.key_manager.get_order(order_id)).status == "ACTIVE" and o)
    secret_id = str(done.secret_ref).rsplit("/", 1)[1]
    try:
        secret = user_conn.key_manager.get_secret(secret_id)
        assert (secret.algorithm, secret.bit_length) == ("aes", 256)
        assert len(secret.payload) > 0
    finally:
        user_conn.key_manager.delete_secret(secret_id)
        user_conn.key_manager.delete_order(order_id)


def test_manila_share_becomes_available(user_conn: Any, name: str) -> None:
    share = user_conn.shared_file_system.create_share(name=name, size=1, share_proto="NFS", share_type="default")
    try:
        wait_until("share available",
                   lambda: user_conn.shared_file_system.get_share(share.id).status == "available", 90)
    finally:
        user_conn.shared_file_system.delete_share(share.id)
        wait_until("share deleted",
                   lambda: not any(s.id == share.id for s in user_conn.shared_file_system.shares()), 90)


def test_compute_host_is_the_agents_host(admin_conn: Any) -> None:
    services = {(s.binary, s.host, s.state) for s in admin_conn.compute.services()}
    assert ("nova-compute", COMPUTE_HOST, "up") in services
    agents = {(a.agent_type, a.host, a.is_alive) for a in admin_conn.network.agents()}
    assert ("Open vSwitch agent", COMPUTE_HOST, True) in agents


def test_swift_object_round_trip(user_conn: Any, name: str) -> None:
    user_conn.object_store.create_container(name=name)
    try:
        user_conn.object_store.upload_object(container=name, name="o", data=b"payload", metadata={"sha256": "x"})
        assert user_conn.object_store.download_object("o", container=name) == b"payload"
        assert user_conn.object_store.get_object_metadata("o", container=name).metadata == {"sha256": "x"}
    finally:
        for obj in user_conn.object_store.objects(name):
            user_conn.object_store.delete_object(obj, container=name)
        user_conn.object_store.delete_container(name)
