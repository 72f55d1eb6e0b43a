"""Holders first (:mod:`wharf.execution.resources.holders_first`): creations of queued steps wait while a
step holding an allocation is in its stretch, a few at a time, and never longer than bounded;
a stretch belongs to its thread and never leaks.

Threads are sequenced with events; the only timed waits are the bounds under test (short) and
safety timeouts that only a broken test reaches.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from wharf.execution.resources.holders_first import HoldersFirst
from wharf.execution.resources.wait_room import WaitRoom

SAFETY_TIMEOUT = 30.0


def in_thread(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_without_holders_a_creation_goes_at_once() -> None:
    holders = HoldersFirst()
    assert holders.defer() == 0.0
    with holders.creating():
        assert holders.holding_now == 0


def test_begin_and_end_are_idempotent_per_thread() -> None:
    holders = HoldersFirst()
    holders.begin()
    holders.begin()
    assert holders.holding_now == 1
    other = in_thread(holders.begin)
    other.join(SAFETY_TIMEOUT)
    assert holders.holding_now == 2  # another thread's stretch counts on its own
    assert holders.end() is True
    assert holders.end() is False  # in none any more: nothing changes
    assert holders.holding_now == 1


def test_a_stretch_is_left_even_if_the_block_raises() -> None:
    holders = HoldersFirst()
    with pytest.raises(RuntimeError), holders.holding():
        raise RuntimeError("boom")
    assert holders.holding_now == 0


def test_a_stretch_paused_inside_holding_is_not_counted_twice() -> None:
    holders = HoldersFirst()
    with holders.holding():
        assert holders.end() is True  # paused (the user code runs)
        holders.begin()  # resumed
        assert holders.holding_now == 1
    assert holders.holding_now == 0


def test_a_creation_waits_until_the_last_holder_leaves() -> None:
    holders = HoldersFirst(max_wait=SAFETY_TIMEOUT)
    holding, release, created = threading.Event(), threading.Event(), threading.Event()

    def holder() -> None:
        with holders.holding():
            holding.set()
            release.wait(SAFETY_TIMEOUT)

    def creator() -> None:
        with holders.creating():
            created.set()

    first = in_thread(holder)
    assert holding.wait(SAFETY_TIMEOUT)
    creating = in_thread(creator)
    assert not created.wait(0.05)  # the holder is in its stretch
    release.set()
    assert created.wait(SAFETY_TIMEOUT)
    first.join(SAFETY_TIMEOUT)
    creating.join(SAFETY_TIMEOUT)


def test_a_creation_goes_at_once_while_no_step_waits_for_an_allocation() -> None:
    waiting = 0
    holders = HoldersFirst(max_wait=0.05, queued=lambda: waiting)
    holders.begin()  # a holder in its stretch, but nobody queued: capacity may be free
    assert holders.defer() == 0.0
    waiting = 1  # a queue exists: a new step could not be allocated before it, it gives way
    assert holders.defer() >= 0.04
    holders.end()


def test_the_wait_room_tells_its_gate_who_waits() -> None:
    room = WaitRoom(lambda ids: [], watch_seconds=None)
    room.holders.begin()
    assert room.holders.defer() == 0.0  # nobody in the room
    with room.enter(uuid.uuid4()):
        assert room.holders.defer() > 0.0  # someone waits: the creation gives way (bounded)
    room.holders.end()


def test_a_creation_never_waits_longer_than_the_bound() -> None:
    holders = HoldersFirst(max_wait=0.05)
    holders.begin()  # a stretch that never ends (a bug): creations are delayed, not starved
    began = time.monotonic()
    with holders.creating():
        waited = time.monotonic() - began
    assert 0.04 <= waited < SAFETY_TIMEOUT
    holders.end()


def test_only_a_few_create_at_once_and_the_turn_is_bounded() -> None:
    holders = HoldersFirst(creating_at_once=2, max_queue=SAFETY_TIMEOUT)
    inside, leave = threading.Semaphore(0), threading.Event()
    count = 0
    most = 0
    lock = threading.Lock()

    def creator() -> None:
        nonlocal count, most
        with holders.creating():
            with lock:
                count += 1
                most = max(most, count)
            inside.release()
            leave.wait(SAFETY_TIMEOUT)
            with lock:
                count -= 1

    threads = [in_thread(creator) for _ in range(5)]
    assert inside.acquire(timeout=SAFETY_TIMEOUT) and inside.acquire(timeout=SAFETY_TIMEOUT)
    assert not inside.acquire(timeout=0.05)  # the third waits for a turn
    leave.set()
    for _ in range(3):
        assert inside.acquire(timeout=SAFETY_TIMEOUT)
    for thread in threads:
        thread.join(SAFETY_TIMEOUT)
    assert most <= 2

    impatient = HoldersFirst(creating_at_once=1, max_queue=0.05)
    with impatient.creating():
        began = time.monotonic()
        with impatient.creating():  # no turn within the bound: it goes anyway
            assert time.monotonic() - began >= 0.04


def test_every_wait_room_has_its_gate() -> None:
    room = WaitRoom(lambda ids: [], watch_seconds=None)
    assert isinstance(room.holders, HoldersFirst)
    assert room.holders.holding_now == 0
