from __future__ import annotations

import pytest
from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc
from openstack.config import exceptions as config_exc

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils import _openstack as os_utils


@pytest.mark.parametrize("params,expected", [
    ({"cloud": "prod"}, {"cloud": "prod"}),
    ({"cloud": {"auth": {"auth_url": "u"}, "region_name": "R"}}, {"auth": {"auth_url": "u"}, "region_name": "R"}),
    ({"cloud": "prod", "validate_certs": False, "ca_cert": "/ca.pem", "api_timeout": 7, "interface": "internal"},
     {"cloud": "prod", "verify": False, "cacert": "/ca.pem", "api_timeout": 7, "interface": "internal"}),
    ({"cloud": {"auth": {"auth_url": "u", "username": "a"}}, "auth": {"username": "b"}},
     {"auth": {"auth_url": "u", "username": "b"}}),
    ({"auth_type": "v3applicationcredential", "auth": {"auth_url": "u"}},
     {"auth_type": "v3applicationcredential", "auth": {"auth_url": "u"}}),
])
def test_connection_kwargs(params: dict, expected: dict) -> None:
    assert os_utils.connection_kwargs(params) == {"app_name": os_utils.APP_NAME, **expected}


@pytest.mark.parametrize("params,target", [
    ({"auth": {"auth_url": "https://k:5000/v3"}}, "https://k:5000/v3"),
    ({"cloud": {"auth": {"auth_url": "https://c/v3"}}}, "https://c/v3"),
    ({"cloud": "prod"}, "cloud 'prod'"),
    ({}, "the cloud from the environment (OS_CLOUD / OS_* variables)"),
])
def test_describe_target(params: dict, target: str) -> None:
    assert os_utils.describe_target(params) == target


@pytest.mark.parametrize("exc,fragments", [
    (ksa_exc.ConnectFailure("refused"), ["cannot reach http://k/v3", "Check the auth_url"]),
    (ksa_exc.Unauthorized("no"), ["rejected the credentials (HTTP 401)", "application credential"]),
    (sdk_exc.HttpException("nope", http_status=401), ["rejected the credentials"]),
    (sdk_exc.ForbiddenException("policy", http_status=403), ["forbidden (HTTP 403)", "lacks a role"]),
    (sdk_exc.HttpException("boom", http_status=500, details="db down"), ["HTTP 500", "db down"]),
    (config_exc.OpenStackConfigException("Cloud prod was not found."), ["not usable", "clouds.yaml"]),
    (ValueError("odd"), ["ValueError: odd"]),
])
def test_describe_error(exc: BaseException, fragments: list[str]) -> None:
    message = os_utils.describe_error(exc, "doing X", "http://k/v3")
    assert message.startswith("doing X:")
    for fragment in fragments:
        assert fragment in message


def test_wrapped_keystoneauth_errors_are_unwrapped() -> None:
    try:
        try:
            raise ksa_exc.ConnectFailure("refused")
        except ksa_exc.ConnectFailure as inner:
            raise sdk_exc.SDKException("Unable to establish connection") from inner
    except sdk_exc.SDKException as outer:
        assert "cannot reach http://k/v3" in os_utils.describe_error(outer, "x", "http://k/v3")


@pytest.mark.parametrize("params,secrets", [
    ({"auth": {"auth_url": "u", "username": "a", "password": "pw-1"}}, ["pw-1"]),
    ({"auth": {"application_credential_id": "i", "application_credential_secret": "s-1"}}, ["s-1"]),
    ({"cloud": {"auth": {"password": "pw-2"}}, "auth": {"token": "tok-1"}}, ["tok-1", "pw-2"]),
    ({"cloud": "named", "auth": None}, []),
])
def test_auth_secrets_found_for_masking(params: dict, secrets: list[str]) -> None:
    assert os_utils.auth_secrets(params) == secrets
