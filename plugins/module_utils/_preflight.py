# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of the preflight: the planned cluster -> what it will consume -> what is wrong.

Plain data in, plain data out; no I/O. ``cloud_capacity_info`` reads the cloud and calls ``evaluate``.

- ``validate_plan`` checks the plan's shape and says what to fix.
- ``demand`` turns the plan (nodes and their flavors, boot-from-volume, the rolling-upgrade surge,
  LoadBalancer Services, PVCs) into the quota each service must have free. What already exists is not
  demanded again: a planned node whose server exists, a Service whose load balancer exists.
- ``quota_rows`` sets the demand against the headroom (quota - in use; -1 is unlimited).
- ``evaluate`` adds the other checks (flavors, volume types behind StorageClasses, Octavia provider and
  flavor, etcd member count) and renders the tables.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

ERROR = "error"
WARNING = "warning"
UNLIMITED = -1
# Cinder marks nothing as retired; the cloud's operators do it by starting the description with this
# (a tenant cannot read extra specs, so the description is the marker every identity can see).
RETIRED_PREFIX = "RETIRED:"
# Services the preflight reads, by catalog service type.
SERVICES = ("compute", "block_storage", "network", "load_balancer")
# The quotas the preflight checks, in table order: (service, resource, unit).
QUOTAS: tuple[tuple[str, str, str], ...] = (
    ("compute", "instances", ""),
    ("compute", "cores", ""),
    ("compute", "ram", "MiB"),
    ("block_storage", "volumes", ""),
    ("block_storage", "gigabytes", "GiB"),
    ("network", "networks", ""),
    ("network", "ports", ""),
    ("network", "security_groups", ""),
    ("network", "floating_ips", ""),
    ("load_balancer", "load_balancers", ""),
    ("load_balancer", "listeners", ""),
    ("load_balancer", "pools", ""),
)
# Kubernetes documentation recommends five etcd members in production.
ETCD_PRODUCTION_MEMBERS = 5
PRODUCTION = "production"
# Findings are wrapped to this width, so the table stays readable in a terminal and a failure message.
MESSAGE_WIDTH = 88


class PlanError(ValueError):
    """The plan is malformed; the message says what to fix."""


@dataclass(frozen=True)
class Finding:
    severity: str
    check: str
    subject: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "check": self.check, "subject": self.subject, "message": self.message}


# ------------------------------------------------------------------ the plan

