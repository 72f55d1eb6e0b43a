"""An isolated step's own process stores its output file only once its orchestrator is gone
(:class:`wharf.execution.log_capture.OwnLog`): while the parent lives the file is the parent's
to copy and delete; once gone, the process stores what it wrote at the step's ``logs_uri``
(once, whoever asks first) and deletes the file, even when it never learnt where it belongs,
and before the exit its parent watch forces on a step that does not end in time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.log_capture import OwnLog, read_log


def output_file(tmp_path: Path) -> Path:
    path = tmp_path / "wharf-step-1-x.log"
    path.write_text("what the step printed\n")
    return path


def test_while_the_parent_lives_the_file_is_left_to_it(tmp_path: Path) -> None:
    path = output_file(tmp_path)
    store = LocalArtifactStore(tmp_path / "artifacts")
    uri = store.new_uri("logs", "step.log")
    log = OwnLog(str(path))
    log.destination(store, uri)
    log.store_if_orphaned()
    assert path.read_text() == "what the step printed\n"
    assert not store.exists(uri)


def test_once_orphaned_the_output_is_stored_once_and_the_file_deleted(tmp_path: Path) -> None:
    path = output_file(tmp_path)
    store = LocalArtifactStore(tmp_path / "artifacts")
    uri = store.new_uri("logs", "step.log")
    log = OwnLog(str(path))
    log.destination(store, uri)
    log.orphan()
    log.store_if_orphaned()
    assert not path.exists()
    assert read_log(store, uri) == "what the step printed\n"
    log.store_if_orphaned()  # a second caller (the watch's exit) finds it done
    assert read_log(store, uri) == "what the step printed\n"


def test_orphaned_before_it_knew_where_the_log_belongs_the_file_is_still_deleted(
    tmp_path: Path,
) -> None:
    path = output_file(tmp_path)
    log = OwnLog(str(path))
    log.orphan()
    log.store_if_orphaned()
    assert not path.exists()


def test_a_process_without_an_output_file_has_nothing_to_do() -> None:
    log = OwnLog(None)  # e.g. a step pod: its output is the container's
    log.orphan()
    log.store_if_orphaned()


def test_a_step_cut_off_after_its_grace_stores_its_log_before_it_exits(tmp_path: Path) -> None:
    """``ParentWatch`` exits a step that did not end in time through ``store_then_exit``: the
    output, flushed, is stored before the process exits with the watch's code (a real
    process, whose last print is still in its buffer)."""
    path = tmp_path / "wharf-step-1-x.log"
    store = LocalArtifactStore(tmp_path / "artifacts")
    uri = store.new_uri("logs", "step.log")
    code = f"""
import os, sys
fd = os.open({str(path)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.dup2(fd, 1)
sys.stdout = open(1, "w", buffering=8192, closefd=False)
from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.log_capture import OwnLog
store = LocalArtifactStore({store.path!r})
log = OwnLog({str(path)!r})
log.destination(store, {uri!r})
print("still in the buffer")
log.orphan()
log.store_then_exit(4)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 4, done.stderr
    assert not path.exists()
    assert read_log(store, uri) == "still in the buffer\n"
