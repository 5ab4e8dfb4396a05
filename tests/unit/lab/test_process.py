"""The lab stops only what it started: by pid file, with the start time guarding against pid reuse."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from lab.core import Lab, Process


def test_start_stop_and_pid_reuse_guard(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    lab.ensure_dirs()
    proc = Process(lab, "sleeper")
    pid = proc.start(["sleep", "300"])
    assert proc.pid() == pid
    assert proc.start(["sleep", "300"]) == pid  # idempotent: no second process
    assert proc.stop(timeout=5) is True
    assert proc.pid() is None and not proc.pidfile.exists()
    assert proc.stop() is False


def test_a_foreign_process_behind_a_stale_pidfile_is_never_killed(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    lab.ensure_dirs()
    foreign = subprocess.Popen(["sleep", "300"])
    try:
        proc = Process(lab, "stale")
        proc.pidfile.write_text(json.dumps({"pid": foreign.pid, "argv": ["sleep"], "start_ticks": 1}))
        assert proc.pid() is None
        assert proc.stop() is False
        time.sleep(0.1)
        assert foreign.poll() is None  # still running
    finally:
        foreign.kill()
        foreign.wait()


def test_lab_secrets_are_masked_in_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.core import Lab, mask_lab_secrets

    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    lab = Lab.from_env()
    password = lab.secret("nova_db_password")
    message = f"command failed (1): nova-manage --database_connection mysql+pymysql://nova:{password}@127.0.0.1/x"
    assert password not in mask_lab_secrets(message)
    assert "mysql+pymysql://nova:********@127.0.0.1/x" in mask_lab_secrets(message)
    assert mask_lab_secrets("nothing secret") == "nothing secret"
