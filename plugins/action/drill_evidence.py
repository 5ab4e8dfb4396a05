# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of ``drill_evidence``: writes the evidence bundle of a drill run.

It is an action plugin because the bundle belongs on the controller (AWX keeps
it as an artifact) and because only the controller knows the collection and
ansible-core versions and the inventory and configuration files to hash.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import platform
import socket
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ansible_core_version

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils._evidence import (
    FILES,
    MANIFEST,
    SpecError,
    add_step,
    finish,
    junit_xml,
    leaked,
    manifest,
    markdown_report,
    new_record,
    record_json,
    redact,
)

ARGUMENT_SPEC: dict[str, Any] = {
    "action": {"type": "str", "required": True, "choices": ["start", "step", "finish"]},
    "drill": {"type": "dict"},
    "evidence_root": {"type": "path"},
    "run_id": {"type": "str"},
    "run_dir": {"type": "path"},
    "name": {"type": "str"},
    "call": {"type": "raw"},
    "output": {"type": "raw"},
    "measured": {"type": "dict", "default": {}},
    "status": {"type": "str", "default": "ok", "choices": ["ok", "failed", "skipped"]},
    "started_at": {"type": "str"},
    "secrets": {"type": "list", "elements": "str", "default": [], "no_log": True},
    "fail_on_verdict": {"type": "bool", "default": True},
}


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o640)
    os.replace(tmp, path)


def _sha256_path(path: Path) -> dict[str, str]:
    """sha256 of a file, or of each file below a directory."""
    if path.is_file():
        return {str(path): hashlib.sha256(path.read_bytes()).hexdigest()}
    if path.is_dir():
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*"))
                if p.is_file() and "/." not in str(p.relative_to(path))}
    return {}


def collection_version() -> str:
    import ansible_collections.deployopen.k8s_openstack as collection

    for root in map(Path, collection.__path__):
        manifest_file = root / "MANIFEST.json"
        if manifest_file.exists():
            return str(json.loads(manifest_file.read_text())["collection_info"]["version"])
        galaxy = root / "galaxy.yml"
        if galaxy.exists():
            for line in galaxy.read_text().splitlines():
                if line.startswith("version:"):
                    return line.split(":", 1)[1].strip()
    return "unknown"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        validation = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if validation.error_messages:
            raise AnsibleActionFail(f"drill_evidence: {'; '.join(validation.error_messages)}")
        args = validation.validated_parameters
        try:
            if args["action"] == "start":
                result.update(self._start(args, task_vars))
            elif args["action"] == "step":
                result.update(self._step(args))
            else:
                result.update(self._finish(args))
        except SpecError as exc:
            raise AnsibleActionFail(f"drill_evidence: {exc}") from exc
        return result

    # -------------------------------------------------------------- actions

    def _start(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        for needed in ("drill", "evidence_root"):
            if not args[needed]:
                raise AnsibleActionFail(f"drill_evidence: action=start needs '{needed}'")
        now = datetime.now(timezone.utc)
        drill_id = str(args["drill"].get("id"))
        run_id = args["run_id"] or f"{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}"
        run_dir = Path(args["evidence_root"]) / drill_id / run_id
        hashes: dict[str, str] = {}
        for source in task_vars.get("ansible_inventory_sources") or []:
            hashes.update(_sha256_path(Path(source)))
        config = task_vars.get("ansible_config_file")
        if config:
            hashes.update(_sha256_path(Path(config)))
        context = {
            "collection": "deployopen.k8s_openstack",
            "collection_version": collection_version(),
            "ansible_core_version": ansible_core_version,
            "python_version": platform.python_version(),
            "controller": socket.gethostname(),
            "operator": getpass.getuser(),
            "playbook_dir": task_vars.get("playbook_dir"),
            "inventory_sources": list(task_vars.get("ansible_inventory_sources") or []),
            "hashes": hashes,
        }
        record = new_record(redact(args["drill"], args["secrets"]), run_id, context)
        if run_dir.exists() and any(run_dir.iterdir()):
            raise AnsibleActionFail(f"drill_evidence: {run_dir} already holds a run; choose another run_id")
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(run_dir, 0o750)
        self._save(run_dir, record)
        return {"changed": True, "run_dir": str(run_dir), "run_id": run_id, "record": record}

    def _step(self, args: dict[str, Any]) -> dict[str, Any]:
        run_dir = self._run_dir(args)
        if not args["name"]:
            raise AnsibleActionFail("drill_evidence: action=step needs 'name'")
        record = self._load(run_dir)
        step = add_step(record, redact({
            "name": args["name"], "call": args["call"], "output": args["output"], "status": args["status"],
            "measured": args["measured"], "started_at": args["started_at"],
        }, args["secrets"]))
        self._save(run_dir, record)
        return {"changed": True, "run_dir": str(run_dir), "step": step, "measured": record["measured"]}

    def _finish(self, args: dict[str, Any]) -> dict[str, Any]:
        run_dir = self._run_dir(args)
        record = finish(self._load(run_dir))
        rendered = {
            "record.json": record_json(record).encode(),
            "report.md": markdown_report(record).encode(),
            "junit.xml": junit_xml(record).encode(),
        }
        if set(rendered) != set(FILES):
            raise AnsibleActionFail(f"drill_evidence: internal error, bundle files {sorted(rendered)} != {FILES}")
        # Defence in depth: the bundle must not hold any secret the caller knows of.
        found = leaked({name: data.decode() for name, data in rendered.items()}, args["secrets"])
        if found:
            raise AnsibleActionFail(f"drill_evidence: refusing to write a bundle with a secret in {found}")
        for name, data in rendered.items():
            _write_atomic(run_dir / name, data)
        _write_atomic(run_dir / MANIFEST, manifest(rendered).encode())
        outcome = {
            "changed": True, "run_dir": str(run_dir), "verdict": record["verdict"],
            "passed": record["verdict"] == "pass", "clauses": record["clauses"],
            "failed_steps": record["failed_steps"], "measured": record["measured"],
            "report": str(run_dir / "report.md"), "junit": str(run_dir / "junit.xml"),
        }
        if record["verdict"] != "pass" and args["fail_on_verdict"]:
            reasons = [f"{c['measure']}: {c['reason']}" for c in record["clauses"] if not c["passed"]]
            reasons += [f"step failed: {s}" for s in record["failed_steps"]]
            outcome.update(failed=True, msg=f"drill {record['drill']['id']} FAILED ({'; '.join(reasons)}). "
                                            f"Evidence: {run_dir / 'report.md'}")
        return outcome

    # -------------------------------------------------------------- storage

    @staticmethod
    def _run_dir(args: dict[str, Any]) -> Path:
        if not args["run_dir"]:
            raise AnsibleActionFail(f"drill_evidence: action={args['action']} needs 'run_dir' (returned by start)")
        run_dir = Path(args["run_dir"])
        if not (run_dir / "record.json").exists():
            raise AnsibleActionFail(f"drill_evidence: {run_dir} holds no started run (no record.json)")
        return run_dir

    @staticmethod
    def _load(run_dir: Path) -> dict[str, Any]:
        return json.loads((run_dir / "record.json").read_text())

    @staticmethod
    def _save(run_dir: Path, record: dict[str, Any]) -> None:
        _write_atomic(run_dir / "record.json", record_json(record).encode())
