"""The order in which a dynamic pipeline's function called its steps, recorded with step runs.

Owns :class:`CallOrder`. A call's position (0 for the function's first call) is given in the
function's own thread, when the call is made; steps are launched later and out of that order
(a submitted step waits for a thread, a queued one for resources). Invariant: before a step
run is created, the calls up to its own position are on it or on a step run created before
(:meth:`CallOrder.for_create`: the earlier calls not yet known written ride along), so the
calls an earlier process recorded are a prefix of its function's calls up to the last step it
started: no extra write per call. A replay of the function (its run resumed) whose call at a
recorded position is another step's diverged there, before it starts any step of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from wharf.core.errors import StepExecutionError
from wharf.store.models import StepRunRecord


class ReplayDivergedError(StepExecutionError):
    """A dynamic pipeline's function, run again to resume its run, called a step differently
    from the earlier process (:func:`~wharf.execution.run_lifecycle.replay_differs`), or at a
    position where the earlier process made another call (:class:`CallOrder`).

    An earlier step run is gone on from only for the same call; the first call that differs
    raises this when it is made, as does every launch after it (the run ends failed)."""


class CallOrder:
    """The positions of one run's dynamic step calls: given here, recorded with step runs,
    and checked against those an earlier process of the run recorded (``earlier``)."""

    def __init__(self, earlier: Iterable[StepRunRecord] = ()) -> None:
        self._lock = threading.Lock()
        self._earlier: dict[int, str] = {}
        """Position -> invocation id, as the earlier process's step runs recorded them."""
        for record in earlier:
            self._earlier.update(record.calls or {})
        self._earlier_position = {name: position for position, name in self._earlier.items()}
        self._positions: dict[str, int] = {}
        self._unwritten: dict[int, str] = {}
        """Calls made here that no step run written (here or earlier) holds yet."""

    def call(self, invocation_id: str) -> str | None:
        """Give the call ``invocation_id`` the next position; how that differs from the
        earlier process's calls (None: it made the same call there, or none is known)."""
        with self._lock:
            position = len(self._positions)
            self._positions[invocation_id] = position
            if self._earlier.get(position) != invocation_id:
                self._unwritten[position] = invocation_id
            before = self._earlier.get(position)
            was_at = self._earlier_position.get(invocation_id)
        if before is not None and before != invocation_id:
            return f"its call {position + 1} was step '{before}' before"
        if was_at is not None and was_at != position:
            return f"it was call {was_at + 1} before, now call {position + 1}"
        return None

    def for_create(self, invocation_id: str) -> dict[int, str] | None:
        """The calls to record with a step run of ``invocation_id``: its own and the earlier
        ones not known written yet (None: no call of the function, e.g. a static step)."""
        with self._lock:
            position = self._positions.get(invocation_id)
            if position is None:
                return None
            calls = {p: name for p, name in self._unwritten.items() if p < position}
        calls[position] = invocation_id
        return dict(sorted(calls.items()))

    def written(self, calls: Mapping[int, str] | None) -> None:
        """A step run holding ``calls`` was written: later step runs need not hold them."""
        with self._lock:
            for position in calls or {}:
                self._unwritten.pop(position, None)


def diverged_reason(name: str, differs: str) -> str:
    """Why a resumed run fails whose replayed function called step ``name`` differently."""
    return (
        f"The pipeline function called step '{name}' differently ({differs}) after the run's "
        "orchestrator restarted; a dynamic run is resumed only when its function replays the "
        "same calls."
    )


def unreached_reason(names: list[str]) -> str:
    """Why a resumed run fails whose replayed function ended without calling ``names`` again."""
    return (
        f"The pipeline function did not call step(s) {', '.join(names)} again after the run's "
        "orchestrator restarted; a dynamic run is resumed only when its function replays the "
        "same calls."
    )
