"""A step that prints a lot (tens of megabytes) costs its orchestrator no memory for it: an
isolated step's log file is copied into the artifact store a chunk at a time, by its parent
(``subprocesses.collect_logs``) or by the step's own process once orphaned (``OwnLog``).
Real files and a local artifact store; the memory is Python's own allocations (tracemalloc)."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.log_capture import OwnLog, StepLog, capturing, write_to_step_log
from wharf.execution.subprocesses import StepProcess, collect_logs

SIZE = 32 << 20  # 32 MiB of output
LIMIT = 8 << 20  # the most the copy may hold in memory at once


def big_log(path: Path) -> str:
    """Write SIZE bytes of step output to ``path``; their digest."""
    line = b"x" * 99 + b"\n"
    digest = hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(SIZE // len(line)):
            f.write(line)
            digest.update(line)
    return digest.hexdigest()


def stored_digest(store: LocalArtifactStore, uri: str) -> str:
    digest = hashlib.sha256()
    with store.open(uri, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def peak_of(call: object) -> int:
    assert callable(call)
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_isolated_step_log_is_stored_without_holding_it_in_memory(tmp_path: Path) -> None:
    """Before, the parent read the whole file into memory (and the store wrote it from there)."""
    store = LocalArtifactStore(tmp_path / "artifacts")
    log = tmp_path / "step.log"
    digest = big_log(log)
    uri = store.new_uri("p", "r") + ".log"
    peak = peak_of(lambda: collect_logs(StepProcess("s", log), store, uri))
    assert peak < LIMIT, f"copying the log held {peak >> 20} MiB"
    assert stored_digest(store, uri) == digest
    assert not log.exists()


def test_an_orphaned_step_stores_its_huge_log_without_holding_it_in_memory(
    tmp_path: Path,
) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    log = tmp_path / "step.log"
    digest = big_log(log)
    uri = store.new_uri("p", "r") + ".log"
    own = OwnLog(str(log))
    own.destination(store, uri)
    own.orphan()
    peak = peak_of(own.store_if_orphaned)
    assert peak < LIMIT, f"storing the log held {peak >> 20} MiB"
    assert stored_digest(store, uri) == digest
    assert not log.exists()


def test_a_huge_inline_step_log_is_captured_and_stored_without_holding_it_in_memory(
    tmp_path: Path,
) -> None:
    """Before, an inline step's capture held all it printed in memory (then a copy of it, then
    its encoding): a step printing 100 MB cost its orchestrator some 300 MB. Now the capture
    spills to a temporary file past a megabyte. The step's writes here go to its log only
    (``write_to_step_log``): the console is not part of what is measured."""
    store = LocalArtifactStore(tmp_path / "artifacts")
    uri = store.new_uri("p", "r") + ".log"
    log = StepLog(store, uri, "loud")
    line = "x" * 99 + "\n"
    digest = hashlib.sha256()

    def run_step() -> None:
        with capturing(log):
            for _ in range(SIZE // len(line)):
                assert write_to_step_log(line)
                digest.update(line.encode())
        log.store()

    peak = peak_of(run_step)
    assert peak < LIMIT, f"capturing the log held {peak >> 20} MiB"
    assert stored_digest(store, uri) == digest.hexdigest()


def test_a_small_inline_step_log_is_stored_as_before_and_a_silent_one_not_at_all(
    tmp_path: Path,
) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    uri = store.new_uri("p", "r") + ".log"
    log = StepLog(store, uri, "quiet")
    with capturing(log):
        assert write_to_step_log("é and \u2603\n")
    log.store()
    with store.open(uri, "rb") as f:
        assert f.read() == "é and \u2603\n".encode()
    silent_uri = store.new_uri("p", "r") + ".log"
    silent = StepLog(store, silent_uri, "silent")
    with capturing(silent):
        pass
    silent.store()
    assert not store.exists(silent_uri)