def _int(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool):
        raise PlanError(f"{where} must be a whole number, not {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise PlanError(f"{where} must be a whole number, not {value!r}") from None
    if number != float(value) or number < minimum:
        raise PlanError(f"{where} must be a whole number >= {minimum}, not {value!r}")
    return number


def _list(plan: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = plan.get(key) or []
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise PlanError(f"plan.{key} must be a list")
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise PlanError(f"plan.{key}[{index}] must be a dict, not {item!r}")
    return list(items)


def validate_plan(plan: Mapping[str, Any]) -> None:
    """Raise PlanError naming the first thing to fix in the plan."""
    nodes = _list(plan, "nodes")
    if not nodes:
        raise PlanError("plan.nodes is empty: list the node groups (role, count, flavor)")
    for index, group in enumerate(nodes):
        for key in ("role", "flavor"):
            if not group.get(key):
                raise PlanError(f"plan.nodes[{index}] needs '{key}'")
        _int(group.get("count"), f"plan.nodes[{index}].count ({group.get('role')})")
    surge = plan.get("upgrade_surge") or {}
    if not isinstance(surge, Mapping):
        raise PlanError("plan.upgrade_surge must be a dict (count, flavor)")
    _int(surge.get("count", 0), "plan.upgrade_surge.count")
    if plan.get("boot_from_volume"):
        _int(plan.get("root_volume_gb"), "plan.root_volume_gb (boot from volume)", minimum=1)
    for key in ("cluster_networks", "cluster_security_groups", "ports_per_node"):
        _int(plan.get(key, 0), f"plan.{key}")
    for index, svc in enumerate(_list(plan, "services")):
        if not svc.get("name"):
            raise PlanError(f"plan.services[{index}] needs 'name' (and 'namespace', 'ports')")
        ports = svc.get("ports") or []
        if not isinstance(ports, Sequence) or isinstance(ports, (str, bytes)) or not ports:
            raise PlanError(f"plan.services[{index}] ({svc['name']}) needs a non-empty list 'ports'")
    classes = {str(c.get("name")) for c in _list(plan, "storage_classes")}
    for index, sc in enumerate(_list(plan, "storage_classes")):
        if not sc.get("name") or not sc.get("volume_type"):
            raise PlanError(f"plan.storage_classes[{index}] needs 'name' and 'volume_type'")
    for index, pvc in enumerate(_list(plan, "pvcs")):
        where = f"plan.pvcs[{index}] ({pvc.get('name', 'unnamed')})"
        _int(pvc.get("count", 1), f"{where}.count")
        _int(pvc.get("size_gb"), f"{where}.size_gb", minimum=1)
        if pvc.get("storage_class") not in classes:
            raise PlanError(f"{where}.storage_class {pvc.get('storage_class')!r} is not one of plan.storage_classes "
                            f"({', '.join(sorted(classes)) or 'none'})")
    _int(plan.get("etcd_members"), "plan.etcd_members", minimum=1)


def node_names(group: Mapping[str, Any]) -> list[str]:
    """Server names of a node group: ``<name_prefix><1..count>`` (none without a prefix)."""
    prefix = group.get("name_prefix")
    return [f"{prefix}{i}" for i in range(1, int(group["count"]) + 1)] if prefix else []


def lb_name(cluster: str, namespace: str, name: str) -> str:
    """The load balancer cloud-provider-openstack creates for a Service (cut to 255 characters)."""
    return f"kube_service_{cluster}_{namespace}_{name}"[:255]


def _flavor_size(flavor: Mapping[str, Any] | None) -> tuple[int, int]:
    return (int(flavor.get("vcpus") or 0), int(flavor.get("ram") or 0)) if flavor else (0, 0)


def surge_flavor(plan: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]) -> str:
    """The flavor of the extra nodes during an upgrade: as planned, else the largest planned node flavor."""
    surge = plan.get("upgrade_surge") or {}
    if surge.get("flavor"):
        return str(surge["flavor"])
    names = [str(g["flavor"]) for g in plan["nodes"]]
    return max(names, key=lambda n: _flavor_size(flavors.get(n)))


def demand(plan: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]],
           servers: Sequence[str] = (), load_balancers: Sequence[str] = ()) -> tuple[dict[str, int], list[str]]:
    """What the plan will create, per ``service.resource``, and a line per contribution (for the evidence).

    ``flavors`` maps flavor name -> {vcpus, ram (MiB)}; ``servers`` and ``load_balancers`` are the names
    that exist in the project (they are already counted in the usage, so they are not demanded again).
    """
    need: dict[str, int] = {f"{s}.{r}": 0 for s, r, _u in QUOTAS}
    why: list[str] = []
    existing_servers = set(servers)
    ports_per_node = int(plan.get("ports_per_node", 1))
    bfv = bool(plan.get("boot_from_volume"))
    root_gb = int(plan.get("root_volume_gb") or 0)

    def add_nodes(count: int, flavor_name: str, label: str) -> None:
        if count <= 0:
            return
        vcpus, ram = _flavor_size(flavors.get(flavor_name))
        need["compute.instances"] += count
        need["compute.cores"] += count * vcpus
        need["compute.ram"] += count * ram
        need["network.ports"] += count * ports_per_node
        line = f"{label}: {count} x {flavor_name} ({vcpus} vCPU, {ram} MiB), {count * ports_per_node} port(s)"
        if bfv:
            need["block_storage.volumes"] += count
            need["block_storage.gigabytes"] += count * root_gb
            line += f", {count} root volume(s) of {root_gb} GiB"
        why.append(line)

    for group in plan["nodes"]:
        names = node_names(group)
        existing = sorted(existing_servers.intersection(names))
        count = int(group["count"]) - len(existing)
        if existing:
            why.append(f"{group['role']}: {len(existing)} node(s) exist already ({', '.join(existing)}), "
                       "counted in the usage")
        add_nodes(count, str(group["flavor"]), f"{group['role']} nodes to create")
    surge_count = int((plan.get("upgrade_surge") or {}).get("count", 0))
    if surge_count:
        add_nodes(surge_count, surge_flavor(plan, flavors), "rolling-upgrade surge")
    for key, resource in (("cluster_networks", "network.networks"),
                          ("cluster_security_groups", "network.security_groups")):
        if int(plan.get(key, 0)):
            need[resource] += int(plan[key])
            why.append(f"{key.replace('_', ' ')} the deployment creates: {plan[key]}")

    existing_lbs = set(load_balancers)
    cluster = str(plan.get("cluster_name") or "kubernetes")
    manage_sg = plan.get("manage_security_groups", True)
    for svc in _list(plan, "services"):
        namespace = str(svc.get("namespace") or "default")
        name = lb_name(cluster, namespace, str(svc["name"]))
        if name in existing_lbs:
            why.append(f"Service {namespace}/{svc['name']}: load balancer {name} exists already, counted in the usage")
            continue
        ports = len(svc["ports"])
        need["load_balancer.load_balancers"] += 1
        need["load_balancer.listeners"] += ports
        need["load_balancer.pools"] += ports
        need["network.ports"] += 1  # the VIP port
        need["network.floating_ips"] += 1
        need["network.security_groups"] += 1 if manage_sg else 0
        why.append(f"Service {namespace}/{svc['name']}: 1 load balancer, {ports} listener(s) and pool(s), "
                   f"1 VIP port, 1 floating IP{', 1 security group' if manage_sg else ''}")

    class_types = {str(c["name"]): str(c["volume_type"]) for c in _list(plan, "storage_classes")}
    for pvc in _list(plan, "pvcs"):
        count, size = int(pvc.get("count", 1)), int(pvc["size_gb"])
        volume_type = class_types.get(str(pvc.get("storage_class")), "")
        need["block_storage.volumes"] += count
        need["block_storage.gigabytes"] += count * size
        # Cinder also keeps per-volume-type quotas (volumes_<type>, gigabytes_<type>).
        for resource, amount in ((f"volumes_{volume_type}", count), (f"gigabytes_{volume_type}", count * size)):
            need[f"block_storage.{resource}"] = need.get(f"block_storage.{resource}", 0) + amount
        why.append(f"PVC {pvc.get('name', 'unnamed')}: {count} x {size} GiB on {pvc['storage_class']} ({volume_type})")
    return need, why


