"""The markers of the step processes this machine started: private, atomic, and never read from
a directory someone else could have written."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import pytest

from wharf.execution import started_here


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path / "wharf-steps"


def test_a_marker_is_private_and_read_back(runtime: Path) -> None:
    step = uuid.uuid4()
    started_here.record(step, 4242, "boot:17")
    assert started_here.started(step) == (4242, "boot:17")
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    assert stat.S_IMODE((runtime / str(step)).stat().st_mode) == 0o600
    started_here.forget(step)
    assert started_here.started(step) is None


def test_a_process_without_a_start_token_is_not_marked(runtime: Path) -> None:
    step = uuid.uuid4()
    started_here.record(step, 4242, None)
    assert started_here.started(step) is None


def test_a_directory_others_may_write_is_never_trusted(runtime: Path) -> None:
    step = uuid.uuid4()
    started_here.record(step, 4242, "boot:17")
    runtime.chmod(0o777)  # as if someone else had made it, or opened it
    assert started_here.started(step) is None
    started_here.record(uuid.uuid4(), 1, "boot:1")  # nothing is written there either
    assert len(os.listdir(runtime)) == 1


def test_a_symlinked_directory_is_never_trusted(runtime: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    runtime.symlink_to(elsewhere)
    step = uuid.uuid4()
    (elsewhere / str(step)).write_text("4242 boot:17")
    started_here.record(uuid.uuid4(), 1, "boot:1")
    assert started_here.started(step) is None
    assert os.listdir(elsewhere) == [str(step)]
