"""An isolated step's own process stores its output file only once its orchestrator is gone
(:class:`wharf.execution.log_capture.OwnLog`): while the parent lives the file is the parent's
to copy and delete; once gone, the process stores what it wrote at the step's ``logs_uri``
(once, whoever asks first) and deletes the file, even when it never learnt where it belongs,
and before the exit its parent watch forces on a step that does not end in time. An inline
step's capture (:func:`capture_output`) takes what its thread and the threads it starts print
while it runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.waiting import wait_until
from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.log_capture import OwnLog, capture_output, read_log


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


def test_a_step_cut_off_after_its_grace_takes_its_workers_with_it(tmp_path: Path) -> None:
    """A step's process leads a process group (its pool's workers are in it): cut off once its
    orchestrator is gone, it stores its log and is killed with the whole group. Before, it
    exited alone and its workers lived on, orphaned."""
    path = tmp_path / "wharf-step-1-x.log"
    store = LocalArtifactStore(tmp_path / "artifacts")
    uri = store.new_uri("logs", "step.log")
    worker_pid = tmp_path / "worker.pid"
    code = f"""
import subprocess, sys
from pathlib import Path
from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.log_capture import OwnLog
worker = subprocess.Popen(["sleep", "300"])
Path({str(worker_pid)!r}).write_text(str(worker.pid))
log = OwnLog({str(path)!r})
log.destination(LocalArtifactStore({store.path!r}), {uri!r})
print("the step's last words", flush=True)
log.orphan()
log.store_then_exit(4)
"""
    with path.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-c", code],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=60,
            check=False,
            start_new_session=True,  # as a step's process: the leader of its own group
        )
    pid = int(worker_pid.read_text())
    try:
        assert wait_until(lambda: not _alive(pid), 60), "the step's worker outlived it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    assert read_log(store, uri) == "the step's last words\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


# ---------------------------------------------------------------- inline steps: capture_output


def run_in_thread(target: Callable[[], None]) -> None:
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()


def test_a_thread_started_in_the_block_and_its_own_threads_print_into_it() -> None:
    def child() -> None:
        print("from the child")
        run_in_thread(lambda: print("from the grandchild"))

    with capture_output() as log:
        print("from the step")
        run_in_thread(child)
        with ThreadPoolExecutor(2) as pool:
            pool.submit(print, "from a pool").result()
    assert log.getvalue().splitlines() == [
        "from the step",
        "from the child",
        "from the grandchild",
        "from a pool",
    ]


def test_concurrent_blocks_keep_their_threads_output_apart() -> None:
    both_started = threading.Barrier(2, timeout=60)
    logs: dict[str, str] = {}

    def step(label: str) -> None:
        def child() -> None:
            both_started.wait()  # both steps run now: each child prints while the other runs
            print(f"child of {label}")

        with capture_output() as log:
            run_in_thread(child)
        logs[label] = log.getvalue()

    steps = [threading.Thread(target=step, args=(label,)) for label in ("a", "b")]
    for thread in steps:
        thread.start()
    for thread in steps:
        thread.join()
    assert logs == {"a": "child of a\n", "b": "child of b\n"}


def test_a_thread_outliving_its_block_prints_into_it_no_longer() -> None:
    printed = threading.Event()
    block_ended = threading.Event()

    def late() -> None:
        print("during")
        printed.set()
        block_ended.wait(timeout=60)
        print("after")

    with capture_output() as log:
        thread = threading.Thread(target=late)
        thread.start()
        printed.wait(timeout=60)
    block_ended.set()
    thread.join()
    assert log.getvalue() == "during\n"


def test_a_thread_started_before_the_block_is_not_its_thread() -> None:
    block_running = threading.Event()
    printed = threading.Event()

    def earlier() -> None:
        block_running.wait(timeout=60)
        print("from an earlier thread")
        printed.set()

    thread = threading.Thread(target=earlier)
    thread.start()
    with capture_output() as log:
        block_running.set()
        printed.wait(timeout=60)
    thread.join()
    assert log.getvalue() == ""