# ------------------------------------------------------------------ the checks

def quota_rows(need: Mapping[str, int], quotas: Mapping[str, Any], services: Mapping[str, bool],
               unreadable: Sequence[str] = ()) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Each quota's limit, usage, headroom and demand, with findings where the demand does not fit.

    ``quotas`` maps service -> resource -> {limit, in_use}. A service in ``unreadable`` failed to answer
    (reported once, by ``read_error_findings``): its rows say ``unknown`` without a finding each.
    Per-volume-type Cinder quotas get a row when the plan uses the type and
    the quota is limited.
    """
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    absent: dict[str, list[str]] = {}
    keys = list(QUOTAS)
    # Cinder's per-volume-type quotas (volumes_<type>, gigabytes_<type>): a row when the plan uses the type
    # and the quota is limited (Cinder keeps -1 for every type unless an operator sets one).
    per_type = (quotas.get("block_storage") or {}) if services.get("block_storage") else {}
    keys += [("block_storage", resource, "GiB" if resource.startswith("gigabytes_") else "")
             for resource in sorted(k.split(".", 1)[1] for k in need if k.startswith("block_storage."))
             if resource not in ("volumes", "gigabytes") and resource in per_type
             and (per_type[resource] or {}).get("limit", UNLIMITED) not in (None, UNLIMITED)]
    for service, resource, unit in keys:
        wanted = int(need.get(f"{service}.{resource}", 0))
        row: dict[str, Any] = {"service": service, "resource": resource, "unit": unit, "limit": None,
                               "in_use": None, "headroom": None, "demand": wanted}
        subject = f"{service}.{resource}"
        if not services.get(service):
            row["status"] = "absent"
            if wanted:
                absent.setdefault(service, []).append(f"{wanted}{_unit(unit)} {resource}")
            rows.append(row)
            continue
        quota = (quotas.get(service) or {}).get(resource)
        if quota is None:
            row["status"] = "unknown"
            if wanted and service not in unreadable:
                findings.append(Finding(ERROR, "quota", subject,
                                        f"the plan needs {wanted}{_unit(unit)} but the quota could not be read"))
            rows.append(row)
            continue
        limit = int(quota["limit"]) if quota.get("limit") is not None else UNLIMITED
        in_use = int(quota.get("in_use") or 0)
        row.update(limit=limit, in_use=in_use)
        if limit == UNLIMITED:
            row.update(headroom=None, status="ok")
        else:
            headroom = limit - in_use
            row["headroom"] = headroom
            if wanted > headroom:
                row["status"] = "SHORT"
                findings.append(Finding(
                    ERROR, "quota", subject,
                    f"needs {wanted}{_unit(unit)}, headroom {headroom}{_unit(unit)} (quota {limit} - in use "
                    f"{in_use}): raise the quota by at least {wanted - headroom} or shrink the plan"))
            else:
                row["status"] = "ok"
        rows.append(row)
    # One finding per absent service that the plan needs, naming what it needs.
    findings += [Finding(ERROR, "quota", service, f"the plan needs {', '.join(needs)} but {service} is not in the "
                                                  "catalog: deploy the service or change the plan")
                 for service, needs in absent.items()]
    return rows, findings


def _unit(unit: str) -> str:
    return f" {unit}" if unit else ""


def flavor_findings(plan: Mapping[str, Any], flavors: Mapping[str, Any], services: Mapping[str, bool]) -> list[Finding]:
    if not services.get("compute"):
        return []
    wanted = [str(g["flavor"]) for g in plan["nodes"]]
    surge = (plan.get("upgrade_surge") or {}).get("flavor")
    wanted += [str(surge)] if surge else []
    return [Finding(ERROR, "flavor", name, f"Nova flavor {name} does not exist (or is not visible to the project); "
                                           f"known: {', '.join(sorted(flavors)) or 'none'}")
            for name in dict.fromkeys(wanted) if name not in flavors]


def volume_type_findings(plan: Mapping[str, Any], volume_types: Sequence[Mapping[str, Any]],
                         services: Mapping[str, bool]) -> list[Finding]:
    """Each StorageClass's volume type must exist and not be retired (description starts with RETIRED:)."""
    classes = _list(plan, "storage_classes")
    if plan.get("boot_from_volume") and plan.get("root_volume_type"):
        classes = classes + [{"name": "(node root volumes)", "volume_type": plan["root_volume_type"]}]
    if not classes:
        return []
    if not services.get("block_storage"):
        return [Finding(ERROR, "volume_type", str(c["name"]),
                        f"StorageClass {c['name']} needs volume type {c['volume_type']} but block storage (Cinder) "
                        "is not in the catalog") for c in classes]
    by_name = {str(t.get("name")): t for t in volume_types}
    findings = []
    for sc in classes:
        vtype = str(sc["volume_type"])
        found = by_name.get(vtype)
        if found is None:
            findings.append(Finding(ERROR, "volume_type", str(sc["name"]),
                                    f"volume type {vtype} does not exist (or is not visible to the project); "
                                    f"available: {', '.join(sorted(by_name)) or 'none'}"))
        elif str(found.get("description") or "").startswith(RETIRED_PREFIX):
            findings.append(Finding(ERROR, "volume_type", str(sc["name"]),
                                    f"volume type {vtype} is retired ({found.get('description')}): "
                                    "choose a supported type"))
    return findings


