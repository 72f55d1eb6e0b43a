"""The lost-orchestrator sweep: runs whose orchestrating process is gone end failed.

A run's orchestrating process beats (``RunRepository.update_heartbeat``); the run is lost when
its heartbeat deadline passed, or at once when its process ran on this machine and is gone
(pid dead, or reused by another process: ``wharf.store.process_identity``). A run past its
deadline whose process this machine sees alive (its beating thread starved) is spared. No
daemon runs the sweep: every pipeline run sweeps when it starts and while it beats, ``Client``
reads and stops of runs sweep, and the workspace server sweeps periodically. Each sweep is one
indexed read when nothing is lost.

Invariant: the steps a sweep ends give back their Resource Manager requests: the step runs
paired with a Resource Manager release them (the embedded store's, or the step-resource service
the workspace server passes as ``steps``); a store reached over REST has its server do it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable
from uuid import UUID

from wharf.store.models import LostRun, StepRunRecord
from wharf.store.ports import StepRunRepository, Store
from wharf.store.process_identity import is_gone, is_ours, this_host

logger = logging.getLogger(__name__)


@runtime_checkable
class ReleasesEnded(Protocol):
    """Step runs paired with a Resource Manager
    (:class:`wharf.execution.resources.paired_steps.ResourceAwareStepRuns`): told of steps that
    another call ended, they release their requests."""

    def updated(self, record: StepRunRecord) -> StepRunRecord: ...


def sweep_lost_runs(
    store: Store, now: datetime | None = None, *, steps: StepRunRepository | None = None
) -> list[LostRun]:
    """End the runs of ``store`` whose orchestrating process is gone; those it ended.
    ``steps``: the step runs told of the steps it ended (default ``store.steps``)."""
    now = now or datetime.now(UTC)
    candidates = store.runs.list_sweep_candidates(now, this_host())
    if not candidates:
        return []
    orphaned: list[UUID] = []
    spared: list[UUID] = []
    expired = False
    for run in candidates:
        process = (run.orchestrator_host, run.orchestrator_pid, run.orchestrator_start)
        if is_gone(*process):
            orphaned.append(run.id)
        elif run.heartbeat_deadline is not None and run.heartbeat_deadline < now:
            if is_ours(*process):
                spared.append(run.id)  # late beats (a starved thread), yet alive: not lost
            else:
                expired = True
    if not orphaned and not expired:
        return []
    return end_lost_runs(store, now, orphaned, spared, steps=steps)


def end_lost_runs(
    store: Store,
    now: datetime,
    orphaned: Sequence[UUID] = (),
    spared: Sequence[UUID] = (),
    *,
    steps: StepRunRepository | None = None,
) -> list[LostRun]:
    """``fail_lost_orchestrators`` on ``store``, then release the ended steps' requests through
    ``steps`` (default ``store.steps``) if it is paired with a Resource Manager."""
    lost = store.runs.fail_lost_orchestrators(now, orphaned, spared)
    steps = store.steps if steps is None else steps
    for ended in lost:
        logger.warning("Run %s ended failed: %s.", ended.run.name, ended.run.status_reason)
        if isinstance(steps, ReleasesEnded):
            for step in ended.steps:
                steps.updated(step)
    return lost


def sweep_quietly(store: Store, *, steps: StepRunRepository | None = None) -> None:
    """:func:`sweep_lost_runs` where a failure must not stop the caller (logged)."""
    try:
        sweep_lost_runs(store, steps=steps)
    except Exception as exc:
        logger.warning("Could not sweep runs whose orchestrator is gone: %s", exc)
