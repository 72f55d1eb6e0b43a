"""Contract: concurrent writers through separate connections (threads) stay consistent."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import IllegalTransitionError
from wharf.store.models import RunFilter, StepRunUpdate

T = TypeVar("T")
THREADS = 6


def race(fn: Callable[[int], T], threads: int = THREADS) -> list[T | Exception]:
    """Run ``fn(i)`` in ``threads`` threads released at the same instant."""
    barrier = threading.Barrier(threads)

    def call(i: int) -> T | Exception:
        barrier.wait()
        try:
            return fn(i)
        except Exception as exc:  # collected, asserted by the caller
            return exc

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(call, range(threads)))


def test_concurrent_get_or_create_yields_one_run(world: World) -> None:
    request = world.run_create(status=S.RUNNING, orchestrator_run_id="pod-1")
    results = race(lambda _: world.store.runs.get_or_create(request))
    assert all(isinstance(r, tuple) for r in results), results
    runs = {r[0].id for r in results if isinstance(r, tuple)}
    created = [r[1] for r in results if isinstance(r, tuple)]
    assert len(runs) == 1 and created.count(True) == 1
    assert world.store.runs.list(RunFilter(snapshot_id=world.snapshot.id)).total == 1


def test_concurrent_get_or_create_replaces_the_placeholder_once(world: World) -> None:
    placeholder = world.run()
    request = world.run_create(status=S.RUNNING, orchestrator_run_id="pod-1")
    results = race(lambda _: world.store.runs.get_or_create(request))
    assert all(isinstance(r, tuple) for r in results), results
    assert {r[0].id for r in results if isinstance(r, tuple)} == {placeholder.id}
    assert [r[1] for r in results if isinstance(r, tuple)].count(True) == 1
    (run,) = world.store.runs.list().items
    assert (run.status, run.orchestrator_run_id) == (S.RUNNING, "pod-1")


def test_concurrent_artifact_versions_are_numbered_without_gaps(world: World) -> None:
    per_thread = 4
    results = race(lambda _: [world.version("shared").version for _ in range(per_thread)])
    assert all(isinstance(r, list) for r in results), results
    numbers = sorted(n for r in results if isinstance(r, list) for n in r)
    assert numbers == list(range(1, THREADS * per_thread + 1))
    assert world.store.artifacts.list().total == 1


def test_concurrent_status_updates_apply_one_final_status(world: World) -> None:
    step = world.step()
    finals = [S.COMPLETED, S.FAILED, S.STOPPED, S.CANCELLED]
    results = race(
        lambda i: world.store.steps.update(step.id, StepRunUpdate(status=finals[i])),
        threads=len(finals),
    )
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, Exception)]
    assert len(winners) == 1 and all(isinstance(e, IllegalTransitionError) for e in losers)
    assert world.store.steps.get(step.id).status is winners[0].status
