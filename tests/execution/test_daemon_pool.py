"""The dynamic run's step pool: daemon threads, reused when idle, queued work cancellable."""

from __future__ import annotations

import threading

import pytest

from wharf.execution.daemon_pool import DaemonThreadPool


def test_work_runs_on_daemon_threads_and_errors_reach_the_future() -> None:
    pool = DaemonThreadPool(2, "test-pool")
    seen = pool.submit(threading.current_thread).result(timeout=10)

    def fail() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        pool.submit(fail).result(timeout=10)
    pool.shutdown()
    assert seen.daemon and seen.name.startswith("test-pool_")


def test_at_most_workers_threads_and_an_idle_one_is_reused() -> None:
    pool = DaemonThreadPool(2, "test-pool")
    names = [pool.submit(lambda: threading.current_thread().name).result(10) for _ in range(5)]
    assert names == ["test-pool_0"] * 5  # each one waited for: the idle thread took the next
    release = threading.Event()
    held = [pool.submit(release.wait, 10) for _ in range(4)]
    assert not held[2].done()
    release.set()
    assert all(f.result(timeout=10) for f in held)
    pool.shutdown()
    assert len({t.name for t in threading.enumerate() if t.name.startswith("test-pool_")}) == 0


def test_a_shutdown_without_waiting_cancels_the_queued_work_and_refuses_more() -> None:
    pool = DaemonThreadPool(1, "test-pool")
    release = threading.Event()
    running = pool.submit(release.wait, 10)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)
    release.set()
    assert running.result(timeout=10) is True
