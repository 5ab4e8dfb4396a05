# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only callback: injects a fault at an exact point of a playbook run.

When a task whose name contains ``FAULT_AFTER_TASK`` finishes ok, the controller runs ``FAULT_COMMAND`` (a JSON
list: the argv) before the next task starts, once, and writes ``FAULT_MARKER`` (JSON: when, the command, its
exit code). Callbacks run in the controller between tasks, so the fault lands at the same point every run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: fault_injection
type: aggregate
short_description: Run a command after a named task (tests only)
description:
  - Runs C(FAULT_COMMAND) once after the first task whose name contains C(FAULT_AFTER_TASK) finishes ok.
requirements:
  - enabled in ANSIBLE_CALLBACKS_ENABLED
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "fault_injection"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.after = os.environ.get("FAULT_AFTER_TASK", "")
        self.command = json.loads(os.environ.get("FAULT_COMMAND", "[]"))
        self.marker = os.environ.get("FAULT_MARKER", "")
        self.fired = False

    def v2_runner_on_ok(self, result: Any) -> None:
        if self.fired or not self.after or self.after not in result._task.get_name():
            return
        self.fired = True
        proc = subprocess.run(self.command, capture_output=True, text=True, check=False, timeout=120)
        if self.marker:
            with open(self.marker, "w", encoding="utf-8") as handle:
                json.dump({"at": time.time(), "after_task": result._task.get_name(), "command": self.command,
                           "rc": proc.returncode, "stderr": proc.stderr[-2000:]}, handle)
