# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure checks behind the host_prep role: host network declarations (with netaddr) and disk safety.

Every error names the host and the variable, so an operator with a hundred hosts knows what to fix.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

try:
    import netaddr
except ImportError:  # reported by require_netaddr() when a check runs
    HAS_NETADDR = False
else:
    HAS_NETADDR = True


def require_netaddr() -> None:
    if not HAS_NETADDR:
        raise ImportError("the host_prep checks need the Python library netaddr on the controller "
                          "(pip install netaddr; it is in the collection's requirements.txt)")


BOND_MODES = ("balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb")
IFNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$")  # Linux IFNAMSIZ - 1


def _cidr(value: Any) -> "netaddr.IPNetwork | None":
    """An address with its prefix (10.0.0.5/24), or None when it is not one."""
    if not isinstance(value, str) or "/" not in value:
        return None
    try:
        return netaddr.IPNetwork(value)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return None


def _ip(value: Any) -> "netaddr.IPAddress | None":
    if not isinstance(value, str):
        return None
    try:
        return netaddr.IPAddress(value)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return None


def _check_addressing(host: str, where: str, item: Mapping[str, Any], errors: list[str]) -> "list[netaddr.IPNetwork]":
    networks = []
    for index, address in enumerate(item.get("addresses") or []):
        net = _cidr(address)
        if net is None:
            errors.append(f"{host}: {where}.addresses[{index}] = {address!r} is not an address with a prefix "
                          "(for example 10.0.0.11/24)")
        elif net.ip == net.network and net.prefixlen < (32 if net.version == 4 else 128) - 1:
            errors.append(f"{host}: {where}.addresses[{index}] = {address!r} is the network address, not a host "
                          "address")
        else:
            networks.append(net)
    gateway = item.get("gateway")
    if gateway is not None:
        gw = _ip(gateway)
        if gw is None:
            errors.append(f"{host}: {where}.gateway = {gateway!r} is not an IP address")
        elif networks and not any(gw in net and gw.version == net.version for net in networks):
            errors.append(f"{host}: {where}.gateway = {gateway} is outside every subnet of {where}.addresses "
                          f"({', '.join(str(n.cidr) for n in networks)})")
    mtu = item.get("mtu")
    if mtu is not None and (not isinstance(mtu, int) or isinstance(mtu, bool) or not 68 <= mtu <= 9216):
        errors.append(f"{host}: {where}.mtu = {mtu!r} must be an integer from 68 to 9216")
    return networks


def network_errors(host: str, ethernets: Sequence[Mapping[str, Any]], bonds: Sequence[Mapping[str, Any]],
                   vlans: Sequence[Mapping[str, Any]]) -> list[str]:
    """Everything wrong with one host's NIC declarations (empty: fine)."""
    require_netaddr()
    errors: list[str] = []
    names: dict[str, str] = {}

    def claim(name: Any, where: str) -> None:
        if not isinstance(name, str) or not IFNAME.match(name):
            errors.append(f"{host}: {where}.name = {name!r} is not a valid interface name (1-15 characters)")
        elif name in names:
            errors.append(f"{host}: {where}.name = {name!r} is declared twice (also {names[name]})")
        else:
            names[name] = where

    for index, eth in enumerate(ethernets):
        where = f"host_prep_ethernets[{index}]"
        claim(eth.get("name"), where)
        _check_addressing(host, where, eth, errors)
    enslaved: dict[str, str] = {}
    for index, bond in enumerate(bonds):
        where = f"host_prep_bonds[{index}]"
        claim(bond.get("name"), where)
        if bond.get("mode", "802.3ad") not in BOND_MODES:
            errors.append(f"{host}: {where}.mode = {bond.get('mode')!r} is not one of {', '.join(BOND_MODES)}")
        members = bond.get("interfaces") or []
        if not members:
            errors.append(f"{host}: {where}.interfaces is empty: a bond needs at least one member")
        for member in members:
            if member in enslaved:
                errors.append(f"{host}: {where}.interfaces has {member!r}, already a member of {enslaved[member]}")
            enslaved[member] = where
        _check_addressing(host, where, bond, errors)
    for index, vlan in enumerate(vlans):
        where = f"host_prep_vlans[{index}]"
        claim(vlan.get("name"), where)
        vid = vlan.get("id")
        if not isinstance(vid, int) or isinstance(vid, bool) or not 1 <= vid <= 4094:
            errors.append(f"{host}: {where}.id = {vid!r} must be a VLAN id from 1 to 4094")
        link = vlan.get("link")
        if link not in names or names.get(link, "").startswith("host_prep_vlans"):
            errors.append(f"{host}: {where}.link = {link!r} is not a declared ethernet or bond of this host")
        _check_addressing(host, where, vlan, errors)
    return errors


def cluster_address_errors(addresses: Mapping[str, Any]) -> list[str]:
    """Cluster addresses (host -> address) must be IPs and unique across the inventory."""
    require_netaddr()
    errors = []
    seen: dict[str, str] = {}
    for host, value in sorted(addresses.items()):
        ip = _ip(value)
        if ip is None:
            errors.append(f"{host}: host_prep_cluster_address = {value!r} is not an IP address")
            continue
        if str(ip) in seen:
            errors.append(f"{host}: host_prep_cluster_address {ip} is also the address of {seen[str(ip)]}")
        seen[str(ip)] = host
    return errors


