"""nova-compute refuses to start again without its node identity file: the lab puts it back from the
database (where Nova recorded the node), and leaves a first start, or an existing file, alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import cloud
from lab.core import Lab

NODE_UUID = "374413fd-5c3b-47ec-9419-e001de72457c"


@pytest.fixture()
def lab(tmp_path: Path) -> Lab:
    lab = Lab(tmp_path)
    lab.ensure_dirs()
    return lab


def answer(rows: list[str], calls: list[str]):  # type: ignore[no-untyped-def]
    def sql(self: object, lab: Lab, statement: str) -> str:
        calls.append(statement)
        return "\n".join(["uuid", *rows]) + "\n"
    return sql


def test_restored_from_the_database_after_the_first_start(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    nova = cloud.Nova()
    (nova.dir(lab)).mkdir(parents=True)
    (nova.dir(lab) / "initialised").touch()
    calls: list[str] = []
    monkeypatch.setattr(cloud.MariaDB, "sql", answer([NODE_UUID], calls))
    nova._ensure_node_identity(lab)
    assert (nova.dir(lab) / "state" / "compute_id").read_text().strip() == NODE_UUID
    assert len(calls) == 1 and f"host='{cloud.COMPUTE_HOST}'" in calls[0] and "deleted=0" in calls[0]
    nova._ensure_node_identity(lab)  # the file is there now: the database is not asked again
    assert len(calls) == 1


@pytest.mark.parametrize("initialised,rows", [(False, [NODE_UUID]), (True, [])])
def test_left_alone_on_a_first_start_or_without_a_node(lab: Lab, monkeypatch: pytest.MonkeyPatch,
                                                       initialised: bool, rows: list[str]) -> None:
    nova = cloud.Nova()
    nova.dir(lab).mkdir(parents=True)
    if initialised:
        (nova.dir(lab) / "initialised").touch()
    monkeypatch.setattr(cloud.MariaDB, "sql", answer(rows, []))
    nova._ensure_node_identity(lab)
    assert not (nova.dir(lab) / "state" / "compute_id").exists()


def test_the_driver_keeps_a_stable_node() -> None:
    """The plain FakeDriver makes up node UUIDs per process; this one keeps the identity file, like libvirt."""
    source = Path(cloud.__file__).read_text()
    assert "compute_driver = fake.FakeDriverWithoutFakeNodes\n" in source
    assert "compute_driver = fake.FakeDriver\n" not in source
