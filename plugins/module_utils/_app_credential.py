# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure planning logic for Keystone application credentials (blue/green).

Plain data in, a plan out; no I/O. ``keystone_app_credential`` acts on the plan.

A credential *family* is a base name plus its successors, named
``<base>-<YYYYMMDDTHHMMSSZ>`` (with ``-<n>`` when two rotations share a second).
The base credential is the oldest generation; the newest name is the newest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

# Keystone's application_credential.name column is String(255).
NAME_MAX = 255
_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
# "-" + 16-char stamp + room for "-NN" when rotations collide within a second.
SUFFIX_MAX = 1 + 16 + 3
ROTATION_NAME_MAX = NAME_MAX - SUFFIX_MAX
# Fields Keystone cannot change after creation (there is no update API).
IMMUTABLE_FIELDS = ("roles", "description", "expires_at", "unrestricted", "access_rules")
ACCESS_RULE_KEYS = ("service", "path", "method")


# Keystone's default implied roles (keystone-manage bootstrap). Keystone stores an
# application credential with the closure of the roles asked for (member ->
# member, reader), so comparisons use the closure. The real rules are read from
# Keystone when the identity may list them; these are the fallback.
DEFAULT_ROLE_INFERENCES: dict[str, tuple[str, ...]] = {
    "admin": ("manager", "member"),
    "manager": ("member",),
    "member": ("reader",),
}


class InputError(ValueError):
    """Bad module input; the message says what to fix."""


@dataclass(frozen=True)
class Desired:
    """What the caller asked for. ``None`` means "not specified: do not compare"."""

    name: str
    roles: tuple[str, ...] | None = None
    description: str | None = None
    expires_at: datetime | None = None
    unrestricted: bool | None = None
    access_rules: tuple[tuple[str, str, str], ...] | None = None

    def create_attrs(self) -> dict[str, Any]:
        """Keyword arguments for Keystone's create call."""
        attrs: dict[str, Any] = {"unrestricted": bool(self.unrestricted)}
        if self.roles is not None:
            attrs["roles"] = [{"name": r} for r in self.roles]
        if self.description is not None:
            attrs["description"] = self.description
        if self.expires_at is not None:
            attrs["expires_at"] = self.expires_at.strftime("%Y-%m-%dT%H:%M:%S.000000")
        if self.access_rules is not None:
            attrs["access_rules"] = [dict(zip(ACCESS_RULE_KEYS, rule)) for rule in self.access_rules]
        return attrs


@dataclass(frozen=True)
class Plan:
    action: str  # none | create | recreate | delete | fail
    drift: dict[str, dict[str, Any]] = field(default_factory=dict)
    message: str = ""


# ------------------------------------------------------------------ input

def validate_name(name: str, rotating: bool) -> None:
    if not name or not name.strip():
        raise InputError("name must not be empty")
    limit = ROTATION_NAME_MAX if rotating else NAME_MAX
    if len(name) > limit:
        why = (f" (state=rotated appends a suffix of up to {SUFFIX_MAX} characters to it, and Keystone "
               f"allows {NAME_MAX})") if rotating else " (Keystone's limit)"
        raise InputError(f"name is {len(name)} characters long; use at most {limit}{why}")


def parse_expires_at(value: str | None, now: datetime) -> datetime | None:
    """Parse an ISO 8601 time (naive means UTC); it must lie in the future."""
    if value is None or value == "":
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"expires_at '{value}' is not an ISO 8601 time; use for example "
                         "'2027-01-31T00:00:00Z'") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    parsed = parsed.astimezone(timezone.utc).replace(microsecond=0)
    if parsed <= now:
        raise InputError(f"expires_at '{value}' is in the past (now is {now.strftime('%Y-%m-%dT%H:%M:%SZ')}); "
                         "give a future time or omit it")
    return parsed


def normalise_access_rules(rules: Sequence[Mapping[str, Any]] | None) -> tuple[tuple[str, str, str], ...] | None:
    if rules is None:
        return None
    out = []
    for index, rule in enumerate(rules):
        missing = [k for k in ACCESS_RULE_KEYS if not rule.get(k)]
        if missing:
            raise InputError(f"access_rules[{index}] lacks {', '.join(missing)}; each rule needs service, path "
                             "and method")
        out.append((str(rule["service"]), str(rule["path"]), str(rule["method"]).upper()))
    return tuple(sorted(out))


def unknown_roles(wanted: Iterable[str] | None, held: Iterable[str]) -> list[str]:
    """Roles asked for that the user does not hold on the project (Keystone would refuse them)."""
    if wanted is None:
        return []
    held_set = set(held)
    return sorted(r for r in wanted if r not in held_set)


def role_closure(roles: Iterable[str], inferences: Mapping[str, Iterable[str]]) -> list[str]:
    """The roles plus every role they imply, transitively, sorted."""
    seen: set[str] = set()
    todo = list(roles)
    while todo:
        role = todo.pop()
        if role not in seen:
            seen.add(role)
            todo.extend(inferences.get(role, ()))
    return sorted(seen)


def parse_role_inferences(body: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Keystone's ``GET /v3/role_inferences`` body as {prior role name: implied role names}."""
    rules: dict[str, tuple[str, ...]] = {}
    for rule in body.get("role_inferences") or []:
        prior = rule.get("prior_role", {}).get("name")
        if prior:
            rules[prior] = tuple(r.get("name") for r in rule.get("implies") or [] if r.get("name"))
    return rules


# ------------------------------------------------------------------ observed state

def _parse_keystone_time(value: Any) -> datetime | None:
    if not value:
        return None
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).replace(microsecond=0)


