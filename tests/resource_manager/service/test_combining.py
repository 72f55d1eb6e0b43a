"""Flat combining: synchronous callers (threads) and asynchronous ones (an event loop) share one
queue; every operation runs exactly once, in batches, and every caller gets its own outcome."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from tests.resource_manager.service.helpers import ALICE, gpus, request_spec, setup_pool
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.service import ResourceManagerService
from wharf.resource_manager.service.combining import Combiner, Signal, Slot


class Doubler(Combiner[int]):
    """Answers ``2 * n``; fails odd multiples of 7; records its batches."""

    def __init__(self, max_batch: int = 8, delay: float = 0.0) -> None:
        super().__init__(max_batch)
        self.batches: list[list[int]] = []
        self.delay = delay

    def _execute(self, batch: list[Slot[int]]) -> None:
        self.batches.append([slot.operation for slot in batch])
        time.sleep(self.delay)  # long enough for callers to queue behind a running batch
        for slot in batch:
            if slot.operation % 7 == 0 and slot.operation % 2:
                slot.finish(error=ValueError(str(slot.operation)))
            else:
                slot.finish(2 * slot.operation)


def test_async_and_sync_callers_share_batches_and_get_their_own_outcomes() -> None:
    combiner = Doubler(delay=0.002)
    sync_results: dict[int, object] = {}

    def sync_caller(n: int) -> None:
        try:
            sync_results[n] = combiner.submit(n)
        except ValueError as error:
            sync_results[n] = error

    async def main() -> list[object]:
        threads = [threading.Thread(target=sync_caller, args=(n,)) for n in range(100, 140)]
        for thread in threads:
            thread.start()
        outcomes = await asyncio.gather(
            *(combiner.submit_async(n) for n in range(100)), return_exceptions=True
        )
        await asyncio.to_thread(lambda: [thread.join() for thread in threads])
        return outcomes

    outcomes = asyncio.run(main())
    for n, outcome in enumerate(outcomes):
        if n % 7 == 0 and n % 2:
            assert isinstance(outcome, ValueError) and str(outcome) == str(n)
        else:
            assert outcome == 2 * n
    for n, value in sync_results.items():
        assert value == 2 * n or (isinstance(value, ValueError) and n % 7 == 0)
    executed = sorted(n for batch in combiner.batches for n in batch)
    assert executed == list(range(140))  # each exactly once
    assert max(len(batch) for batch in combiner.batches) > 1  # combined
    assert all(len(batch) <= 8 for batch in combiner.batches)


def test_the_drainer_sleeps_when_idle_and_wakes_again() -> None:
    combiner = Doubler()

    async def rounds() -> list[int]:
        answers = []
        for n in range(20):
            answers.append(await combiner.submit_async(n * 2))
            await asyncio.sleep(0.001)  # the queue empties: the drainer goes back to sleep
        return answers

    assert asyncio.run(rounds()) == [4 * n for n in range(20)]
    assert not combiner._draining


class Flaky(Doubler):
    """Raises out of ``_execute`` (a bug in an executor) for batches holding a zero."""

    def _execute(self, batch: list[Slot[int]]) -> None:
        if any(slot.operation == 0 for slot in batch):
            raise RuntimeError("executor bug")
        super()._execute(batch)


def test_an_executor_that_raises_strands_no_caller() -> None:
    combiner = Flaky()
    with pytest.raises(RuntimeError, match="executor bug"):
        combiner.submit(0)
    assert combiner.submit(3) == 6

    async def main() -> tuple[object, object]:
        failed = await asyncio.gather(combiner.submit_async(0), return_exceptions=True)
        return failed[0], await combiner.submit_async(5)  # the drainer is still alive

    failed, later = asyncio.run(main())
    assert isinstance(failed, RuntimeError) and later == 10


@pytest.mark.parametrize("action", ["renew", "create_release"])
def test_the_service_async_entry_points(
    open_rm: Callable[..., ResourceManagerService], action: str
) -> None:
    rm = open_rm()
    setup_pool(rm, gpus_total=64)
    held = [rm.requests.create(ALICE, request_spec(gpus(1))) for _ in range(8)]

    async def main() -> list[S]:
        if action == "renew":
            renewed = await asyncio.gather(
                *(rm.requests.renew_async(ALICE, r.id, 60) for r in held * 4)
            )
            return [r.status for r in renewed]
        created = await asyncio.gather(
            *(rm.requests.create_async(ALICE, request_spec(gpus(1))) for _ in range(16))
        )
        released = await asyncio.gather(*(rm.requests.release_async(ALICE, r.id) for r in created))
        assert all(r.status is S.ALLOCATED for r in created)
        return [r.status for r in released]

    statuses = asyncio.run(main())
    expected = S.ALLOCATED if action == "renew" else S.RELEASED
    assert statuses and all(status is expected for status in statuses)


def test_a_signal_wakes_its_waiter_once_however_often_it_is_set() -> None:
    signal = Signal()
    signal.set()
    signal.set()  # a second setter (hand-off racing with finish) is a no-op
    signal.wait()  # consumes the one wake-up
    woken = threading.Event()

    def waiter() -> None:
        signal.wait()
        woken.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not woken.wait(0.05)  # nothing set since it was consumed
    signal.set()
    thread.join(5)
    assert woken.is_set()


def test_the_combiner_wakes_one_caller_per_batch_and_the_callers_wake_the_rest() -> None:
    combiner = Doubler(max_batch=64)
    batch = [Slot(2 * n, wake=Signal()) for n in range(12)]  # even: none fails
    own = batch[5]  # the combining thread's own slot: it is running, nobody wakes it
    combiner._run(batch, own)
    waiting = [slot for slot in batch if slot is not own]
    assert all(slot.done and slot.answered for slot in batch)
    assert [slot.value for slot in batch] == [4 * n for n in range(12)]
    # Only the first waiting caller was woken; its wake-up is set, nobody else's.
    woken = [slot.wake is not None and slot.wake._lock.acquire(blocking=False) for slot in waiting]
    assert woken == [True] + [False] * (len(waiting) - 1)
    # Followers form a tree over every waiting caller, each reached exactly once.
    reached = [follower for slot in waiting for follower in slot.followers]
    assert sorted(map(id, reached)) == sorted(map(id, waiting[1:]))
    assert max(len(slot.followers) for slot in waiting) == 2
    assert not own.followers


def test_many_threads_in_many_batches_all_return() -> None:
    combiner = Doubler(max_batch=5, delay=0.001)
    results: dict[int, object] = {}

    def caller(n: int) -> None:
        for round_ in range(5):
            m = n * 10 + round_
            try:
                results[m] = combiner.submit(m)
            except ValueError as error:
                results[m] = error

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)  # no caller left asleep
    assert len(results) == 200
    for m, value in results.items():
        assert value == 2 * m or (isinstance(value, ValueError) and m % 7 == 0)
    assert max(len(batch) for batch in combiner.batches) > 1


def test_an_asynchronous_slot_has_no_wake_up_to_set() -> None:
    """Its caller has no thread to wake (its future is resolved): handing it the combiner's
    role, or answering it, sets nothing."""
    combiner = Doubler(max_batch=64)
    queued = Slot(2)
    assert queued.wake is None
    combiner._queue.append(queued)
    combiner._hand_off()  # an asynchronous head: the drainer serves it
    combiner._run(combiner._take())
    assert queued.done and queued.answered and queued.value == 4