def disk_in_use_reasons(device: str, lsblk: Mapping[str, Any], swaps: Iterable[str] = ()) -> list[str]:
    """Why a disk must not be touched, from ``lsblk --json -o NAME,PATH,TYPE,FSTYPE,MOUNTPOINT`` output."""
    reasons = []
    swap_set = set(swaps)

    def walk(node: Mapping[str, Any]) -> None:
        path = node.get("path") or f"/dev/{node.get('name')}"
        if node.get("mountpoint"):
            reasons.append(f"{path} is mounted on {node['mountpoint']}")
        elif node.get("fstype"):
            reasons.append(f"{path} holds a {node['fstype']} signature")
        if path in swap_set:
            reasons.append(f"{path} is active swap")
        if node is not root and node.get("type") == "part":
            reasons.append(f"{path} is a partition of {device}")
        for child in node.get("children") or []:
            walk(child)

    devices = lsblk.get("blockdevices") or []
    if not devices:
        return [f"{device} does not exist"]
    root = devices[0]
    walk(root)
    return sorted(set(reasons))


# ------------------------------------------------------------------ renderers

def _addressing_lines(item: Mapping[str, Any]) -> list[str]:
    lines = [f"Address={a}" for a in item.get("addresses") or []]
    if item.get("gateway"):
        lines.append(f"Gateway={item['gateway']}")
    if item.get("dhcp"):
        lines.append("DHCP=yes")
    return lines


def _mtu_lines(item: Mapping[str, Any]) -> list[str]:
    return ["", "[Link]", f"MTUBytes={item['mtu']}"] if item.get("mtu") else []


def networkd_files(ethernets: Sequence[Mapping[str, Any]], bonds: Sequence[Mapping[str, Any]],
                   vlans: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """systemd-networkd .netdev/.network files, named ``NN-deployopen-<name>.<kind>``, sorted by name."""
    header = "# Managed by deployopen.k8s_openstack.host_prep\n"
    vlans_on: dict[str, list[str]] = {}
    for vlan in vlans:
        vlans_on.setdefault(str(vlan["link"]), []).append(str(vlan["name"]))
    files: list[dict[str, str]] = []

    def add(name: str, lines: list[str]) -> None:
        files.append({"file": name, "content": header + "\n".join(lines) + "\n"})

    def network(name: str, item: Mapping[str, Any], extra: list[str]) -> list[str]:
        return (["[Match]", f"Name={name}", "", "[Network]", *_addressing_lines(item), *extra,
                 *[f"VLAN={v}" for v in vlans_on.get(name, [])], "LinkLocalAddressing=no"
                 if not item.get("dhcp") else "LinkLocalAddressing=ipv6", *_mtu_lines(item)])

    for bond in bonds:
        name = str(bond["name"])
        mode = bond.get("mode", "802.3ad")
        params = [f"Mode={mode}", "MIIMonitorSec=100ms"]
        if mode == "802.3ad":
            params += ["LACPTransmitRate=fast", "TransmitHashPolicy=layer3+4"]
        add(f"10-deployopen-{name}.netdev", ["[NetDev]", f"Name={name}", "Kind=bond", *(
            [f"MTUBytes={bond['mtu']}"] if bond.get("mtu") else []), "", "[Bond]", *params])
        add(f"10-deployopen-{name}.network", network(name, bond, []))
        for member in bond.get("interfaces") or []:
            add(f"20-deployopen-{member}.network", ["[Match]", f"Name={member}", "", "[Network]", f"Bond={name}",
                                                    *_mtu_lines(bond)])
    for eth in ethernets:
        add(f"30-deployopen-{eth['name']}.network", network(str(eth["name"]), eth, []))
    for vlan in vlans:
        name = str(vlan["name"])
        add(f"40-deployopen-{name}.netdev", ["[NetDev]", f"Name={name}", "Kind=vlan", *(
            [f"MTUBytes={vlan['mtu']}"] if vlan.get("mtu") else []), "", "[VLAN]", f"Id={vlan['id']}"])
        add(f"40-deployopen-{name}.network", network(name, vlan, []))
    return sorted(files, key=lambda f: f["file"])


def _netplan_addressing(item: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if item.get("addresses"):
        out["addresses"] = list(item["addresses"])
    if item.get("gateway"):
        out["routes"] = [{"to": "default", "via": item["gateway"]}]
    if item.get("mtu"):
        out["mtu"] = item["mtu"]
    out["dhcp4"] = bool(item.get("dhcp"))
    return out


def netplan_config(ethernets: Sequence[Mapping[str, Any]], bonds: Sequence[Mapping[str, Any]],
                   vlans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A netplan v2 document for the same declarations."""
    eths: dict[str, Any] = {}
    for bond in bonds:
        for member in bond.get("interfaces") or []:
            eths[member] = {"dhcp4": False, **({"mtu": bond["mtu"]} if bond.get("mtu") else {})}
    for eth in ethernets:
        eths[str(eth["name"])] = _netplan_addressing(eth)
    network: dict[str, Any] = {"version": 2, "renderer": "networkd"}
    if eths:
        network["ethernets"] = eths
    if bonds:
        network["bonds"] = {}
        for bond in bonds:
            mode = bond.get("mode", "802.3ad")
            params: dict[str, Any] = {"mode": mode, "mii-monitor-interval": 100}
            if mode == "802.3ad":
                params.update({"lacp-rate": "fast", "transmit-hash-policy": "layer3+4"})
            network["bonds"][str(bond["name"])] = {"interfaces": list(bond["interfaces"]), "parameters": params,
                                                   **_netplan_addressing(bond)}
    if vlans:
        network["vlans"] = {str(v["name"]): {"id": v["id"], "link": v["link"], **_netplan_addressing(v)}
                            for v in vlans}
    return {"network": network}
