"""Which project (and run) an id belongs to: what every access check needs first.

Invariant: these relations never change, so the answers are cached per server process (no
replica hears of another's writes). A record never moves to another project or run, and an id
belongs to one project for ever, even after its record is deleted: the server makes ids at
random (version 4), and an id a caller chose (a run's, a snapshot's, a step run's) is never
stored as it is but scoped (``wharf.server.chosen_ids``: version 5, derived from the id of its
project, or of a step run's run), so no caller of another project (or run) can create a record
under an id this cache knows. A cached id whose record was since deleted still fails in the
store call that follows (re-created under the same id, it is its project's again). Misses go
to the store and raise its ``EntityNotFoundError`` (with the store's message) for unknown ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

from wharf.store.ports import Store

T = TypeVar("T")
CACHE_SIZE = 50_000


@dataclass(frozen=True)
class RunInfo:
    project_id: UUID


@dataclass(frozen=True)
class StepInfo:
    run_id: UUID
    project_id: UUID


class _Cache(Generic[T]):
    def __init__(self, load: Callable[[UUID], T]) -> None:
        self._load = load
        self._values: dict[UUID, T] = {}

    def __call__(self, key: UUID) -> T:
        value = self._values.get(key)
        if value is None:
            value = self._load(key)
            if len(self._values) >= CACHE_SIZE:
                self._values.clear()
            self._values[key] = value
        return value

    def remember(self, key: UUID, value: T) -> None:
        if len(self._values) < CACHE_SIZE:
            self._values[key] = value


class Scopes:
    def __init__(self, store: Store) -> None:
        def run(run_id: UUID) -> RunInfo:
            record = store.runs.get(run_id)
            return RunInfo(record.project_id)

        def step(step_id: UUID) -> StepInfo:
            record = store.steps.get(step_id)
            return StepInfo(record.run_id, record.project_id)

        self.run = _Cache(run)
        self.step = _Cache(step)
        self.snapshot = _Cache(lambda i: store.snapshots.get(i).project_id)
        self.pipeline = _Cache(lambda i: store.pipelines.get(i).project_id)
        self.artifact = _Cache(lambda i: store.artifacts.get(i).project_id)
        self.version = _Cache(lambda i: store.artifacts.get_version(i).project_id)
        self.schedule = _Cache(lambda i: store.schedules.get(i).project_id)
