#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done by the action plugin of the same name on the controller; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: drill_evidence
short_description: Record a drill run and write its evidence bundle
version_added: 0.1.0
description:
  - The evidence framework shared by every drill of the collection. A run is a folder
    C(<evidence_root>/<drill id>/<run id>/) on the controller.
  - C(action=start) takes the drill's declaration (C(id), C(expected_result), C(owner), C(pass_rule)), made
    before anything runs, and records the context (collection and ansible-core versions, controller, sha256
    of the inventory sources and of ansible.cfg).
  - C(action=step) appends a step (what was called, its output, its status, the values it measured).
    Outputs are redacted (keys named like secrets, and every string in I(secrets)) before they are written.
  - C(action=finish) evaluates the pass rule on the measured values only, and writes C(record.json),
    C(report.md) (for a person), C(junit.xml) (for AWX and CI) and C(SHA256SUMS). It refuses to write a bundle
    that contains any of I(secrets).
author:
  - DeployOpen Engineering (@deployopen)
extends_documentation_fragment:
  - deployopen.k8s_openstack.attributes
attributes:
  check_mode:
    support: none
    details: Evidence is written in check mode too; a drill decides whether to run in check mode.
  diff_mode:
    support: none
options:
  action:
    description: What to do.
    type: str
    required: true
    choices: [start, step, finish]
  drill:
    description:
      - The drill's declaration, with C(start). C(pass_rule) is a dict with key C(all) holding a list of clauses.
      - A clause is a dict with C(measure) (a measured value's name) and one operator of C(equals),
        C(not_equals), C(min), C(max), C(in), C(not_in) with the expected value. A measure that was never
        recorded fails its clause.
    type: dict
  evidence_root:
    description: Folder that holds the bundles, with C(start).
    type: path
  run_id:
    description: Run identifier, with C(start). Defaults to a UTC timestamp and the controller's process id.
    type: str
  run_dir:
    description: The run's folder as returned by C(start), with C(step) and C(finish).
    type: path
  name:
    description: Step name, with C(step).
    type: str
  call:
    description: The command or API call the step made, with C(step).
    type: raw
  output:
    description: What the call returned, with C(step); redacted before it is written.
    type: raw
  measured:
    description: Values the step measured, with C(step); the pass rule reads these.
    type: dict
    default: {}
  status:
    description: Outcome of the step; a C(failed) step fails the run.
    type: str
    default: ok
    choices: [ok, failed, skipped]
  started_at:
    description: When the step started (UTC ISO 8601); defaults to now.
    type: str
  secrets:
    description: Secret values to cut out of everything written, and to check the finished bundle against.
    type: list
    elements: str
    default: []
  fail_on_verdict:
    description: With C(finish), fail the task when the verdict is C(fail) (after the bundle is written).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Declare the drill and start its record
  deployopen.k8s_openstack.drill_evidence:
    action: start
    evidence_root: /var/lib/deployopen/evidence
    drill:
      id: credential-rotation
      owner: platform-team
      expected_result: The new credential works, the old one is rejected.
      pass_rule:
        all:
          - {measure: new_credential_authenticates, equals: true}
          - {measure: old_credential_authenticates, equals: false}
  register: drill_run

- name: Record a step
  deployopen.k8s_openstack.drill_evidence:
    action: step
    run_dir: "{{ drill_run.run_dir }}"
    name: probe the new credential
    call: POST /v3/auth/tokens (application credential)
    output: "{{ probe }}"
    measured:
      new_credential_authenticates: "{{ probe.authenticated }}"

- name: Evaluate and write the bundle
  deployopen.k8s_openstack.drill_evidence:
    action: finish
    run_dir: "{{ drill_run.run_dir }}"
"""

RETURN = r"""
run_dir:
  description: The run's folder.
  returned: always
  type: str
run_id:
  description: The run identifier.
  returned: action is start
  type: str
verdict:
  description: C(pass) or C(fail).
  returned: action is finish
  type: str
passed:
  description: Whether the verdict is C(pass).
  returned: action is finish
  type: bool
clauses:
  description: Each pass-rule clause with the measured value and whether it held.
  returned: action is finish
  type: list
  elements: dict
measured:
  description: All values measured so far.
  returned: action is step or finish
  type: dict
report:
  description: Path of the Markdown report.
  returned: action is finish
  type: str
junit:
  description: Path of the JUnit XML file.
  returned: action is finish
  type: str
"""
