from __future__ import annotations

import configparser
from typing import Any

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils import _hostprep as hp

BOND = {"name": "bond0", "interfaces": ["eno1", "eno2"], "mode": "802.3ad", "mtu": 9000}
VLAN = {"name": "bond0.100", "id": 100, "link": "bond0", "addresses": ["10.10.0.11/24"], "gateway": "10.10.0.1"}


@pytest.mark.parametrize("ethernets,bonds,vlans,fragments", [
    ([], [BOND], [VLAN], []),
    ([{"name": "eno3", "addresses": ["192.0.2.10/24", "2001:db8::10/64"], "gateway": "2001:db8::1"}], [], [], []),
    ([], [BOND], [{**VLAN, "id": 0}], ["host_prep_vlans[0].id = 0 must be a VLAN id from 1 to 4094"]),
    ([], [BOND], [{**VLAN, "id": 4095}], ["host_prep_vlans[0].id = 4095"]),
    ([], [BOND], [{**VLAN, "id": "100"}], ["host_prep_vlans[0].id = '100'"]),
    ([], [BOND], [{**VLAN, "link": "bond9"}], ["host_prep_vlans[0].link = 'bond9' is not a declared"]),
    ([], [BOND], [{**VLAN, "addresses": ["10.10.0.11"]}], ["is not an address with a prefix"]),
    ([], [BOND], [{**VLAN, "addresses": ["10.10.0.300/24"]}], ["is not an address with a prefix"]),
    ([], [BOND], [{**VLAN, "addresses": ["10.10.0.0/24"]}], ["is the network address"]),
    ([], [BOND], [{**VLAN, "gateway": "10.99.0.1"}], ["gateway = 10.99.0.1 is outside every subnet"]),
    ([], [BOND], [{**VLAN, "gateway": "not-an-ip"}], ["gateway = 'not-an-ip' is not an IP address"]),
    ([], [{**BOND, "mode": "lacp"}], [], ["host_prep_bonds[0].mode = 'lacp'"]),
    ([], [{**BOND, "interfaces": []}], [], ["needs at least one member"]),
    ([], [{**BOND, "mtu": 100000}], [], ["mtu = 100000 must be an integer from 68 to 9216"]),
    ([], [BOND, {**BOND, "name": "bond1"}], [], ["'eno1', already a member of host_prep_bonds[0]",
                                                 "'eno2', already a member of host_prep_bonds[0]"]),
    ([{"name": "bond0"}], [BOND], [], ["'bond0' is declared twice"]),
    ([{"name": "a-very-long-interface-name"}], [], [], ["is not a valid interface name"]),
])
def test_network_errors(ethernets: list[Any], bonds: list[Any], vlans: list[Any], fragments: list[str]) -> None:
    errors = hp.network_errors("node-1", ethernets, bonds, vlans)
    assert len(errors) == len(fragments), errors
    for fragment, error in zip(fragments, errors):
        assert error.startswith("node-1: ") and fragment in error


@pytest.mark.parametrize("addresses,count", [
    ({"a": "10.0.0.1", "b": "10.0.0.2"}, 0),
    ({"a": "10.0.0.1", "b": "10.0.0.1"}, 1),
    ({"a": "10.0.0.1", "b": "node-b"}, 1),
    ({"a": "fd00::1", "b": "fd00::2"}, 0),
])
def test_cluster_address_errors(addresses: dict[str, str], count: int) -> None:
    assert len(hp.cluster_address_errors(addresses)) == count


def disk(children: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"blockdevices": [{"name": "sdb", "path": "/dev/sdb", "type": "disk", "fstype": None,
                              "mountpoint": None, **extra, **({"children": children} if children else {})}]}


@pytest.mark.parametrize("lsblk,swaps,fragments", [
    (disk(), [], []),
    ({"blockdevices": []}, [], ["/dev/sdb does not exist"]),
    (disk(fstype="ext4"), [], ["/dev/sdb holds a ext4 signature"]),
    (disk(fstype="LVM2_member"), [], ["/dev/sdb holds a LVM2_member signature"]),
    (disk(mountpoint="/data", fstype="xfs"), [], ["/dev/sdb is mounted on /data"]),
    (disk(), ["/dev/sdb"], ["/dev/sdb is active swap"]),
    (disk([{"name": "sdb1", "path": "/dev/sdb1", "type": "part", "fstype": None, "mountpoint": None}]), [],
     ["/dev/sdb1 is a partition of /dev/sdb"]),
    (disk([{"name": "sdb1", "path": "/dev/sdb1", "type": "part", "fstype": "ext4", "mountpoint": "/srv"}]), [],
     ["/dev/sdb1 is a partition of /dev/sdb", "/dev/sdb1 is mounted on /srv"]),
])
def test_disk_in_use_reasons(lsblk: dict[str, Any], swaps: list[str], fragments: list[str]) -> None:
    assert hp.disk_in_use_reasons("/dev/sdb", lsblk, swaps) == sorted(fragments)


def parse(content: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(content)
    return parser


def test_networkd_files_for_bond_with_vlans() -> None:
    second_vlan = {**VLAN, "name": "bond0.200", "id": 200, "gateway": None}
    files = {f["file"]: f["content"] for f in hp.networkd_files([], [BOND], [VLAN, second_vlan])}
    assert sorted(files) == [
        "10-deployopen-bond0.netdev", "10-deployopen-bond0.network", "20-deployopen-eno1.network",
        "20-deployopen-eno2.network", "40-deployopen-bond0.100.netdev", "40-deployopen-bond0.100.network",
        "40-deployopen-bond0.200.netdev", "40-deployopen-bond0.200.network"]
    netdev = parse(files["10-deployopen-bond0.netdev"])
    assert netdev["NetDev"]["Kind"] == "bond" and netdev["Bond"]["Mode"] == "802.3ad"
    assert "VLAN=bond0.100\nVLAN=bond0.200" in files["10-deployopen-bond0.network"]
    assert parse(files["20-deployopen-eno1.network"])["Network"]["Bond"] == "bond0"
    assert parse(files["20-deployopen-eno1.network"])["Link"]["MTUBytes"] == "9000"
    vlan = parse(files["40-deployopen-bond0.100.network"])
    assert vlan["Network"]["Address"] == "10.10.0.11/24" and vlan["Network"]["Gateway"] == "10.10.0.1"
    assert parse(files["40-deployopen-bond0.100.netdev"])["VLAN"]["Id"] == "100"


def test_netplan_config_for_bond_with_vlan() -> None:
    doc = hp.netplan_config([], [BOND], [VLAN])["network"]
    assert doc["version"] == 2
    assert doc["ethernets"] == {"eno1": {"dhcp4": False, "mtu": 9000}, "eno2": {"dhcp4": False, "mtu": 9000}}
    assert doc["bonds"]["bond0"]["parameters"]["mode"] == "802.3ad"
    assert doc["vlans"]["bond0.100"] == {"id": 100, "link": "bond0", "addresses": ["10.10.0.11/24"],
                                         "routes": [{"to": "default", "via": "10.10.0.1"}], "dhcp4": False}
