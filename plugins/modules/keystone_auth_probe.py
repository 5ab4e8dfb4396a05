#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: keystone_auth_probe
short_description: Measure whether a Keystone application credential authenticates
version_added: 0.1.0
description:
  - Asks Keystone for a token with an application credential and reports whether a token was
    issued, its project and roles, the HTTP status and the time it took.
  - A rejected credential is a measurement (C(authenticated=false)), not a failure, so drills can prove that
    a retired credential no longer works. An unreachable Keystone fails with its URL.
  - Never returns the token or the secret.
author:
  - DeployOpen Engineering (@deployopen)
extends_documentation_fragment:
  - deployopen.k8s_openstack.attributes
attributes:
  check_mode:
    support: full
    details: Only reads; runs the same in check mode.
  diff_mode:
    support: none
options:
  auth_url:
    description: Keystone v3 URL, for example C(https://keystone.example.com:5000/v3).
    type: str
    required: true
  application_credential_id:
    description: ID of the application credential.
    type: str
    required: true
  application_credential_secret:
    description: Its secret.
    type: str
    required: true
  expected_project_id:
    description: When given, C(matches_expectation) also requires the token to be scoped to this project.
    type: str
  expected_roles:
    description: When given, C(matches_expectation) also requires the token to carry these roles.
    type: list
    elements: str
  validate_certs:
    description: Whether to verify Keystone's TLS certificate.
    type: bool
    default: true
  ca_cert:
    description: CA bundle for Keystone's certificate.
    type: str
  api_timeout:
    description: Seconds to wait for Keystone.
    type: int
    default: 30
requirements:
  - openstacksdk >= 4.0.0 (for keystoneauth1)
"""

EXAMPLES = r"""
- name: Prove the retired credential no longer authenticates
  deployopen.k8s_openstack.keystone_auth_probe:
    auth_url: https://keystone.example.com:5000/v3
    application_credential_id: "{{ old.id }}"
    application_credential_secret: "{{ old.secret }}"
  register: old_probe

- name: Assert it was rejected
  ansible.builtin.assert:
    that: not old_probe.authenticated
"""

RETURN = r"""
authenticated:
  description: Whether Keystone issued a token.
  returned: always
  type: bool
http_status:
  description: HTTP status of the token request (201 when issued, 401 or 404 when refused).
  returned: always
  type: int
project_id:
  description: Project of the token.
  returned: always
  type: str
user_id:
  description: User behind the credential.
  returned: always
  type: str
roles:
  description: Roles in the token.
  returned: always
  type: list
  elements: str
expires_at:
  description: Token expiry.
  returned: always
  type: str
seconds:
  description: Time the request took.
  returned: always
  type: float
matches_expectation:
  description: Authenticated, and project and roles are as expected (when given).
  returned: always
  type: bool
problems:
  description: Why C(matches_expectation) is false.
  returned: always
  type: list
  elements: str
"""

import traceback  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._app_credential import (  # noqa: E402
    token_problems,
)
from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._keystone import (  # noqa: E402
    authenticate_application_credential,
)
from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._openstack import (  # noqa: E402
    describe_error,
    require_sdk,
    sdk_errors,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "auth_url": {"type": "str", "required": True},
            "application_credential_id": {"type": "str", "required": True},
            "application_credential_secret": {"type": "str", "required": True, "no_log": True},
            "expected_project_id": {"type": "str"},
            "expected_roles": {"type": "list", "elements": "str"},
            "validate_certs": {"type": "bool", "default": True},
            "ca_cert": {"type": "str"},
            "api_timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    require_sdk(module)
    params = module.params
    verify = params["ca_cert"] if params["validate_certs"] and params["ca_cert"] else params["validate_certs"]
    try:
        outcome = authenticate_application_credential(
            params["auth_url"], params["application_credential_id"], params["application_credential_secret"],
            verify=verify, timeout=params["api_timeout"])
    except sdk_errors() as exc:
        module.fail_json(msg=describe_error(exc, "probing an application credential", params["auth_url"]),
                         exception=traceback.format_exc())
    if not outcome.authenticated:
        problems = [f"Keystone refused a token (HTTP {outcome.http_status})"]
    elif params["expected_project_id"] or params["expected_roles"]:
        problems = token_problems(params["expected_project_id"] or str(outcome.project_id),
                                  params["expected_roles"], outcome.project_id, outcome.roles)
    else:
        problems = []
    module.exit_json(changed=False, matches_expectation=not problems, problems=problems, **outcome.as_dict())


if __name__ == "__main__":
    main()
