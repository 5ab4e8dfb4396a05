#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: barbican_kms_key
short_description: The Barbican key that encrypts a Kubernetes cluster's Secrets (barbican-kms-plugin)
version_added: 0.2.0
description:
  - With I(state=present), ensures the cluster's symmetric key exists in Barbican (an order of type C(key) with
    algorithm C(aes), bit length 256, mode C(cbc), named I(name) or C(<cluster_name>-kms)), and grants (or,
    with I(acl_state=absent), revokes) read access to the KMS plugin's identity through the key's ACL.
  - Finds an existing ACTIVE secret by name; two ACTIVE secrets with that name fail with their hrefs (the
    module never guesses which one encrypts the cluster). An existing secret that is not an AES-256 CBC key
    fails. A key order left PENDING by an interrupted run is waited for instead of ordering a second key.
  - Refuses a key-manager endpoint that belongs to the cluster the key protects. The endpoint from the
    service catalog is resolved, and its host must not be a name in the cluster's DNS (C(*.svc),
    C(*.<cluster_dns_domain>)) nor resolve into I(cluster_networks). A KMS that depends on the cluster
    deadlocks when the cluster restarts.
  - With I(state=absent), deletes the key, only with I(allow_key_deletion=true). Every Secret encrypted with
    it becomes unreadable. To make the key unreachable for the plugin (a drill), use I(acl_state=absent).
  - With I(state=checked), only reads, as the identity given (the plugin's own credential). It fetches the
    key's metadata and, with I(check_payload=true), proves the payload is retrievable, and reports
    C(reachable) with the reason. It does not fail when the key is unreachable unless
    I(fail_when_unreachable=true).
  - The key's payload is never returned or logged; I(state=checked) reads it, counts its bytes and drops it.
author:
  - DeployOpen Engineering (@deployopen)
extends_documentation_fragment:
  - deployopen.k8s_openstack.openstack
  - deployopen.k8s_openstack.attributes
attributes:
  check_mode:
    support: full
    details: Predicts the key order, the ACL change or the deletion and changes nothing; I(state=checked) only
      reads and runs the same in check mode.
  diff_mode:
    support: full
    details: Before and after of the key's metadata and its read ACL.
options:
  state:
    description:
      - C(present) ensures the key and the read ACL.
      - C(absent) deletes the key (needs I(allow_key_deletion=true)).
      - C(checked) only reports whether the authenticated identity can read the key.
    type: str
    choices: [present, absent, checked]
    default: present
  name:
    description:
      - Name of the key in Barbican. Defaults to C(<cluster_name>-kms).
    type: str
  cluster_name:
    description:
      - Name of the cluster the key protects; names the key when I(name) is not given.
    type: str
  key_id:
    description:
      - UUID or href of the key, for I(state=checked) (what the plugin's cloud.conf names in
        C([KeyManager] key-id)) and I(state=absent). When omitted, the key is looked up by name.
    type: str
  read_users:
    description:
      - Keystone user IDs to put on (or, with I(acl_state=absent), take off) the key's read ACL; the KMS
        plugin's identity.
      - Users already on the ACL and not listed stay.
    type: list
    elements: str
    default: []
  acl_state:
    description:
      - Whether I(read_users) are on the key's read ACL (C(present)) or not (C(absent)).
    type: str
    choices: [present, absent]
    default: present
  project_access:
    description:
      - Whether users with a role on the key's project may read it besides the ACL users. C(false) makes the
        key private to its creator and the ACL users. Left as it is when omitted.
    type: bool
  allow_key_deletion:
    description:
      - Must be true for I(state=absent) to delete the key. Deleting it makes every Secret it encrypted unreadable.
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds to wait for a key order to become ACTIVE.
    type: int
    default: 120
  check_endpoint:
    description:
      - With I(state=present), refuse a key-manager endpoint inside the cluster (see I(cluster_networks),
        I(cluster_dns_domain)).
    type: bool
    default: true
  cluster_networks:
    description:
      - The cluster's own networks and addresses, as CIDRs or addresses; the key-manager endpoint must not
        resolve into any of them. Give the node networks, the Service and Pod CIDRs, and the cluster's load
        balancer and ingress addresses.
    type: list
    elements: str
    default: []
  cluster_dns_domain:
    description:
      - The cluster's DNS domain; an endpoint host under C(svc), C(svc.<domain>) or C(<domain>) is refused.
    type: str
    default: cluster.local
  check_payload:
    description:
      - With I(state=checked), also fetch the payload (as C(application/octet-stream), like the plugin) and
        prove it has 32 bytes; the payload itself is dropped.
    type: bool
    default: true
  fail_when_unreachable:
    description:
      - With I(state=checked), fail the task when the key is not reachable (otherwise report it).
    type: bool
    default: false
notes:
  - Uses Barbican's REST API directly through the key-manager endpoint of the catalog (orders, secrets,
    C(/v1/secrets/{uuid}/acl)). Older openstacksdk releases have no proxy call for secret ACLs, and
    C(get_secret) of openstacksdk fetches the payload, which this module must not hold unless asked.
  - The identity that creates the key needs Barbican's C(creator) role (or C(admin)) on its project; setting
    an ACL needs the key's creator or a project admin.
