# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One place that builds an openstacksdk connection from the usual module
options, and one place that turns SDK/HTTP errors into a message that says what
to fix.

Why not openstack.cloud's ``OpenStackModule``: it is a base class whose
``run()`` owns the whole module lifecycle and reports SDK exceptions verbatim;
this collection needs the connection outside a module too (action plugins, the
lab, tests) and an error text that names the URL and the fix. The options are
the same, so ``clouds.yaml`` entries and ``module_defaults`` carry over.
"""

from __future__ import annotations

import traceback
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

SDK_IMPORT_ERROR: str | None
try:
    import openstack
    import openstack.config
    import openstack.connection
    from keystoneauth1 import exceptions as ksa_exc
    from openstack import exceptions as sdk_exc
    from openstack.config import exceptions as config_exc
except ImportError:  # pragma: no cover - reported by require_sdk()
    SDK_IMPORT_ERROR = traceback.format_exc()
else:
    SDK_IMPORT_ERROR = None

APP_NAME = "deployopen.k8s_openstack"


def openstack_argument_spec(**extra: dict[str, Any]) -> dict[str, Any]:
    """The connection options (documented by the ``openstack`` doc fragment) plus ``extra``."""
    spec: dict[str, Any] = {
        "cloud": {"type": "raw"},
        # Not no_log as a whole: its auth_url must stay readable in error messages. Its secret values
        # are added to no_log_values by protect_auth_secrets().
        "auth": {"type": "dict", "no_log": False},
        "auth_type": {"type": "str"},
        "region_name": {"type": "str"},
        "interface": {"type": "str", "default": "public", "choices": ["admin", "internal", "public"],
                      "aliases": ["endpoint_type"]},
        "validate_certs": {"type": "bool", "aliases": ["verify"]},
        "ca_cert": {"type": "str", "aliases": ["cacert"]},
        "client_cert": {"type": "str", "aliases": ["cert"]},
        "client_key": {"type": "str", "no_log": False, "aliases": ["key"]},
        "api_timeout": {"type": "int"},
    }
    spec.update(extra)
    return spec


SECRET_AUTH_KEYS = ("password", "application_credential_secret", "token", "passcode", "client_secret", "secret")


def auth_secrets(params: dict[str, Any]) -> list[str]:
    """Secret values inside the auth dict (and a cloud dict's auth), to mask in every output (pure)."""
    found = []
    cloud = params.get("cloud")
    for auth in ((params.get("auth") or {}), (cloud.get("auth") or {}) if isinstance(cloud, dict) else {}):
        found += [str(v) for k, v in auth.items() if k in SECRET_AUTH_KEYS and v]
    return found


def require_sdk(module: AnsibleModule) -> None:
    if SDK_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("openstacksdk"), exception=SDK_IMPORT_ERROR)


def connection_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    """Map module options to ``openstack.connect`` keyword arguments (pure)."""
    kwargs: dict[str, Any] = {"app_name": APP_NAME}
    cloud = params.get("cloud")
    if isinstance(cloud, dict):
        kwargs.update(cloud)
    elif cloud:
        kwargs["cloud"] = cloud
    mapping = {"auth_type": "auth_type", "region_name": "region_name", "interface": "interface",
               "validate_certs": "verify", "ca_cert": "cacert", "client_cert": "cert", "client_key": "key",
               "api_timeout": "api_timeout"}
    for option, sdk_name in mapping.items():
        if params.get(option) is not None:
            kwargs[sdk_name] = params[option]
    if params.get("auth"):
        # Explicit auth values win over the ones a named cloud carries.
        kwargs["auth"] = {**kwargs.get("auth", {}), **params["auth"]}
    return kwargs


def describe_target(params: dict[str, Any]) -> str:
    """Name what we tried to reach, for error messages: the auth URL or the cloud name."""
    auth = params.get("auth") or {}
    cloud = params.get("cloud")
    if isinstance(cloud, dict):
        auth = {**(cloud.get("auth") or {}), **auth}
    if auth.get("auth_url"):
        return str(auth["auth_url"])
    if isinstance(cloud, str):
        return f"cloud '{cloud}'"
    return "the cloud from the environment (OS_CLOUD / OS_* variables)"