def public_view(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A credential as the module returns it: normalised, never with its secret."""
    expires = _parse_keystone_time(raw.get("expires_at"))
    return {
        "id": raw.get("id"),
        "name": raw.get("name"),
        "description": raw.get("description"),
        "project_id": raw.get("project_id"),
        "roles": sorted(r["name"] if isinstance(r, Mapping) else str(r) for r in (raw.get("roles") or [])),
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ") if expires else None,
        "unrestricted": bool(raw.get("unrestricted")),
        "access_rules": [dict(zip(ACCESS_RULE_KEYS, r))
                         for r in (normalise_access_rules(raw.get("access_rules") or []) or ())],
    }


def desired_view(desired: Desired, inferences: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
    """The caller's wish in the shape of ``public_view`` (for diffs); roles as Keystone will store them."""
    return {
        "name": desired.name,
        "description": desired.description,
        "roles": role_closure(desired.roles, inferences or DEFAULT_ROLE_INFERENCES)
        if desired.roles is not None else None,
        "expires_at": desired.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ") if desired.expires_at else None,
        "unrestricted": bool(desired.unrestricted),
        "access_rules": [dict(zip(ACCESS_RULE_KEYS, r)) for r in (desired.access_rules or ())],
    }


def drift(existing: Mapping[str, Any], desired: Desired,
          inferences: Mapping[str, Iterable[str]] | None = None) -> dict[str, dict[str, Any]]:
    """Immutable fields where the existing credential differs from what was asked."""
    have = public_view(existing)
    want = desired_view(desired, inferences)
    specified = {
        "roles": desired.roles is not None,
        "description": desired.description is not None,
        "expires_at": desired.expires_at is not None,
        "unrestricted": desired.unrestricted is not None,
        "access_rules": desired.access_rules is not None,
    }
    return {f: {"before": have[f], "after": want[f]}
            for f in IMMUTABLE_FIELDS if specified[f] and have[f] != want[f]}


# ------------------------------------------------------------------ plans

def plan_present(existing: Mapping[str, Any] | None, desired: Desired, recreate_on_drift: bool,
                 inferences: Mapping[str, Iterable[str]] | None = None) -> Plan:
    if existing is None:
        return Plan("create")
    changes = drift(existing, desired, inferences)
    if not changes:
        return Plan("none")
    if recreate_on_drift:
        return Plan("recreate", changes, "recreating: delete then create (consumers of the old secret break)")
    fields = ", ".join(f"{f} ({c['before']!r} -> {c['after']!r})" for f, c in changes.items())
    return Plan("fail", changes,
                f"application credential '{desired.name}' exists with different {fields}. Keystone cannot change "
                "these fields: use state=rotated to create a successor with the new values (blue/green), or "
                "set recreate_on_drift=true to delete and re-create it (its consumers lose access).")


_FAMILY_CACHE: dict[str, re.Pattern[str]] = {}


def _family_pattern(base: str) -> re.Pattern[str]:
    if base not in _FAMILY_CACHE:
        _FAMILY_CACHE[base] = re.compile(re.escape(base) + r"-(\d{8}T\d{6}Z)(?:-(\d+))?$")
    return _FAMILY_CACHE[base]


def generation(base: str, name: str) -> tuple[str, int] | None:
    """Sort key of a family member: base first, then by stamp and sequence; None if not a member."""
    if name == base:
        return ("", 0)
    match = _family_pattern(base).match(name)
    if not match:
        return None
    return (match.group(1), int(match.group(2) or 1))


def family(base: str, creds: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The base credential and its successors, oldest first."""
    members = [(generation(base, str(c.get("name"))), c) for c in creds]
    return [c for key, c in sorted((m for m in members if m[0] is not None), key=lambda m: m[0])]  # type: ignore[arg-type,return-value]


def successor_name(base: str, now: datetime, existing_names: Iterable[str]) -> str:
    taken = set(existing_names)
    stamp = now.astimezone(timezone.utc).strftime(_STAMP_FORMAT)
    candidate = f"{base}-{stamp}"
    sequence = 2
    while candidate in taken:
        candidate = f"{base}-{stamp}-{sequence}"
        sequence += 1
    return candidate


def plan_retirement(members_oldest_first: Sequence[Mapping[str, Any]], keep: int) -> list[Mapping[str, Any]]:
    """Members to delete so that the newest ``keep`` remain (the successor is the newest)."""
    if keep < 1:
        raise InputError("keep must be at least 1 (the successor itself)")
    if len(members_oldest_first) <= keep:
        return []
    return list(members_oldest_first[: len(members_oldest_first) - keep])


def token_problems(expected_project_id: str, expected_roles: Iterable[str] | None,
                   token_project_id: str | None, token_roles: Iterable[str]) -> list[str]:
    """Why a token issued to a new credential does not prove it works (empty: it does)."""
    problems = []
    if token_project_id != expected_project_id:
        problems.append(f"token is scoped to project {token_project_id!r}, expected {expected_project_id!r}")
    missing = sorted(set(expected_roles or ()) - set(token_roles))
    if missing:
        problems.append(f"token lacks role(s) {', '.join(missing)}")
    return problems