seealso:
  - name: Barbican ACL API
    description: The secret ACL calls this module uses.
    link: https://docs.openstack.org/barbican/latest/api/reference/acls.html
  - name: barbican-kms-plugin
    description: The Kubernetes KMS plugin that reads this key.
    link: https://github.com/kubernetes/cloud-provider-openstack/blob/master/docs/barbican-kms-plugin/using-barbican-kms-plugin.md
"""

EXAMPLES = r"""
- name: Ensure the cluster's KMS key and let the plugin read it
  deployopen.k8s_openstack.barbican_kms_key:
    cloud: k8s-cluster
    cluster_name: prod-eu1
    read_users: ["{{ kms_plugin_user_id }}"]
    cluster_networks: [10.20.0.0/24, 10.96.0.0/12, 10.244.0.0/16, 203.0.113.10]
    cluster_dns_domain: cluster.local
  register: kms_key

- name: Prove the plugin's credential can read the key (for a drill, without failing)
  deployopen.k8s_openstack.barbican_kms_key:
    state: checked
    key_id: "{{ kms_key.key.id }}"
    auth_type: v3applicationcredential
    auth:
      auth_url: https://keystone.example.com:5000/v3
      application_credential_id: "{{ kms_plugin_credential_id }}"
      application_credential_secret: "{{ kms_plugin_credential_secret }}"
  register: kms_reachable

- name: Drill - take the plugin off the key's ACL (the key becomes unreachable for it)
  deployopen.k8s_openstack.barbican_kms_key:
    cloud: k8s-cluster
    cluster_name: prod-eu1
    read_users: ["{{ kms_plugin_user_id }}"]
    acl_state: absent
    project_access: false

- name: Delete a test cluster's key (its encrypted data becomes unreadable)
  deployopen.k8s_openstack.barbican_kms_key:
    cloud: k8s-cluster
    cluster_name: test-123
    state: absent
    allow_key_deletion: true
"""

RETURN = r"""
key:
  description:
    - The key's metadata, never its payload. In check mode before creation, the predicted key without C(id) and
      C(href).
  returned: state is present, or absent and the key existed, or checked and the metadata was readable
  type: dict
  contains:
    id:
      description: The secret's UUID (what cloud.conf C([KeyManager] key-id) takes).
      type: str
    href:
      description: The secret's href.
      type: str
    name:
      description: Name of the key.
      type: str
    algorithm:
      description: Algorithm (C(aes)).
      type: str
    bit_length:
      description: Bit length (256).
      type: int
    mode:
      description: Mode (C(cbc)).
      type: str
    secret_type:
      description: Barbican secret type (C(symmetric)).
      type: str
    status:
      description: Barbican status (C(ACTIVE)).
      type: str
    created:
      description: Creation time.
      type: str
    content_types:
      description: Content types of the payload.
      type: dict
