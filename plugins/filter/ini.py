# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from typing import Any, Callable

from ansible.errors import AnsibleFilterError

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils._ini import ini_set_options as _set


def ini_set_options(text: str | None, section: str, options: dict[str, Any]) -> str:
    try:
        return _set(text, section, options)
    except ValueError as exc:
        raise AnsibleFilterError(f"ini_set_options: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"ini_set_options": ini_set_options}