def octavia_findings(plan: Mapping[str, Any], providers: Sequence[Mapping[str, Any]],
                     lb_flavors: Sequence[Mapping[str, Any]], services: Mapping[str, bool]) -> list[Finding]:
    """The planned Octavia provider exists, and the flavor too when one is named (and is enabled)."""
    provider, flavor = plan.get("octavia_provider"), plan.get("octavia_flavor")
    if not provider and not flavor:
        return []
    if not services.get("load_balancer"):
        return [Finding(ERROR, "octavia", str(provider or flavor),
                        "an Octavia provider/flavor is planned but load-balancer (Octavia) is not in the catalog")]
    findings = []
    names = sorted(str(p.get("name")) for p in providers)
    if provider and provider not in names:
        findings.append(Finding(ERROR, "octavia", f"provider {provider}",
                                f"Octavia has no provider {provider}; available: {', '.join(names) or 'none'}"))
    if flavor:
        match = next((f for f in lb_flavors if f.get("name") == flavor or f.get("id") == flavor), None)
        if match is None:
            available = ", ".join(sorted(str(f.get("name")) for f in lb_flavors)) or "none"
            findings.append(Finding(ERROR, "octavia", f"flavor {flavor}",
                                    f"Octavia has no flavor {flavor}; available: {available}"))
        elif match.get("is_enabled") is False:
            findings.append(Finding(ERROR, "octavia", f"flavor {flavor}", f"Octavia flavor {flavor} is disabled"))
    return findings


