"""The orchestrator Job's active deadline, as its pod learns of it: a SIGTERM.

When a Job's ``activeDeadlineSeconds`` (counted from its ``status.startTime``) passes, the Job
controller deletes its pods: the orchestrator pod gets SIGTERM, as on any deletion (``kubectl
delete pod``, a drain), which the run loop takes as a graceful stop. Owns
:class:`DeadlineSignal`: while the run loop runs, a SIGTERM that comes at or past the Job's
deadline (by this pod's clock, with :data:`CLOCK_SKEW_SECONDS` of tolerance for the control
plane's) raises :class:`OrchestratorDeadlineExceeded` in the main thread instead: the run loop
then ends the run failed, naming the deadline, and cancels its step Jobs. Any other SIGTERM goes
to the run loop's own handler (:class:`~wharf.execution.signals.RunSignals`) as before.

Invariants: only Python's default SIGTERM handler, in the main thread, is ever replaced, and it
is given back on exit; without a deadline on the Job nothing changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from wharf.integrations.kubernetes.orchestrator_sigterm import SigtermClaim

CLOCK_SKEW_SECONDS = 5.0
"""How far this pod's clock may trail the Job controller's: a SIGTERM this close before the
deadline is the deadline's too."""


class OrchestratorDeadlineExceeded(BaseException):
    """The orchestrator Job's active deadline passed (its pod got SIGTERM for it). A
    ``BaseException``, as ``KeyboardInterrupt``: no ``except Exception`` of the engine takes it
    for a failure of its own; its ``repr`` is its message (the run loop's failure reason shows
    it)."""

    def __repr__(self) -> str:
        return str(self)


def job_deadline(job: Mapping[str, Any]) -> datetime | None:
    """When ``job``'s ``activeDeadlineSeconds`` passes (None: no deadline, or not started)."""
    seconds = (job.get("spec") or {}).get("activeDeadlineSeconds")
    started = (job.get("status") or {}).get("startTime")
    if seconds is None or not started:
        return None
    start = datetime.fromisoformat(str(started).replace("Z", "+00:00"))
    return start + timedelta(seconds=int(seconds))


def deadline_reason(job: Mapping[str, Any]) -> str:
    """The run's failure reason once ``job`` (the orchestrator Job) passed its deadline."""
    name = (job.get("metadata") or {}).get("name")
    seconds = (job.get("spec") or {}).get("activeDeadlineSeconds")
    return (
        f"The orchestrator Job {name} passed its active deadline (active_deadline_seconds: "
        f"{seconds} s, DeadlineExceeded): Kubernetes stopped the orchestrator pod."
    )


class DeadlineSignal(SigtermClaim):
    """A context in which a SIGTERM at or past the deadline of ``job`` (this pod's Job)
    raises :class:`OrchestratorDeadlineExceeded` in the main thread (once; a later one is
    taken and ignored: the run is ending already), through a
    :func:`~wharf.execution.signals.sigterm_hook`: inside the run loop as before it, so that a
    deadline that passes while the pod still prepares the run fails it too. An earlier SIGTERM
    is not this context's: the run loop's handler takes it (a graceful stop), or outside the
    run loop it ends the process as by default. ``clock``: seconds since the epoch
    (``time.time``)."""

    def __init__(self, job: Mapping[str, Any], clock: Callable[[], float] = time.time) -> None:
        self._job = job
        self._deadline = job_deadline(job)
        self._clock = clock
        super().__init__(hooked=self._deadline is not None)

    @property
    def exceeded(self) -> bool:
        """Whether a SIGTERM at the deadline came (and raised)."""
        return self.taken

    def passed(self) -> bool:
        """Whether the Job's deadline passed (within :data:`CLOCK_SKEW_SECONDS`)."""
        if self._deadline is None:
            return False
        return self._clock() >= self._deadline.timestamp() - CLOCK_SKEW_SECONDS

    def _claims(self) -> bool:
        return self.passed()

    def _error(self) -> BaseException:
        return OrchestratorDeadlineExceeded(deadline_reason(self._job))