acl:
  description: The key's read ACL after the run (predicted in check mode).
  returned: state is present
  type: dict
  contains:
    users:
      description: User IDs on the read ACL.
      type: list
      elements: str
    project_access:
      description: Whether users with a role on the project may read the key.
      type: bool
endpoint:
  description: The key-manager endpoint used.
  returned: when the endpoint was found
  type: str
endpoint_addresses:
  description: What the endpoint's host resolved to (with I(state=present) and I(check_endpoint=true)).
  returned: state is present and check_endpoint is true
  type: list
  elements: str
reachable:
  description: Whether the authenticated identity can read the key (and, with I(check_payload), its payload).
  returned: state is checked
  type: bool
reason:
  description: Why the key is or is not reachable, with the key's name and ID and the HTTP status.
  returned: state is checked
  type: str
http_status:
  description: HTTP status of the last Barbican call of the check (none if Barbican or Keystone was not reached).
  returned: state is checked
  type: int
user_id:
  description: The Keystone user ID of the authenticated identity (with I(state=checked), the plugin's).
  returned: when authentication succeeded
  type: str
payload_content_type:
  description: The payload's default content type from the key's metadata.
  returned: state is checked and the metadata was readable
  type: str
payload_retrievable:
  description: Whether the payload was fetched (its bytes are counted, never returned).
  returned: state is checked and check_payload is true
  type: bool
payload_bytes:
  description: Length of the payload in bytes (32 for AES-256).
  returned: state is checked and the payload was fetched
  type: int
"""

import socket  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from typing import Any, NoReturn  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._barbican import (  # noqa: E402
    PAYLOAD_CONTENT_TYPE,
    Acl,
    InputError,
    choose_key,
    endpoint_host,
    endpoint_inside_cluster,
    endpoint_refusal,
    key_name,
    key_problems,
    key_view,
    order_request,
    order_state,
    parse_acl,
    parse_networks,
    pending_order,
    plan_acl,
    predicted_key_view,
    reachability,
    secret_uuid,
)
from ansible_collections.deployopen.k8s_openstack.plugins.module_utils._openstack import (  # noqa: E402
    Cloud,
    auth_secrets,
    connection_kwargs,
    describe_error,
    describe_target,
    openstack_argument_spec,
    require_sdk,
    sdk_errors,
)

try:
    import openstack.config
    import openstack.connection
    from openstack import exceptions as sdk_exc
except ImportError:  # pragma: no cover - require_sdk() reports it
    pass

PAGE = 100
POLL_SECONDS = 1.0


def argument_spec() -> dict[str, Any]:
    return openstack_argument_spec(
        state={"type": "str", "default": "present", "choices": ["present", "absent", "checked"]},
        name={"type": "str"},
        cluster_name={"type": "str"},
        key_id={"type": "str", "no_log": False},
        read_users={"type": "list", "elements": "str", "default": []},
        acl_state={"type": "str", "default": "present", "choices": ["present", "absent"]},
        project_access={"type": "bool"},
        allow_key_deletion={"type": "bool", "default": False},
        wait_timeout={"type": "int", "default": 120},
        check_endpoint={"type": "bool", "default": True},
        cluster_networks={"type": "list", "elements": "str", "default": []},
        cluster_dns_domain={"type": "str", "default": "cluster.local"},
        check_payload={"type": "bool", "default": True},
        fail_when_unreachable={"type": "bool", "default": False},
    )


class BarbicanError(Exception):
    """A Barbican call failed; ``message`` says what to fix."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Barbican:
    """Raw REST calls on the connection's key-manager adapter (the catalog's endpoint)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.endpoint = "the key-manager endpoint"
        try:
            self.adapter = conn.key_manager
            self.endpoint = str(self.adapter.get_endpoint() or self.endpoint)
        except sdk_errors() as exc:
            raise BarbicanError(self._explain(exc, "finding the key-manager endpoint in the service catalog")) from exc
        if not self.endpoint.startswith("http"):
            raise BarbicanError("the service catalog has no key-manager endpoint: is Barbican deployed in this "
                                "cloud and region?")

    def _explain(self, exc: BaseException, action: str) -> str:
        return describe_error(exc, action, self.endpoint)

    def call(self, method: str, path: str, action: str, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        """One request; an unexpected status or an unreachable Barbican raises BarbicanError with the fix."""
        try:
            response = self.adapter.request(path, method, **kwargs)
        except sdk_errors() as exc:
            raise BarbicanError(self._explain(exc, action)) from exc
        if response.status_code not in ok:
            try:
                sdk_exc.raise_from_response(response)
                message = f"{action}: unexpected HTTP {response.status_code} from {self.endpoint}"
            except sdk_errors() as exc:
                message = self._explain(exc, action)
            raise BarbicanError(message, response.status_code)
        return response

    def json(self, method: str, path: str, action: str, ok: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        # Metadata, never a payload: Barbican answers GET /secrets/{uuid} with the payload for other Accept types.
        kwargs["headers"] = {"Accept": "application/json", **(kwargs.get("headers") or {})}
        response = self.call(method, path, action, ok, **kwargs)
        return response.json() if response.content else {}

    def _paged(self, path: str, key: str, action: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            body = self.json("GET", path, action, params={**(params or {}), "limit": PAGE, "offset": len(items)})
            page = body.get(key) or []
            items.extend(page)
            if not page or len(items) >= int(body.get("total") or 0) or "next" not in body:
                return items

    def secrets_named(self, name: str) -> list[dict[str, Any]]:
        return self._paged("/secrets", "secrets", f"listing the secrets named '{name}'", {"name": name})

    def orders(self) -> list[dict[str, Any]]:
        return self._paged("/orders", "orders", "listing the project's orders")

    def secret(self, uuid: str) -> dict[str, Any]:
        return dict(self.json("GET", f"/secrets/{uuid}", f"reading the metadata of secret {uuid}"))

    def acl(self, uuid: str) -> Acl:
        return parse_acl(self.json("GET", f"/secrets/{uuid}/acl", f"reading the ACL of secret {uuid}"))

    def set_acl(self, uuid: str, acl: Acl) -> None:
        self.call("PUT", f"/secrets/{uuid}/acl", f"setting the read ACL of secret {uuid}", ok=(200, 201),
                  json=acl.request_body())

    def order_key(self, name: str) -> str:
        body = self.json("POST", "/orders", f"ordering key '{name}'", ok=(200, 201, 202), json=order_request(name))
        return str(body["order_ref"])

    def wait_for_order(self, order_ref: str, name: str, timeout: int) -> str:
        deadline = time.monotonic() + timeout
        uuid = order_ref.rstrip("/").rsplit("/", 1)[-1]
        while True:
            order = self.json("GET", f"/orders/{uuid}", f"reading order {order_ref}")
            state, detail = order_state(order)
            if state == "active":
                return detail
            if state == "error":
                raise BarbicanError(f"key order {order_ref} for '{name}' failed: {detail}")
            if time.monotonic() >= deadline:
                raise BarbicanError(f"key order {order_ref} for '{name}' is still {order.get('status')} after "
                                    f"{timeout}s; rerun to wait for it (no second key is ordered), or raise "
                                    "wait_timeout")
            time.sleep(POLL_SECONDS)

    def delete(self, uuid: str) -> None:
        self.call("DELETE", f"/secrets/{uuid}", f"deleting secret {uuid}", ok=(204, 404))


def resolve(host: str) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})


def fail(module: AnsibleModule, msg: str, **extra: Any) -> NoReturn:
    module.fail_json(msg=msg, **extra)
    raise AssertionError("unreachable")  # fail_json exits


# ------------------------------------------------------------------ state=present / absent

def check_endpoint(module: AnsibleModule, barbican: Barbican) -> list[str]:
    params = module.params
    host = endpoint_host(barbican.endpoint)
    unresolved = None
    try:
        addresses = resolve(host)
    except OSError as exc:
        addresses, unresolved = [], exc
    # A name in the cluster's DNS is refused even when this host cannot resolve it.
    reasons = endpoint_inside_cluster(barbican.endpoint, addresses, parse_networks(params["cluster_networks"]),
                                      params["cluster_dns_domain"])
    if reasons:
        fail(module, endpoint_refusal(barbican.endpoint, reasons), endpoint=barbican.endpoint,
             endpoint_addresses=addresses)
    if unresolved is not None:
        fail(module, f"cannot resolve the host '{host}' of the key-manager endpoint {barbican.endpoint}: "
                     f"{unresolved}. Check the service catalog and this host's DNS.", endpoint=barbican.endpoint)
    return addresses


def find_key(barbican: Barbican, name: str) -> dict[str, Any] | None:
    found = choose_key(barbican.secrets_named(name), name)
    if found is None:
        return None
    problems = key_problems(found)
    if problems:
        raise InputError(f"secret '{name}' ({found.get('secret_ref')}) exists but cannot serve as the cluster's "
                         f"KMS key: {'; '.join(problems)}. barbican-kms-plugin needs an AES-256 CBC symmetric "
                         "key: rename or delete that secret, or choose another name.")
    return dict(found)


def run_present(module: AnsibleModule, barbican: Barbican, name: str) -> dict[str, Any]:
    params = module.params
    result: dict[str, Any] = {"changed": False, "endpoint": barbican.endpoint}
    if params["check_endpoint"]:
        result["endpoint_addresses"] = check_endpoint(module, barbican)
    existing = find_key(barbican, name)
    before_acl = barbican.acl(secret_uuid(existing["secret_ref"])) if existing else None
    before = {"key": key_view(existing), "acl": before_acl.as_dict()} if existing and before_acl else {}
    after_acl = plan_acl(before_acl or Acl(), params["read_users"], params["acl_state"], params["project_access"])
    if module.check_mode:
        changed = existing is None or after_acl != before_acl
        # A new key gets an ACL only when it differs from Barbican's default (project access, nobody listed).
        key = key_view(existing) if existing else predicted_key_view(name)
        result.update(changed=changed, key=key, acl=after_acl.as_dict(),
                      diff={"before": before, "after": {"key": key, "acl": after_acl.as_dict()}})
        return result
    if existing is None:
        pending = pending_order(barbican.orders(), name)
        order_ref = str(pending["order_ref"]) if pending else barbican.order_key(name)
        secret_ref = barbican.wait_for_order(order_ref, name, params["wait_timeout"])
        existing = barbican.secret(secret_uuid(secret_ref))
        before_acl = barbican.acl(secret_uuid(secret_ref))
        after_acl = plan_acl(before_acl, params["read_users"], params["acl_state"], params["project_access"])
        result["changed"] = True
        result["order"] = order_ref
    uuid = secret_uuid(existing["secret_ref"])
    if after_acl != before_acl:
        barbican.set_acl(uuid, after_acl)
        result["changed"] = True
    acl_now = barbican.acl(uuid)
    if acl_now != after_acl:
        fail(module, f"Barbican stored the read ACL of '{name}' as {acl_now.as_dict()}, not {after_acl.as_dict()}",
             key=key_view(existing))
    result.update(key=key_view(existing), acl=acl_now.as_dict(),
                  diff={"before": before, "after": {"key": key_view(existing), "acl": acl_now.as_dict()}})
    return result


def run_absent(module: AnsibleModule, barbican: Barbican, name: str | None) -> dict[str, Any]:
    params = module.params
    result: dict[str, Any] = {"changed": False, "endpoint": barbican.endpoint}
    if params["key_id"]:
        uuid = secret_uuid(params["key_id"])
        try:
            existing: dict[str, Any] | None = barbican.secret(uuid)
        except BarbicanError as exc:
            if exc.status != 404:
                raise
            existing = None
    else:
        existing = find_key(barbican, str(name))
    if existing is None:
        return result
    view = key_view(existing)
    if not params["allow_key_deletion"]:
        fail(module, f"refusing to delete key '{view['name']}' ({view['href']}): every Secret it encrypted becomes "
                     "unreadable. Set allow_key_deletion=true if that is intended; to make it unreachable for the "
                     "plugin only, use state=present with acl_state=absent.", key=view)
    if not module.check_mode:
        barbican.delete(str(view["id"]))
    result.update(changed=True, key=view, diff={"before": {"key": view}, "after": {}})
    return result


# ------------------------------------------------------------------ state=checked

def connect_quietly(module: AnsibleModule) -> tuple[Any, str | None]:
    """A connection as the given identity, or (None, why not): for a measurement a failed login is a result."""
    require_sdk(module)
    module.no_log_values.update(auth_secrets(module.params))
    target = describe_target(module.params)
    try:
        region = openstack.config.get_cloud_region(**connection_kwargs(module.params))
        target = str(region.get_auth_args().get("auth_url") or target)
        conn = openstack.connection.Connection(config=region)
        conn.authorize()
        return conn, None
    except sdk_errors() as exc:
        return None, describe_error(exc, "authenticating the identity that checks the key", target)


def run_checked(module: AnsibleModule, name: str | None) -> dict[str, Any]:
    params = module.params
    result: dict[str, Any] = {"changed": False, "reachable": False, "http_status": None}
    conn, why = connect_quietly(module)
    if conn is None:
        result["reason"] = str(why)
        return result
    result["user_id"] = conn.current_user_id
    identity = f"user {conn.current_user_id}"
    try:
        barbican = Barbican(conn)
        result["endpoint"] = barbican.endpoint
        if params["key_id"]:
            uuid = secret_uuid(params["key_id"])
        else:
            found = find_key(barbican, str(name))
            if found is None:
                result["reason"] = (f"no ACTIVE key named '{name}' is visible to {identity} (a key visible only "
                                    "through its ACL is not listed: give key_id)")
                return result
            uuid = secret_uuid(found["secret_ref"])
        meta_response = barbican.call("GET", f"/secrets/{uuid}", f"reading key {uuid}", ok=tuple(range(100, 600)),
                                      headers={"Accept": "application/json"})
        metadata = meta_response.json() if meta_response.status_code == 200 else None
        payload_status = payload_bytes = None
        if metadata is not None:
            result["key"] = key_view(metadata)
            result["payload_content_type"] = (metadata.get("content_types") or {}).get("default")
            if params["check_payload"] and str(metadata.get("status", "")).upper() == "ACTIVE":
                payload = barbican.call("GET", f"/secrets/{uuid}/payload", f"fetching the payload of key {uuid}",
                                        ok=tuple(range(100, 600)), headers={"Accept": PAYLOAD_CONTENT_TYPE})
                payload_status = payload.status_code
                payload_bytes = len(payload.content) if payload_status == 200 else None
                del payload  # the key never leaves this function
                result["payload_retrievable"] = payload_status == 200
                if payload_bytes is not None:
                    result["payload_bytes"] = payload_bytes
        verdict = reachability(uuid, meta_response.status_code, metadata, payload_status, payload_bytes, identity)
        result.update(verdict.as_dict())
    except BarbicanError as exc:
        result.update(reachable=False, reason=exc.message, http_status=exc.status)
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        required_if=[("state", "checked", ("key_id", "name", "cluster_name"), True),
                     ("state", "absent", ("key_id", "name", "cluster_name"), True)],
    )
    params = module.params
    name: str | None = None
    try:
        if params["state"] == "present" or not params["key_id"]:
            name = key_name(params["name"], params["cluster_name"])
        if params["key_id"]:
            secret_uuid(params["key_id"])
        parse_networks(params["cluster_networks"])
        if params["wait_timeout"] < 1:
            raise InputError("wait_timeout must be at least 1 second")
    except InputError as exc:
        fail(module, str(exc))

    try:
        if params["state"] == "checked":
            result = run_checked(module, name)
            if params["fail_when_unreachable"] and not result["reachable"]:
                fail(module, f"the key is not reachable: {result['reason']}", **result)
            module.exit_json(**result)
        cloud = Cloud(module)
        barbican = Barbican(cloud.conn)
        if params["state"] == "absent":
            result = run_absent(module, barbican, name)
        else:
            result = run_present(module, barbican, str(name))
    except InputError as exc:
        fail(module, str(exc))
    except BarbicanError as exc:
        fail(module, exc.message, exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
