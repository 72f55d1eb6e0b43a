"""The steps an earlier process of a run started, as the process that took the run over goes on.

Owns :class:`ResumedSteps` (one per run, held by the launcher: ``wharf.execution.launcher``)
and :func:`end_lost`. The earlier process's latest step run of each step waits here until its
step is launched (:meth:`ResumedSteps.take`); a dynamic pipeline's replayed function has each
call checked when it is made (:meth:`ResumedSteps.called`) against those step runs and the
call order the earlier process recorded (``call_order``). Invariants: an earlier step run is
taken at most once; once the replay diverged, every later call and launch raises
``ReplayDivergedError``; an earlier step run not gone on from (its call differs, or the
function never calls it again: :meth:`ResumedSteps.end_unreached`) that is unfinished ends
failed, stopped if the run is stopping, and its attempt is ended if it still runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from uuid import UUID

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.execution import step_writes
from wharf.execution.call_order import (
    CallOrder,
    ReplayDivergedError,
    diverged_reason,
    unreached_reason,
)
from wharf.execution.run_lifecycle import IN_FLIGHT_STATUSES, Resumption, replay_differs
from wharf.execution.services import RunServices
from wharf.execution.step_outcome import StepOutcome
from wharf.store.models import ArtifactVersionRecord, StepRunRecord

logger = logging.getLogger(__name__)

NOT_CALLED_AGAIN = "not called again after the run's orchestrator restarted"


class ResumedSteps:
    """The step runs an earlier process of one run started (``resumed``) that no launch took
    yet, the run's call order, and the replay check of a dynamic pipeline's function
    (``check_replay``: its steps are called again by the function).

    ``stop_recorded`` ends an earlier attempt that still runs (through the kind of backend
    that started it) when it is not gone on from; ``ended`` tells the progress reporter of a
    step's outcome (from its start, if known) and answers that outcome."""

    def __init__(
        self,
        services: RunServices,
        run_id: UUID,
        resumed: Resumption | None,
        check_replay: bool,
        stop_recorded: Callable[[StepRunRecord], object] | None,
        ended: Callable[[StepOutcome, datetime | None], StepOutcome],
    ) -> None:
        self._services = services
        self._run_id = run_id
        self._steps = dict(resumed.steps) if resumed is not None else {}
        self._adoptable = resumed.adoptable if resumed is not None else frozenset()
        self._check_replay = check_replay
        self._stop_recorded = stop_recorded
        self._ended = ended
        self._diverged: str | None = None
        self._lock = threading.Lock()
        self.calls = CallOrder(self._steps.values())
        """The positions of the run's calls, recorded with its step runs."""

    def pending(self, name: str) -> bool:
        """Whether step ``name`` has an earlier step run no launch took yet."""
        return name in self._steps

    def adoptable(self, record: StepRunRecord) -> bool:
        """Whether the attempt of ``record`` (in flight) is taken over by its backend when it
        is submitted again."""
        return record.id in self._adoptable

    def called(self, spec: StepSpec, inputs: Mapping[str, ArtifactVersionRecord] | None) -> None:
        """A dynamic pipeline's function made the call ``spec``, launched later (its position
        is recorded with step runs: ``call_order``). A replay raises ReplayDivergedError here,
        before a later call starts a step, if the earlier process called otherwise; ``inputs``
        None: some are not known yet (of steps still running), their versions are compared
        when the step is launched."""
        differs = self.calls.call(spec.name)
        if not self._check_replay:
            return
        with self._lock:
            earlier = self._steps.get(spec.name)
            if self._diverged is None and differs is None and earlier is not None:
                ids = earlier.inputs if inputs is None else {n: v.id for n, v in inputs.items()}
                differs = replay_differs(earlier, spec, ids)
            if self._diverged is None and differs is not None:
                self._diverged = diverged_reason(spec.name, differs)
            diverged = self._diverged
        if diverged is not None:
            raise ReplayDivergedError(diverged)

    def take(self, name: str, inputs: Mapping[str, ArtifactVersionRecord]) -> StepRunRecord | None:
        """The earlier step run of step ``name``, launched now with ``inputs`` (None: there is
        none); raises :class:`ReplayDivergedError` once a replay diverged."""
        earlier = self._steps.pop(name, None)  # each step is launched once
        if self._check_replay:
            self._check_call(earlier, {n: v.id for n, v in inputs.items()})
        return earlier

    def end_unreached(self) -> str | None:
        """Once a replayed function ended: end the earlier step runs it did not call again
        that are unfinished; why the run fails if it left any out (None: it did not)."""
        with self._lock:
            unreached = dict(self._steps) if self._check_replay else {}
            self._steps.clear()
        for record in unreached.values():
            try:
                self._abandon(record, NOT_CALLED_AGAIN)
            except Exception:  # the run ends all the same
                logger.warning("Could not end step run %s", record.id, exc_info=True)
        return unreached_reason(sorted(unreached)) if unreached else None

    def _check_call(self, earlier: StepRunRecord | None, inputs: Mapping[str, UUID]) -> None:
        """Raise :class:`ReplayDivergedError` once the replay diverged (:meth:`called` checked
        each call when it was made, here its input versions), ending the earlier step run of
        this call."""
        with self._lock:
            if self._diverged is None and earlier is not None and dict(earlier.inputs) != inputs:
                self._diverged = diverged_reason(earlier.name, "other input artifact versions")
            diverged = self._diverged
        if diverged is None:
            return
        if earlier is not None:
            self._abandon(earlier, "called differently after the run's orchestrator restarted")
        raise ReplayDivergedError(diverged)

    def _abandon(self, record: StepRunRecord, what: str) -> None:
        """End the earlier step run ``record`` if it is unfinished: it is not gone on from."""
        if record.status not in IN_FLIGHT_STATUSES and record.status is not ExecutionStatus.QUEUED:
            return
        outcome = end_lost(
            self._services,
            self._run_id,
            record.name,
            record,
            f"Not resumed: {what}",
            f"Stopped: {what}",
        )
        self._ended(outcome, record.start_time)
        if outcome.status.is_successful:  # it ended meanwhile: its Job is collected as usual
            return
        if self.adoptable(record) and self._stop_recorded is not None:
            try:  # its attempt still runs (e.g. a step Job): end it
                self._stop_recorded(record)
            except Exception:
                logger.warning("Could not end the attempt of step run %s", record.id, exc_info=True)


def end_lost(
    services: RunServices,
    run_id: UUID,
    name: str,
    record: StepRunRecord,
    failed: str,
    stopped: str,
) -> StepOutcome:
    """End ``record`` of step ``name`` (of run ``run_id``), whose attempt is not gone on from:
    failed (with reason ``failed``), or stopped (``stopped``) if the run is stopping (what was
    recorded meanwhile stands)."""
    store = services.store
    status, reason = ExecutionStatus.FAILED, f"{failed}."
    if store.runs.get_status(run_id) in (ExecutionStatus.STOPPING, ExecutionStatus.STOPPED):
        status, reason = ExecutionStatus.STOPPED, f"{stopped}."
    final = step_writes.end(services, record.id, status, reason)
    outputs = {}
    if final.status.is_successful:
        outputs = services.versions.outputs_of(store, final)
    return StepOutcome(name, final.status, outputs, final, reason=final.status_reason)


__all__ = ["NOT_CALLED_AGAIN", "ResumedSteps", "end_lost"]
