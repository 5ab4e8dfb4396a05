# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from typing import Any, Callable

from ansible.errors import AnsibleFilterError
from ansible.module_utils.basic import missing_required_lib

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils import _hostprep


def network_errors(host: str, ethernets: Any = None, bonds: Any = None, vlans: Any = None) -> list[str]:
    if not _hostprep.HAS_NETADDR:
        raise AnsibleFilterError(missing_required_lib("netaddr"))
    for name, value in (("host_prep_ethernets", ethernets), ("host_prep_bonds", bonds), ("host_prep_vlans", vlans)):
        if value is not None and not isinstance(value, list):
            raise AnsibleFilterError(f"{host}: {name} must be a list, got {type(value).__name__}")
    return _hostprep.network_errors(host, ethernets or [], bonds or [], vlans or [])


def cluster_address_errors(addresses: dict[str, Any]) -> list[str]:
    if not _hostprep.HAS_NETADDR:
        raise AnsibleFilterError(missing_required_lib("netaddr"))
    return _hostprep.cluster_address_errors(addresses)


def disk_in_use_reasons(lsblk: dict[str, Any], device: str, swaps: Any = None) -> list[str]:
    return _hostprep.disk_in_use_reasons(device, lsblk, swaps or [])


def networkd_files(host_prep: dict[str, Any]) -> list[dict[str, str]]:
    return _hostprep.networkd_files(host_prep.get("ethernets") or [], host_prep.get("bonds") or [],
                                    host_prep.get("vlans") or [])


def netplan_config(host_prep: dict[str, Any]) -> dict[str, Any]:
    return _hostprep.netplan_config(host_prep.get("ethernets") or [], host_prep.get("bonds") or [],
                                    host_prep.get("vlans") or [])


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "network_errors": network_errors,
            "cluster_address_errors": cluster_address_errors,
            "disk_in_use_reasons": disk_in_use_reasons,
            "networkd_files": networkd_files,
            "netplan_config": netplan_config,
        }
