"""A lab process that plays the Open vSwitch agent of one compute host.

Neutron's ML2 ``openvswitch`` mechanism driver binds a port only to a host
with a live OVS agent. No Open vSwitch runs in the lab, so this process, run
with Neutron's own config files, speaks Neutron's agent RPC the way the real
agent does: it reports its state (heartbeats) every ``[agent] report_interval``, marks
the ports bound to its host ACTIVE (``update_device_up``), and reports floating
IP status as the L3 agent would (ACTIVE when associated, DOWN otherwise).
It plugs nothing: no bridge, no flow, no packet.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from neutron.agent import rpc as agent_rpc
from neutron.agent.l3.agent import L3PluginApi
from neutron.common import config as common_config
from neutron.conf.agent import common as agent_config
from neutron_lib import context as n_context
from neutron_lib.agent import topics
from oslo_config import cfg

import openstack

HOST = os.environ.get("LAB_COMPUTE_HOST", "lab-compute-1")
AGENT_ID = f"lab-ovs-agent-{HOST}"
POLL_SECONDS = 1.0

LOG = logging.getLogger("lab-ovs-agent")


def agent_state(start: bool) -> dict[str, object]:
    return {
        "binary": "neutron-openvswitch-agent",
        "host": HOST,
        "topic": topics.AGENT,
        "agent_type": "Open vSwitch agent",
        "start_flag": start,
        "configurations": {
            "bridge_mappings": {"public": "br-ex"},
            "tunnel_types": ["vxlan"],
            "tunneling_ip": "127.0.0.1",
            "integration_bridge": "br-int",
            "datapath_type": "system",
            "ovs_hybrid_plug": False,
            "enable_distributed_routing": False,
            "l2_population": False,
            "arp_responder_enabled": False,
            "ovs_capabilities": {"datapath_types": ["system"], "iface_types": ["internal", "vxlan"]},
            "devices": 0,
        },
    }


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    common_config.register_common_config_options()
    agent_config.register_agent_state_opts_helper(cfg.CONF)
    common_config.init(sys.argv[1:])
    ctx = n_context.get_admin_context_without_session()
    state_rpc = agent_rpc.PluginReportStateAPI(topics.REPORTS)
    plugin_rpc = agent_rpc.PluginApi(topics.PLUGIN)
    l3_rpc = L3PluginApi(topics.L3PLUGIN, HOST)
    heartbeat = Path(os.environ["LAB_HOME"]) / "run" / "lab-ovs-agent.heartbeat"
    conn = openstack.connect(cloud="lab-admin")  # OS_CLIENT_CONFIG_FILE names the lab's clouds.yaml
    interval = int(cfg.CONF.AGENT.report_interval)
    last_report = 0.0
    start = True
    LOG.info("playing the OVS agent of host %s", HOST)
    while True:
        now = time.monotonic()
        try:
            if now - last_report >= interval:
                state_rpc.report_state(ctx, agent_state(start), use_call=start)
                start = False
                last_report = now
                heartbeat.write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z\n"))
            for port in conn.network.ports(binding_host_id=HOST, status="DOWN"):
                LOG.info("port %s up on %s", port.id, HOST)
                plugin_rpc.update_device_up(ctx, port.id, AGENT_ID, HOST)
            statuses: dict[str, dict[str, str]] = {}
            stale = False
            for fip in conn.network.ips():
                if fip.port_id and fip.router_id and fip.status != "ACTIVE":
                    statuses.setdefault(fip.router_id, {})[fip.id] = "ACTIVE"
                elif not fip.port_id and fip.status == "ACTIVE":
                    stale = True
            if stale:
                # A disassociated FIP has no router any more: Neutron sets DOWN the FIPs whose last known
                # router reports without them, so report (nothing) for every router.
                for router in conn.network.routers():
                    statuses.setdefault(router.id, {})
            for router_id, fip_statuses in statuses.items():
                LOG.info("floating IPs of router %s: %s", router_id, fip_statuses)
                l3_rpc.update_floatingip_statuses(ctx, router_id, fip_statuses)
        except Exception:  # noqa: BLE001 - an agent keeps running through server restarts
            LOG.exception("cycle failed; retrying")
            time.sleep(2)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main()
