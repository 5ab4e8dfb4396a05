# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the cloud_provider_openstack role; the logic is in module_utils/_cloud_provider.py."""

from __future__ import annotations

from typing import Any, Callable

from ansible.errors import AnsibleFilterError

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _cloud_provider as cp


def cloud_provider_input_errors(settings: dict[str, Any]) -> list[str]:
    if not isinstance(settings, dict):
        raise AnsibleFilterError(f"cloud_provider_input_errors: expected a dict, got {type(settings).__name__}")
    return cp.input_errors(settings)


def cloud_provider_storage_classes(classes: Any, volume_types: Any, retired: Any = None) -> dict[str, Any]:
    if not isinstance(volume_types, list):
        raise AnsibleFilterError("cloud_provider_storage_classes: volume_types must be a list of volume types")
    return cp.storage_class_plan(classes or [], volume_types, retired or [])


def cloud_provider_credential_action(configured: dict[str, Any], family: Any, rotate: Any = False) -> dict[str, Any]:
    if not isinstance(configured, dict) or not isinstance(family, list):
        raise AnsibleFilterError("cloud_provider_credential_action: expected {id, secret} and a list of credentials")
    return cp.credential_action(str(configured.get("id") or ""), str(configured.get("secret") or ""), family,
                                bool(rotate))


def cloud_provider_cloud_conf(global_options: dict[str, Any], load_balancer: Any = None, block_storage: Any = None,
                              metadata: Any = None, header: str = "") -> str:
    try:
        sections = cp.cloud_conf_sections(global_options, load_balancer or {}, block_storage or {}, metadata or {})
        return cp.render_ini(sections, header)
    except (ValueError, AttributeError) as exc:
        raise AnsibleFilterError(f"cloud_provider_cloud_conf: {exc}") from exc


def cloud_provider_checksum(text: str) -> str:
    return cp.config_checksum(str(text))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "cloud_provider_input_errors": cloud_provider_input_errors,
            "cloud_provider_storage_classes": cloud_provider_storage_classes,
            "cloud_provider_credential_action": cloud_provider_credential_action,
            "cloud_provider_cloud_conf": cloud_provider_cloud_conf,
            "cloud_provider_checksum": cloud_provider_checksum,
        }
