"""openstack-cloud-controller-manager (cloud-node, node-lifecycle and service controllers) and the kubelet's
node registration, against the lab cloud's Nova, Neutron and Octavia with cloud.conf's credential."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from openstack import exceptions as os_exc

from . import logic
from .component import Component, faults, log, now_rfc3339
from .kube import KubeError


class CloudControllerManager(Component):
    name = "ccm"
    workloads = (("Deployment", "openstack-cloud-controller-manager"),
                 ("DaemonSet", "openstack-cloud-controller-manager"))
    event_source = "service-controller"

    def __init__(self, *args: Any, node_prefix: str = "k8s-cluster-", node_sync_seconds: float = 5.0,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.node_prefix = node_prefix
        self.node_sync_seconds = node_sync_seconds
        self._last_node_sync = 0.0
        self._node_names: tuple[str, ...] = ()
        # Service uid -> (monotonic time of the next try, current delay): failed ensures back off like the
        # service controller's retries (5 s doubling, at most 5 min).
        self._backoff: dict[str, tuple[float, float]] = {}
        self._deleting: set[str] = set()
        self._flavor_names: dict[str, str] = {}

    def on_restart(self) -> None:
        self._backoff.clear()
        self._last_node_sync = 0.0

    def reconcile(self) -> None:
        nodes = self.kube.list("Node")
        names = tuple(sorted(n["metadata"]["name"] for n in nodes))
        # Nova is asked every node_sync_seconds (the CCM's node-monitor period), or at once when Nodes changed.
        if time.monotonic() - self._last_node_sync >= self.node_sync_seconds or names != self._node_names:
            self.sync_nodes(nodes)
            self._last_node_sync = time.monotonic()
            nodes = self.kube.list("Node")
            self._node_names = tuple(sorted(n["metadata"]["name"] for n in nodes))
        self.sync_services(nodes)

    # ------------------------------------------------------------------ nodes

    def sync_nodes(self, nodes: list[dict[str, Any]]) -> None:
        assert self.conn is not None and self.conf is not None
        servers = [self._named_flavor(logic.server_info(s.to_dict())) for s in self.conn.compute.servers(details=True)]
        plan = logic.plan_nodes(servers, nodes, self.node_prefix, self.conf.region)
        for server in plan.register:
            try:
                self.kube.create("Node", None, logic.registered_node(server, now_rfc3339()))
                log(self.name, f"kubelet registered Node {server.name} (tainted {logic.UNINITIALIZED_TAINT})")
            except KubeError as exc:
                if exc.code != 409:
                    raise
        if plan.register:
            nodes = self.kube.list("Node")
        # Initialise after registering: the real CCM sees the new Node a moment later.
        plan = logic.plan_nodes(servers, nodes, self.node_prefix, self.conf.region)
        by_name = {n["metadata"]["name"]: n for n in nodes}
        for name, server in plan.initialise:
            if not server.flavor:
                continue
            before = by_name[name]
            wanted = logic.initialised_node(before, server, self.conf.region, now_rfc3339())
            if wanted is None:
                continue
            patch = {"metadata": {"labels": wanted["metadata"].get("labels") or {}},
                     "spec": {"providerID": wanted["spec"]["providerID"],
                              "taints": wanted["spec"].get("taints") or []}}
            # Status (addresses, Ready) first: once a reader sees the providerID and no uninitialized taint,
            # the addresses are already there.
            self.kube.patch("Node", None, name, {"status": {"addresses": wanted["status"]["addresses"],
                                                            "conditions": wanted["status"]["conditions"]}},
                            sub="status")
            self.kube.patch("Node", None, name, patch)
            if not (before.get("spec") or {}).get("providerID"):
                log(self.name, f"initialised Node {name}: providerID {wanted['spec']['providerID']}, "
                               f"instance-type {server.flavor}, zone {server.zone}")
            else:
                taints = [t["key"] for t in wanted["spec"].get("taints") or []]
                log(self.name, f"Node {name}: server {server.status}, taints {taints or 'none'}")
        for name in plan.delete:
            if self.kube.delete("Node", None, name):
                log(self.name, f"deleted Node {name}: its server is gone")

    def _named_flavor(self, server: logic.ServerInfo) -> logic.ServerInfo:
        """Before compute API 2.47 a server names its flavor by id only: the instance-type label wants the name."""
        assert self.conn is not None
        if len(server.flavor) != 36 or server.flavor.count("-") != 4:
            return server
        if server.flavor not in self._flavor_names:
            self._flavor_names[server.flavor] = str(self.conn.compute.get_flavor(server.flavor).name)
        return dataclasses.replace(server, flavor=self._flavor_names[server.flavor])

    # ------------------------------------------------------------------ services

    def sync_services(self, nodes: list[dict[str, Any]]) -> None:
        records: dict[str, Any] = self.state.section("load_balancers")
        services = self.kube.list("Service")
        seen = set()
        backends = logic.lb_backends(nodes)
        for service in services:
            meta = service["metadata"]
            uid = meta["uid"]
            seen.add(uid)  # still in the API: not for the "gone while we were down" cleanup below
            ours = logic.LB_CLEANUP_FINALIZER in (meta.get("finalizers") or [])
            if meta.get("deletionTimestamp") or not logic.is_lb_service(service):
                if uid in records or ours:
                    if uid not in self._deleting:
                        self._deleting.add(uid)
                        self.event(service, "DeletingLoadBalancer", "Deleting load balancer")
                    try:
                        self.delete_lb(service, records.get(uid) or {})
                    except (os_exc.SDKException, TimeoutError) as exc:
                        self.error = f"Service {meta['namespace']}/{meta['name']}: {exc}"
                        log(self.name, self.error)
                        continue
                    records.pop(uid, None)
                    self.state.save()
                    if not meta.get("deletionTimestamp"):
                        # No longer type LoadBalancer: what the CCM published goes too.
                        self.kube.patch("Service", meta["namespace"], meta["name"],
                                        {"metadata": {"annotations": {logic.LB_ID_ANNOTATION: None}}})
                        self.kube.patch("Service", meta["namespace"], meta["name"], {"status": {"loadBalancer": None}},
                                        sub="status")
                    self._drop_finalizer(service)
                    self._deleting.discard(uid)
                    self.event(service, "DeletedLoadBalancer", "Deleted load balancer")
                continue
            retry_at, delay = self._backoff.get(uid, (0.0, 0.0))
            if time.monotonic() < retry_at:
                continue
            try:
                self.ensure_lb(service, backends, records)
                self._backoff.pop(uid, None)
            except (os_exc.SDKException, KubeError, TimeoutError) as exc:
                delay = min(300.0, max(5.0, delay * 2))
                self._backoff[uid] = (time.monotonic() + delay, delay)
                log(self.name, f"Service {meta['namespace']}/{meta['name']}: {exc}")
                self.error = f"Service {meta['namespace']}/{meta['name']}: {exc}"
                self.event(service, "SyncLoadBalancerFailed", f"Error syncing load balancer: {exc}", warning=True)
        # Services gone from the API without us (deleted while the stand-in was down, no finalizer seen).
        for uid in [u for u in records if u not in seen]:
            record = records[uid]
            gone = {"metadata": {"uid": uid, "namespace": record["namespace"], "name": record["name"],
                                 "annotations": {}}}
            self.delete_lb(gone, record)
            records.pop(uid, None)
            self.state.save()

    def _drop_finalizer(self, service: dict[str, Any]) -> None:
        """Remove our finalizer only (read afresh: the list is replaced as a whole, the resourceVersion guards it)."""
        current = self.kube.get("Service", service["metadata"]["namespace"], service["metadata"]["name"])
        if current is None:
            return
        meta = current["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != logic.LB_CLEANUP_FINALIZER]
        if finalizers != (meta.get("finalizers") or []):
            self.kube.patch("Service", meta["namespace"], meta["name"],
                            {"metadata": {"finalizers": finalizers or None,
                                          "resourceVersion": meta["resourceVersion"]}})

    def _wait_active(self, lb_id: str, timeout: float = 120) -> dict[str, Any]:
        assert self.conn is not None
        deadline = time.monotonic() + timeout
        while True:
            lb = self.conn.load_balancer.get_load_balancer(lb_id).to_dict()
            if lb["provisioning_status"] == "ACTIVE":
                return lb
            if lb["provisioning_status"] == "ERROR":
                raise TimeoutError(f"load balancer {lb_id} went into ERROR")
            if time.monotonic() > deadline:
                raise TimeoutError(f"load balancer {lb_id} not ACTIVE after {timeout:.0f}s "
                                   f"({lb['provisioning_status']})")
            time.sleep(0.25)

    def _actual_ports(self, lb_id: str) -> dict[tuple[str, int], logic.ActualPort]:
        assert self.conn is not None
        lbs = self.conn.load_balancer
        actual: dict[tuple[str, int], logic.ActualPort] = {}
        for listener in self._listeners(lb_id):
            port = logic.ActualPort(listener.id)
            pool = self._pool_of(lb_id, listener.id)
            if pool is not None:
                port.pool_id = pool.id
                port.monitor_id = str(pool.health_monitor_id or "")
                port.members = {(m.address, int(m.protocol_port)): m.id for m in lbs.members(pool.id)}
            actual[(str(listener.protocol), int(listener.protocol_port))] = port
        return actual

    def _listeners(self, lb_id: str) -> list[Any]:
        """The LB's listeners (checked here too: a server that ignored the filter must not hand us others')."""
        assert self.conn is not None
        return [x for x in self.conn.load_balancer.listeners(load_balancer_id=lb_id)
                if lb_id in {ref["id"] for ref in x.load_balancers or []}]

    def _pool_of(self, lb_id: str, listener_id: str) -> Any:
        """The listener's default pool (Octavia cannot filter pools by listener: match their listener ids)."""
        assert self.conn is not None
        return next((p for p in self.conn.load_balancer.pools(loadbalancer_id=lb_id)
                     if listener_id in {x["id"] for x in p.listeners or []}), None)

    def ensure_lb(self, service: dict[str, Any], backends: list[tuple[str, str]], records: dict[str, Any]) -> None:
        assert self.conn is not None and self.conf is not None
        meta = service["metadata"]
        ns, svc, uid = meta["namespace"], meta["name"], meta["uid"]
        name = logic.lb_name(self.cluster, ns, svc)
        desired = logic.desired_layout(service, backends, self.conf.create_monitor)
        record = records.get(uid) or {}
        fingerprint = repr((desired, self.conf.subnet_id, self.conf.floating_network_id))
        if record.get("fingerprint") == fingerprint and record.get("ingress") and \
                (service.get("status") or {}).get("loadBalancer", {}).get("ingress"):
            return  # nothing changed since the last ensure (the CCM resyncs on Service/Node changes)
        if logic.LB_CLEANUP_FINALIZER not in (meta.get("finalizers") or []):
            self.kube.patch("Service", ns, svc, {"metadata": {
                "finalizers": [*(meta.get("finalizers") or []), logic.LB_CLEANUP_FINALIZER],
                "resourceVersion": meta["resourceVersion"]}})
        started = time.monotonic()
        self.event(service, "EnsuringLoadBalancer", "Ensuring load balancer")
        lbs = self.conn.load_balancer
        lb = None
        if record.get("lb_id"):
            lb = lbs.find_load_balancer(record["lb_id"])
        if lb is None:
            lb = next((x for x in lbs.load_balancers(name=name) if x.name == name), None)
        if lb is None:
            attrs: dict[str, Any] = {"name": name, "description": logic.lb_description(self.cluster, ns, svc),
                                     "vip_subnet_id": self.conf.subnet_id, "tags": [name]}
            if self.conf.lb_provider:
                attrs["provider"] = self.conf.lb_provider
            attrs["listeners"] = logic.fully_populated_listeners(
                desired, name, self.conf.lb_method, self.conf.subnet_id,
                (self.conf.monitor_delay, self.conf.monitor_timeout, self.conf.monitor_max_retries,
                 self.conf.monitor_max_retries_down))
            lb = lbs.create_load_balancer(**attrs)
            log(self.name, f"creating load balancer {name} ({lb.id}) for Service {ns}/{svc}")
        record.update({"namespace": ns, "name": svc, "lb_id": lb.id, "lb_name": name})
        records[uid] = record
        self.state.save()
        current = self._wait_active(lb.id)
        by_port = {(p.protocol, p.port): p for p in desired}
        for step in logic.plan_lb(desired, self._actual_ports(lb.id)):
            self._apply_step(lb.id, name, step, by_port)
            current = self._wait_active(lb.id)
        address = self.ensure_fip(service, current, record)
        record["ingress"] = address
        record["fingerprint"] = fingerprint
        self.state.save()
        self.kube.patch("Service", ns, svc, {"metadata": {"annotations": {logic.LB_ID_ANNOTATION: lb.id}}})
        self.kube.patch("Service", ns, svc, {"status": logic.ingress_status(address)}, sub="status")
        self.event(service, "EnsuredLoadBalancer", "Ensured load balancer")
        log(self.name, f"ensured load balancer {name} for Service {ns}/{svc}: ingress {address} "
                       f"({time.monotonic() - started:.1f}s)")

    def _apply_step(self, lb_id: str, name: str, step: dict[str, Any],
                    by_port: dict[tuple[str, int], logic.PortLayout]) -> None:
        assert self.conn is not None and self.conf is not None
        lbs = self.conn.load_balancer
        op = step["op"]
        if op == "create_listener":
            lbs.create_listener(name=logic.listener_name(step["index"], name), protocol=step["protocol"],
                                protocol_port=step["port"], load_balancer_id=lb_id)
        elif op in ("create_pool", "create_member", "create_monitor"):
            listener = next(x for x in self._listeners(lb_id)
                            if (x.protocol, int(x.protocol_port)) == (step["protocol"], step["port"]))
            pool = self._pool_of(lb_id, listener.id)
            if op == "create_pool":
                lbs.create_pool(name=logic.pool_name(step["index"], name), protocol=step["protocol"],
                                lb_algorithm=self.conf.lb_method, listener_id=listener.id)
            elif op == "create_member":
                assert pool is not None
                lbs.create_member(pool, name=logic.cut(step["name"]), address=step["address"],
                                  protocol_port=step["member_port"], subnet_id=self.conf.subnet_id or None)
            else:
                assert pool is not None
                lbs.create_health_monitor(name=logic.monitor_name(step["index"], name), pool_id=pool.id,
                                          type=logic.monitor_type(step["protocol"]), delay=self.conf.monitor_delay,
                                          timeout=self.conf.monitor_timeout, max_retries=self.conf.monitor_max_retries,
                                          max_retries_down=self.conf.monitor_max_retries_down)
        elif op == "delete_member":
            lbs.delete_member(step["member_id"], step["pool_id"])
        elif op == "delete_monitor":
            lbs.delete_health_monitor(step["monitor_id"])
        elif op == "delete_listener":
            if step["pool_id"]:
                lbs.delete_pool(step["pool_id"])
                self._wait_active(lb_id)
            lbs.delete_listener(step["listener_id"])
        else:
            raise ValueError(f"unknown load balancer step {op}")

    def ensure_fip(self, service: dict[str, Any], lb: dict[str, Any], record: dict[str, Any]) -> str:
        """A floating IP on floating-network-id with the CCM's description, associated with the VIP port when
        Neutron has that port. (Octavia's noop network driver makes none: the lab allocates it unassociated.)"""
        assert self.conn is not None and self.conf is not None
        if not self.conf.floating_network_id:
            return str(lb.get("vip_address") or "")
        meta = service["metadata"]
        description = logic.fip_description(self.cluster, meta["namespace"], meta["name"])
        net = self.conn.network
        fip = net.find_ip(record["fip_id"]) if record.get("fip_id") else None
        if fip is None and lb.get("vip_port_id"):
            fip = next((f for f in net.ips(port_id=lb["vip_port_id"]) if f.port_id == lb["vip_port_id"]), None)
        if fip is None:
            fip = next((f for f in net.ips(floating_network_id=self.conf.floating_network_id)
                        if f.description == description), None)
        if fip is None:
            port = net.find_port(lb["vip_port_id"]) if lb.get("vip_port_id") else None
            fip = net.create_ip(floating_network_id=self.conf.floating_network_id, description=description,
                                port_id=port.id if port is not None else None)
            log(self.name, f"allocated floating IP {fip.floating_ip_address} ({fip.id})"
                           + ("" if port is not None else ": no VIP port in Neutron (Octavia noop driver), "
                              "left unassociated"))
        record["fip_id"], record["fip_address"] = fip.id, fip.floating_ip_address
        return str(fip.floating_ip_address)

    def delete_lb(self, service: dict[str, Any], record: dict[str, Any]) -> None:
        """EnsureLoadBalancerDeleted: the FIP (description match, no keep-floatingip), then the LB (cascade);
        the fault switches leave either behind."""
        assert self.conn is not None
        meta = service["metadata"]
        ns, svc = meta["namespace"], meta["name"]
        name = record.get("lb_name") or logic.lb_name(self.cluster, ns, svc)
        switches = faults(self.state_dir)
        lbs, net = self.conn.load_balancer, self.conn.network
        lb = lbs.find_load_balancer(record["lb_id"]) if record.get("lb_id") else None
        if lb is None:
            lb = next((x for x in lbs.load_balancers(name=name) if x.name == name), None)
        description = logic.fip_description(self.cluster, ns, svc)
        fips = []
        if record.get("fip_id"):
            found = net.find_ip(record["fip_id"])
            if found is not None:
                fips.append(found)
        if lb is not None and lb.vip_port_id:
            fips += [f for f in net.ips(port_id=lb.vip_port_id)
                     if f.port_id == lb.vip_port_id and f.id not in {x.id for x in fips}]
        for fip in fips:
            if switches.get("leak_floating_ips"):
                log(self.name, f"fault leak_floating_ips: floating IP {fip.floating_ip_address} left behind")
                continue
            if logic.fip_deletable(fip.to_dict(), description, logic.keeps_floating_ip(service)):
                net.delete_ip(fip)
                log(self.name, f"deleted floating IP {fip.floating_ip_address} of Service {ns}/{svc}")
        if lb is None:
            return
        if switches.get("leak_load_balancers"):
            log(self.name, f"fault leak_load_balancers: load balancer {lb.name} ({lb.id}) left behind")
            return
        ok, why = logic.lb_deletable(lb.to_dict(), name)
        if not ok:
            if lb.provisioning_status.startswith("PENDING_"):
                raise TimeoutError(why)
            log(self.name, f"not deleting: {why}")
            return
        lbs.delete_load_balancer(lb, cascade=True)
        log(self.name, f"deleted load balancer {lb.name} ({lb.id}) of Service {ns}/{svc} (cascade)")
