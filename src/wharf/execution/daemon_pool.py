"""A thread pool whose threads never keep the process alive: a dynamic run's step threads.

Owns :class:`DaemonThreadPool`. ``concurrent.futures.ThreadPoolExecutor`` joins its threads
when the interpreter exits, so a step that ignores its interrupt (given up on after a forced
stop, recorded stopped) would keep its process from ever exiting. Here the threads are daemons
and nothing joins them but :meth:`DaemonThreadPool.shutdown` with ``wait=True``, which a run
that ends normally calls (every step it started ends first). Invariants: at most ``workers``
threads; an idle thread is reused before a new one starts; a cancelled future never runs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


class DaemonThreadPool:
    """Runs callables on up to ``workers`` daemon threads, named ``{name_prefix}_{n}``."""

    def __init__(self, workers: int, name_prefix: str) -> None:
        if workers < 1:
            raise ValueError("A thread pool needs at least one worker.")
        self._workers = workers
        self._name_prefix = name_prefix
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit work to a thread pool that is shut down")
            self._queue.put((future, fn, args))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._workers:
                thread = threading.Thread(
                    target=self._work,
                    name=f"{self._name_prefix}_{len(self._threads)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """No more work; ``cancel_futures``: the queued work never runs; ``wait``: return once
        every thread ended (without it, a thread still running its work is left to it)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            if cancel_futures:
                while True:
                    try:
                        work = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if work is not None:
                        work[0].cancel()
            for _ in threads:
                self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()

    def _work(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            future, fn, args = work
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # the future's owner sees it
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                del work, future, fn, args
            self._idle.release()


__all__ = ["DaemonThreadPool"]
