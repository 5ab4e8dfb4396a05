# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Authenticate with a Keystone application credential and report what the
token says. Used by ``keystone_app_credential`` (to verify a successor before
anything is retired) and ``keystone_auth_probe`` (drills' measurements)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

try:
    from keystoneauth1 import exceptions as ksa_exc
    from keystoneauth1 import session as ksa_session
    from keystoneauth1.identity import v3 as ksa_v3
except ImportError:  # pragma: no cover - the modules check for openstacksdk first
    ksa_exc = None  # type: ignore[assignment]


@dataclass
class AuthResult:
    authenticated: bool
    auth_url: str
    http_status: int | None = None
    project_id: str | None = None
    user_id: str | None = None
    roles: list[str] = field(default_factory=list)
    expires_at: str | None = None
    error: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def authenticate_application_credential(auth_url: str, credential_id: str, secret: str, *,
                                        verify: bool | str = True, timeout: float = 30.0) -> AuthResult:
    """Ask Keystone for a token with the credential.

    A rejection (401/404) is a measurement, not an error: ``authenticated`` is
    false. Keystone being unreachable raises (the caller reports the URL).
    """
    plugin = ksa_v3.ApplicationCredential(auth_url=auth_url, application_credential_id=credential_id,
                                          application_credential_secret=secret)
    sess = ksa_session.Session(auth=plugin, verify=verify, timeout=timeout)
    started = time.monotonic()
    try:
        access = plugin.get_access(sess)
    except (ksa_exc.Unauthorized, ksa_exc.NotFound) as exc:
        return AuthResult(False, auth_url, http_status=getattr(exc, "http_status", 401),
                          error=type(exc).__name__, seconds=round(time.monotonic() - started, 3))
    return AuthResult(True, auth_url, http_status=201, project_id=access.project_id, user_id=access.user_id,
                      roles=sorted(access.role_names or []),
                      expires_at=access.expires.strftime("%Y-%m-%dT%H:%M:%SZ") if access.expires else None,
                      seconds=round(time.monotonic() - started, 3))
