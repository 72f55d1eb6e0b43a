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

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from types import FrameType, TracebackType
from typing import Any

from wharf.execution.signals import RunSignals

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


class DeadlineSignal:
    """A context in which a SIGTERM at or past the deadline of ``job`` (this pod's Job)
    raises :class:`OrchestratorDeadlineExceeded` (once); an earlier one goes to the run loop's
    handler, or without one (outside the run loop) ends the process as by default.
    ``clock``: seconds since the epoch (``time.time``)."""

    def __init__(self, job: Mapping[str, Any], clock: Callable[[], float] = time.time) -> None:
        self._job = job
        self._deadline = job_deadline(job)
        self._clock = clock
        self._installed = False
        self.exceeded = False

    def __enter__(self) -> DeadlineSignal:
        main = threading.current_thread() is threading.main_thread()
        default = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        if self._deadline is not None and main and default:
            signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            self._installed = False

    def passed(self) -> bool:
        """Whether the Job's deadline passed (within :data:`CLOCK_SKEW_SECONDS`)."""
        if self._deadline is None:
            return False
        return self._clock() >= self._deadline.timestamp() - CLOCK_SKEW_SECONDS

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.passed():
            if not self.exceeded:  # a second SIGTERM: the run is ending already
                self.exceeded = True
                raise OrchestratorDeadlineExceeded(deadline_reason(self._job))
            return
        run_loops = signal.getsignal(signal.SIGINT)  # the run loop takes both signals alike
        if isinstance(getattr(run_loops, "__self__", None), RunSignals) and callable(run_loops):
            run_loops(signum, frame)
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
