# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The same connection options as openstack.cloud's modules, so one
    # module_defaults group (deployopen.k8s_openstack.openstack) or one clouds.yaml
    # entry serves both collections.
    DOCUMENTATION = r"""
options:
  cloud:
    description:
      - Named cloud from C(clouds.yaml), or a dict with the same content as a C(clouds.yaml) entry.
      - C(clouds.yaml) is searched where openstacksdk searches it (C(OS_CLIENT_CONFIG_FILE), the current
        directory, C(~/.config/openstack), C(/etc/openstack)).
    type: raw
  auth:
    description:
      - Authentication values (C(auth_url), C(username), C(password), C(project_name), domains, or
        C(application_credential_id)/C(application_credential_secret)), used instead of or on top of I(cloud).
    type: dict
  auth_type:
    description:
      - keystoneauth plugin name, for example C(password) or C(v3applicationcredential).
    type: str
  region_name:
    description:
      - Region of the cloud.
    type: str
  interface:
    description:
      - Endpoint interface to use from the service catalog.
    type: str
    choices: [admin, internal, public]
    default: public
    aliases: [endpoint_type]
  validate_certs:
    description:
      - Whether to verify TLS certificates. Defaults to what the cloud configuration says (true).
    type: bool
    aliases: [verify]
  ca_cert:
    description:
      - Path to a CA bundle that signed the API endpoints' certificates.
    type: str
    aliases: [cacert]
  client_cert:
    description:
      - Path to a client certificate for mutual TLS.
    type: str
    aliases: [cert]
  client_key:
    description:
      - Path to the client certificate's key.
    type: str
    aliases: [key]
  api_timeout:
    description:
      - Seconds to wait for one API call.
    type: int
requirements:
  - python >= 3.11
  - openstacksdk >= 4.0.0
notes:
  - Connection errors (service unreachable, rejected credentials, unknown cloud name) fail with a
    message that names the URL or cloud and says what to check.
"""
