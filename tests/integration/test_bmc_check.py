"""bmc_check against a real Redfish service: sushy-tools' emulator (fake driver) over TLS on 127.0.0.1,
started by this test. What the role reports is checked against the emulator's own API."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.request
from base64 import b64encode
from pathlib import Path
from typing import Iterator

import bcrypt
import pytest
from labtest import REPO, ansible_playbook, free_port

USER, PASSWORD = "bmc-admin", "bmc-test-password-5f2"
SYSTEMS = [
    {"uuid": "3c2b1d0e-0000-4000-8000-000000000001", "name": "cmp-01", "power_state": "On",
     "external_notifier": False, "nics": [{"mac": "52:54:00:00:00:01", "ip": "127.0.0.1"}]},
    {"uuid": "3c2b1d0e-0000-4000-8000-000000000002", "name": "cmp-02", "power_state": "Off",
     "external_notifier": False, "nics": [{"mac": "52:54:00:00:00:02", "ip": "127.0.0.1"}]},
]


@pytest.fixture(scope="module")
def redfish(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("bmc")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", tmp / "key.pem", "-out", tmp / "cert.pem"],
                   check=True, capture_output=True)
    (tmp / "htpasswd").write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
    port = free_port()
    (tmp / "emulator.conf").write_text(
        f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {port}\n"
        f"SUSHY_EMULATOR_SSL_CERT = '{tmp / 'cert.pem'}'\nSUSHY_EMULATOR_SSL_KEY = '{tmp / 'key.pem'}'\n"
        f"SUSHY_EMULATOR_AUTH_FILE = '{tmp / 'htpasswd'}'\nSUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_STATE_DIR = '{tmp / 'state'}'\nSUSHY_EMULATOR_FAKE_SYSTEMS = {SYSTEMS!r}\n")
    emulator = Path(sys.executable).with_name("sushy-emulator")
    log = open(tmp / "emulator.log", "w")
    proc = subprocess.Popen([str(emulator), "--config", str(tmp / "emulator.conf"), "--fake"], stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            get(url, "/redfish/v1/", tmp / "cert.pem")
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"sushy-emulator exited: {(tmp / 'emulator.log').read_text()[-2000:]}")
            time.sleep(0.3)
    else:
        pytest.fail("sushy-emulator did not answer in 30 s")
    (tmp / "url").write_text(url)
    yield url + "|" + str(tmp / "cert.pem")
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def get(url: str, path: str, ca: Path) -> dict:
    context = ssl.create_default_context(cafile=str(ca))
    request = urllib.request.Request(url + path, headers={
        "Authorization": "Basic " + b64encode(f"{USER}:{PASSWORD}".encode()).decode()})
    with urllib.request.urlopen(request, context=context, timeout=10) as resp:  # noqa: S310 - loopback emulator
        return json.loads(resp.read())


def write_inventory(tmp: Path, url: str, ca: str, boot: str) -> Path:
    inventory = tmp / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"cmp-01": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "bmc_address": url, "bmc_username": USER, "bmc_password": PASSWORD,
        "bmc_check_ca_path": ca, "bmc_check_resource_id": SYSTEMS[0]["uuid"], "bmc_check_one_time_boot": boot}}}}))
    return inventory


def run_role(inventory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    playbook = REPO / "tests" / "integration" / "playbooks" / "bmc_check.yml"
    return ansible_playbook(str(playbook), "-e", f"report_path={inventory.parent / 'report.json'}", *extra,
                            inventory=inventory)


def test_inventory_power_and_one_time_boot(redfish: str, tmp_path: Path) -> None:
    url, ca = redfish.split("|")
    system_path = f"/redfish/v1/Systems/{SYSTEMS[0]['uuid']}"
    before = get(url, system_path, Path(ca))["Boot"]
    assert before.get("BootSourceOverrideTarget") != "Pxe"
    inventory = write_inventory(tmp_path, url, ca, "Pxe")

    check = run_role(inventory, "--check")
    assert check.returncode == 0, check.stdout[-3000:]
    assert get(url, system_path, Path(ca))["Boot"] == before  # check mode changed nothing

    first = run_role(inventory)
    assert first.returncode == 0, first.stdout[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    by_name = {s["Name"]: s for s in report["systems"]}
    assert by_name["cmp-01"]["PowerState"] == "On" and by_name["cmp-02"]["PowerState"] == "Off"
    boot = get(url, system_path, Path(ca))["Boot"]
    # The fake driver keeps the target, not the "Once" flag the module sends.
    assert boot["BootSourceOverrideTarget"] == "Pxe"
    assert "changed=1" in first.stdout

    second = run_role(inventory)
    assert second.returncode == 0 and "changed=0" in second.stdout, second.stdout[-3000:]
    assert PASSWORD not in first.stdout + second.stdout + check.stdout


def test_bad_inputs_fail_clearly(redfish: str, tmp_path: Path) -> None:
    url, ca = redfish.split("|")
    bad_boot = run_role(write_inventory(tmp_path, url, ca, "Network"))
    assert bad_boot.returncode != 0 and "bmc_check_one_time_boot must be empty or one of" in bad_boot.stdout
    wrong_password = run_role(write_inventory(tmp_path, url, ca, ""), "-e", "bmc_password=not-the-password")
    assert wrong_password.returncode != 0
    assert "401" in wrong_password.stdout or "Unauthorized" in wrong_password.stdout