def etcd_findings(members: int, environment: str) -> list[Finding]:
    """An even member count tolerates no more failures than one fewer member; production wants five."""
    if members % 2 == 0:
        return [Finding(ERROR, "etcd", "members",
                        f"{members} etcd members is even: quorum tolerates no more failures than {members - 1}; "
                        f"use {members - 1} or {members + 1}")]
    if environment == PRODUCTION and members < ETCD_PRODUCTION_MEMBERS:
        return [Finding(WARNING, "etcd", "members",
                        f"{members} etcd member(s) in production: {ETCD_PRODUCTION_MEMBERS} are recommended "
                        f"(tolerates 2 failures instead of {(members - 1) // 2})")]
    return []


def read_error_findings(errors: Mapping[str, str]) -> list[Finding]:
    return [Finding(ERROR, "read", service, message) for service, message in sorted(errors.items())]


# ------------------------------------------------------------------ rendering

def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table that reads the same in a terminal, a failure message and a Markdown code block."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(part) for r in cells for part in r[i].splitlines() or [""]) for i in range(len(headers))]

    def lines(row: Sequence[str]) -> list[str]:
        # A cell may hold several lines (a wrapped message): the row is as tall as its tallest cell.
        parts = [cell.splitlines() or [""] for cell in row]
        height = max(len(p) for p in parts)
        return ["| " + " | ".join((p[i] if i < len(p) else "").ljust(w) for p, w in zip(parts, widths)) + " |"
                for i in range(height)]

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join(lines(cells[0]) + [rule] + [text for r in cells[1:] for text in lines(r)])


def _amount(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if value == UNLIMITED:
        return "unlimited"
    return f"{value}{_unit(unit)}"


def capacity_table(rows: Sequence[Mapping[str, Any]]) -> str:
    return render_table(
        ("service", "resource", "quota", "in use", "headroom", "needed", "status"),
        [(r["service"], r["resource"], _amount(r["limit"], r["unit"]), _amount(r["in_use"], r["unit"]),
          "unlimited" if r["limit"] == UNLIMITED else _amount(r["headroom"], r["unit"]),
          _amount(r["demand"], r["unit"]), r["status"]) for r in rows])


def findings_table(findings: Sequence[Finding]) -> str:
    if not findings:
        return "No problems found."
    ordered = sorted(findings, key=lambda f: (f.severity != ERROR, f.check, f.subject))
    return render_table(("severity", "check", "subject", "what is wrong / what to do"),
                        [(f.severity.upper(), f.check, f.subject,
                          "\n".join(textwrap.wrap(f.message, MESSAGE_WIDTH, break_on_hyphens=False)))
                         for f in ordered])


def evaluate(plan: Mapping[str, Any], cloud: Mapping[str, Any]) -> dict[str, Any]:
    """All checks of the plan against what was read from the cloud.

    ``cloud`` holds what ``cloud_capacity_info`` returns: ``services`` (type -> in catalog), ``quotas``,
    ``flavors`` (list of {name, vcpus, ram}), ``volume_types``, ``load_balancer_providers``,
    ``load_balancer_flavors``, ``servers`` and ``load_balancers`` (names), ``errors`` (service -> message).
    """
    validate_plan(plan)
    services = dict(cloud.get("services") or {})
    flavors = {str(f["name"]): f for f in cloud.get("flavors") or []}
    need, why = demand(plan, flavors, cloud.get("servers") or [], cloud.get("load_balancers") or [])
    errors = dict(cloud.get("errors") or {})
    rows, findings = quota_rows(need, cloud.get("quotas") or {}, services, list(errors))
    # A listing that failed is reported once (read_error_findings); checking against it would only add
    # "does not exist" findings that are not true.
    findings = read_error_findings(errors) + findings
    if "flavors" not in errors:
        findings += flavor_findings(plan, flavors, services)
    if "volume_types" not in errors:
        findings += volume_type_findings(plan, cloud.get("volume_types") or [], services)
    if not {"load_balancer_providers", "load_balancer_flavors"} & set(errors):
        findings += octavia_findings(plan, cloud.get("load_balancer_providers") or [],
                                     cloud.get("load_balancer_flavors") or [], services)
    findings += etcd_findings(int(plan["etcd_members"]), str(plan.get("environment") or ""))
    problems = sum(1 for f in findings if f.severity == ERROR)
    warnings = sum(1 for f in findings if f.severity == WARNING)
    return {
        "demand": need,
        "demand_breakdown": why,
        "rows": rows,
        "findings": [f.as_dict() for f in findings],
        "problems": problems,
        "warnings": warnings,
        "capacity_table": capacity_table(rows),
        "findings_table": findings_table(findings),
    }
