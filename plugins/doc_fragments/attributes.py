# -*- coding: utf-8 -*-
# Copyright: DeployOpen
# Apache License 2.0 (see LICENSE)

from __future__ import annotations


class ModuleDocFragment:
    # Shared attribute descriptions; modules override the details.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""
