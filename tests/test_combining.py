"""The generic combiner: synchronous callers (threads) and asynchronous ones (an event loop)
share one queue; every operation runs exactly once, in bounded batches, and every caller gets
its own outcome, even when a batch raises as a whole."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from wharf.combining import Combiner


class Doubler(Combiner[int]):
    """Answers ``2 * n``; fails odd multiples of 7; raises as a whole for a batch holding 0;
    records its batches. While ``gate`` is unset, a batch waits for it (callers queue)."""

    def __init__(self, max_batch: int = 8) -> None:
        super().__init__(max_batch)
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def run_batch(self, operations: list[int]) -> Sequence[object]:
        self.batches.append(list(operations))
        self.entered.set()
        assert self.gate.wait(10)
        if 0 in operations:
            raise RuntimeError("executor bug")
        return [ValueError(str(n)) if n % 7 == 0 and n % 2 else 2 * n for n in operations]


def _check(outcomes: dict[int, object]) -> None:
    for n, outcome in outcomes.items():
        if n % 7 == 0 and n % 2:
            assert isinstance(outcome, ValueError) and str(outcome) == str(n)
        else:
            assert outcome == 2 * n


def _submit(combiner: Doubler, n: int) -> object:
    try:
        return combiner.submit(n)
    except ValueError as error:
        return error


def test_async_and_sync_callers_share_batches_and_get_their_own_outcomes() -> None:
    combiner = Doubler()
    sync_results: dict[int, object] = {}

    def sync_caller(n: int) -> None:
        sync_results[n] = _submit(combiner, n)

    async def main() -> list[object]:
        combiner.gate.clear()  # the first batch waits: everybody queues behind it
        first = asyncio.ensure_future(combiner.submit_async(1))
        await asyncio.to_thread(combiner.entered.wait, 10)
        threads = [threading.Thread(target=sync_caller, args=(n,)) for n in range(100, 140)]
        for thread in threads:
            thread.start()
        rest = [asyncio.ensure_future(combiner.submit_async(n)) for n in range(2, 100)]
        await asyncio.sleep(0)  # let every coroutine queue its operation
        combiner.gate.set()
        outcomes = await asyncio.gather(first, *rest, return_exceptions=True)
        await asyncio.to_thread(lambda: [thread.join(10) for thread in threads])
        return outcomes

    outcomes = asyncio.run(main())
    _check(dict(enumerate(outcomes, start=1)))
    _check(sync_results)
    assert len(sync_results) == 40
    executed = sorted(n for batch in combiner.batches for n in batch)
    assert executed == list(range(1, 140))  # each exactly once
    assert max(len(batch) for batch in combiner.batches) > 1  # combined
    assert all(len(batch) <= 8 for batch in combiner.batches)


def test_many_threads_are_all_answered_and_the_role_is_given_up() -> None:
    combiner = Doubler(max_batch=3)
    results: dict[int, object] = {}
    threads = [
        threading.Thread(target=lambda n=n: results.__setitem__(n, _submit(combiner, n)))
        for n in range(1, 201)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    _check(results)
    assert len(results) == 200
    assert combiner.submit(5) == 10  # a lone caller later runs its own batch
    assert combiner.batches[-1] == [5]


def test_a_batch_that_raises_fails_its_callers_and_strands_nobody() -> None:
    combiner = Doubler()
    with pytest.raises(RuntimeError, match="executor bug"):
        combiner.submit(0)
    assert combiner.submit(3) == 6

    async def main() -> tuple[object, object]:
        failed = await asyncio.gather(combiner.submit_async(0), return_exceptions=True)
        return failed[0], await combiner.submit_async(5)  # batches still run

    failed, later = asyncio.run(main())
    assert isinstance(failed, RuntimeError) and later == 10


def test_each_alone_runs_the_operations_of_a_failed_batch_one_by_one() -> None:
    combiner = Doubler()
    outcomes = combiner.each_alone([2, 7, 4], RuntimeError("the transaction rolled back"))
    assert outcomes[0] == 4 and isinstance(outcomes[1], ValueError) and outcomes[2] == 8
    error = RuntimeError("alone")
    assert combiner.each_alone([2], error) == [error]