def root_cause(exc: BaseException) -> BaseException:
    """openstacksdk wraps keystoneauth errors in SDKException: find the most specific one in the chain."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    if SDK_IMPORT_ERROR is None:
        for candidate in seen:
            if isinstance(candidate, ksa_exc.ClientException):
                return candidate
    return exc


def describe_error(exc: BaseException, action: str, target: str) -> str:
    """Turn an SDK/keystoneauth/HTTP error into a message that says what to fix (pure)."""
    exc = root_cause(exc)
    if SDK_IMPORT_ERROR is None:
        if isinstance(exc, config_exc.OpenStackConfigException):
            return (f"{action}: the cloud configuration is not usable: {exc}. Check the cloud name against "
                    "clouds.yaml (OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack/) or pass 'auth'.")
        if isinstance(exc, (ksa_exc.ConnectFailure, ksa_exc.ConnectTimeout, ksa_exc.DiscoveryFailure)):
            return (f"{action}: cannot reach {target}: {exc}. Check the auth_url and that the service "
                    "is running and reachable from this host.")
        if isinstance(exc, ksa_exc.Unauthorized) or _status(exc) == 401:
            return (f"{action}: {target} rejected the credentials (HTTP 401). Check the user name, password or "
                    "application credential id/secret, and the project and domain names.")
        if isinstance(exc, ksa_exc.MissingRequiredOptions) or isinstance(exc, ksa_exc.AuthPluginException):
            return f"{action}: incomplete authentication options for {target}: {exc}."
        if _status(exc) == 403:
            return (f"{action}: forbidden (HTTP 403) at {target}: {_details(exc)}. The identity lacks a role "
                    "or policy permission for this call.")
        if _status(exc) is not None:
            return f"{action}: HTTP {_status(exc)} from {target}: {_details(exc)}"
    return f"{action}: {type(exc).__name__}: {exc}"


def _status(exc: BaseException) -> int | None:
    for attr in ("status_code", "http_status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    return None


def is_not_found(exc: BaseException) -> bool:
    """The API said 404 (pure)."""
    return _status(root_cause(exc)) == 404 or _status(exc) == 404


def _details(exc: BaseException) -> str:
    details = getattr(exc, "details", None)
    return str(details) if details else str(exc)


def sdk_errors() -> tuple[type[BaseException], ...]:
    """The exception types ``describe_error`` knows how to explain."""
    if SDK_IMPORT_ERROR is not None:
        return ()
    return (sdk_exc.SDKException, ksa_exc.ClientException, config_exc.OpenStackConfigException)


class Cloud:
    """An authenticated connection plus what to call it in error messages."""

    def __init__(self, module: AnsibleModule, params: dict[str, Any] | None = None) -> None:
        """``params``: connection options other than the module's own (a module whose options already use
        the names of the ``openstack`` fragment for something else passes them from an option of its own)."""
        require_sdk(module)
        params = module.params if params is None else params
        module.no_log_values.update(auth_secrets(params))
        self.module = module
        self.target = describe_target(params)
        kwargs = connection_kwargs(params)
        try:
            region = openstack.config.get_cloud_region(**kwargs)
            self.target = str(region.get_auth_args().get("auth_url") or self.target)
            self.conn = openstack.connection.Connection(config=region)
            # Authenticate now, so bad credentials or an unreachable Keystone fail here, clearly.
            self.conn.authorize()
        except sdk_errors() as exc:
            self.fail(exc, "connecting to OpenStack")

    @property
    def auth_url(self) -> str:
        return self.target

    def fail(self, exc: BaseException, action: str) -> NoReturn:
        self.module.fail_json(msg=describe_error(exc, action, self.target), exception=traceback.format_exc())
        raise AssertionError("unreachable")  # fail_json exits; this keeps type checkers honest
