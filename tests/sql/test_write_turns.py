"""Write turns (:mod:`wharf.sql.write_turns`): one writer per SQLite file per process,
reentrant per thread, urgent writers first, shared by every engine on the file.

Threads are sequenced with events; the only timed waits are safety timeouts that only a broken
test reaches, and short checks that a blocked thread is still blocked.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tests.sql.forking import exit_code_in_fork, held_by_another_thread

from wharf.sql.urgency import set_urgent
from wharf.sql.write_turns import WriteTurns, turns_for
from wharf.store.sql import SqlStore

SAFETY_TIMEOUT = 30.0


def in_thread(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_a_turn_is_reentrant_and_exclusive() -> None:
    turns = WriteTurns()
    entered = threading.Event()

    def other() -> None:
        with turns.turn():
            entered.set()

    with turns.turn(), turns.turn():  # a write inside a write never waits for itself
        thread = in_thread(other)
        assert not entered.wait(0.05)  # another thread waits for the whole outer turn
    assert entered.wait(SAFETY_TIMEOUT)
    thread.join(SAFETY_TIMEOUT)


def test_urgent_writers_go_before_the_others_that_wait() -> None:
    turns = WriteTurns()
    order: list[str] = []
    queued = threading.Semaphore(0)

    def writer(name: str, urgent: bool) -> None:
        set_urgent(urgent)
        queued.release()
        with turns.turn():
            order.append(name)

    pause = threading.Event()  # never set: a short pause for a thread to reach its wait
    with turns.turn():
        plain = in_thread(lambda: writer("plain", False))
        assert queued.acquire(timeout=SAFETY_TIMEOUT)
        pause.wait(0.05)  # the plain writer waits first ...
        urgent = in_thread(lambda: writer("urgent", True))
        assert queued.acquire(timeout=SAFETY_TIMEOUT)
        pause.wait(0.05)  # ... then the urgent one
    plain.join(SAFETY_TIMEOUT)
    urgent.join(SAFETY_TIMEOUT)
    assert order == ["urgent", "plain"]


def test_every_engine_on_a_file_shares_its_turns(tmp_path: Path) -> None:
    assert turns_for(str(tmp_path / "a.db")) is turns_for(str(tmp_path / "." / "a.db"))
    assert turns_for(str(tmp_path / "a.db")) is not turns_for(str(tmp_path / "b.db"))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    first, second = SqlStore.open(url), SqlStore.open(url)
    try:
        assert first._db._turns is second._db._turns is turns_for(str(tmp_path / "store.db"))
    finally:
        first.close()
        second.close()


def test_a_forked_child_starts_with_every_turn_free(tmp_path: Path) -> None:
    store = SqlStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    turns = store._db._turns
    assert turns is not None

    def in_child() -> None:
        assert turns_for(str(tmp_path / "store.db")) is turns  # inherited, reset
        with turns.turn():  # would wait forever for the parent thread's turn
            pass

    try:
        with held_by_another_thread(turns.turn):  # a parent thread writing at the fork
            assert exit_code_in_fork(in_child) == 0
    finally:
        store.close()
