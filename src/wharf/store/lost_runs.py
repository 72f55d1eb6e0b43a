"""The lost-orchestrator sweep (:func:`sweep_lost_runs`): runs whose orchestrating process is gone
end failed. No daemon runs it: every pipeline run sweeps when it starts and while it beats,
``Client`` reads and stops of runs sweep, and the workspace server sweeps periodically.

Invariant: the steps a sweep ends give back their Resource Manager requests: the caller passes
a ``release`` callback (the embedded step-resources port's, or the workspace server's
step-resource service's), told of every step the sweep ended; a store reached over REST has its
server do it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from uuid import UUID

from wharf.core.errors import PermissionDeniedError
from wharf.store.answers import LostRun
from wharf.store.models import StepRunRecord
from wharf.store.ports import Store
from wharf.store.process_identity import is_gone, is_ours, this_host

logger = logging.getLogger(__name__)


ReleaseEnded = Callable[[StepRunRecord], object]
"""Told of a step run another call ended (a sweep, a forced stop): releases its request."""


def sweep_lost_runs(
    store: Store, now: datetime | None = None, *, release: ReleaseEnded | None = None
) -> list[LostRun]:
    """End the runs of ``store`` whose orchestrating process is gone; those it ended.
    ``release``: told of each step it ended (None: nothing to release here).

    A run is lost when its heartbeat deadline passed, or at once when its process ran on this
    machine and is gone (pid dead, or reused: ``wharf.store.process_identity``). A run past its
    deadline whose process this machine sees alive (its beating thread starved) is spared. When
    nothing is lost the sweep is one indexed read.
    """
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
    return end_lost_runs(store, now, orphaned, spared, release=release)


def end_lost_runs(
    store: Store,
    now: datetime,
    orphaned: Sequence[UUID] = (),
    spared: Sequence[UUID] = (),
    *,
    release: ReleaseEnded | None = None,
) -> list[LostRun]:
    """``fail_lost_orchestrators`` on ``store``, then tell ``release`` of each step it ended."""
    lost = store.runs.fail_lost_orchestrators(now, orphaned, spared)
    for ended in lost:
        logger.warning("Run '%s' ended failed: %s.", ended.run.name, ended.run.status_reason)
        if release is not None:
            for step in ended.steps:
                release(step)
    return lost


def sweep_quietly(store: Store, *, release: ReleaseEnded | None = None) -> bool:
    """:func:`sweep_lost_runs` where a failure must not stop the caller (logged). False when
    the store refused the sweep to this credential (a run-scoped token of a workspace server,
    which sweeps itself): sweeping again with it is pointless."""
    try:
        sweep_lost_runs(store, release=release)
    except PermissionDeniedError as exc:
        logger.debug("Not sweeping runs whose orchestrator is gone: %s", exc)
        return False
    except Exception as exc:
        logger.warning("Could not sweep runs whose orchestrator is gone: %s", exc)
    return True
