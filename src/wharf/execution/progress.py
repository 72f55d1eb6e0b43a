"""Progress of a run as events: what the engine already knows, told to listeners as it happens.

Owns :class:`ProgressReporter` (``RunServices.progress``, called by the engine at each moment
of a run and its steps), :class:`ProgressEvent` and :class:`LogListener` (the usual listener,
on the ``wharf.progress`` logger). Invariants: a reporter never reads the store, so an event
costs no round trip; a reporter without listeners does nothing (step processes get one: the
orchestrating process reports their events); the final summary counts the step events this
reporter told for the run; a step's end is told once, before the summary (a forced stop's
and its waiter's alike).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from wharf.config.settings import ResourceSettings
from wharf.core.enums import ExecutionStatus, StepRuntime
from wharf.execution.lost_resources import RESOURCES_RECLAIMED
from wharf.store.models import PipelineRunRecord

PROGRESS_LOGGER = "wharf.progress"
logger = logging.getLogger(PROGRESS_LOGGER)

_POOL = re.compile(r"pool '([^']+)'")
_ENDED_LEVEL = {
    ExecutionStatus.COMPLETED: logging.INFO,
    ExecutionStatus.FAILED: logging.ERROR,
    ExecutionStatus.STOPPED: logging.WARNING,
    ExecutionStatus.CANCELLED: logging.WARNING,
}
_SUMMARY_ORDER = ("completed", "cached", "failed", "stopped", "cancelled", "retried")


@dataclass(frozen=True)
class ProgressEvent:
    """One thing that happened to a run or one of its steps, with what a reader needs."""

    event: str
    """``run_started``, ``step_started``, ``step_cached``, ``step_waiting``, ``step_retrying``,
    ``step_completed``, ``step_failed``, ``step_stopped``, ``step_cancelled``, ``run_finished``."""
    run: str
    """The run's name (its id when the reporter never saw the run start)."""
    run_id: UUID
    message: str
    """The event as one line of text."""
    level: int = logging.INFO
    step: str | None = None
    status: str | None = None
    duration_s: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    """Further facts by event: runtime, attempt, max_attempts, placement, from_run_id, pool,
    demands, reason, retry_in_s, counts, pipeline."""

    def fields(self) -> dict[str, Any]:
        """The event as a flat JSON-ready object (None values left out)."""
        data: dict[str, Any] = {
            "event": self.event,
            "run": self.run,
            "run_id": str(self.run_id),
            "step": self.step,
            "status": self.status,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 3),
            **self.details,
        }
        return {k: v for k, v in data.items() if v is not None}


ProgressListener = Callable[[ProgressEvent], None]


class LogListener:
    """Logs each event on the ``wharf.progress`` logger at the event's level, one line per
    event (the event rides on the record as ``wharf_event`` for structured output:
    ``progress_logging``); events that the logger would drop are not even built
    (:meth:`wants`)."""

    def wants(self, level: int) -> bool:
        return logger.isEnabledFor(level)

    def __call__(self, event: ProgressEvent) -> None:
        logger.log(event.level, "%s", event.message, extra={"wharf_event": event})


def first_line(text: str | None) -> str | None:
    if not text:
        return None
    return text.strip().splitlines()[0] if text.strip() else None


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def describe_demands(settings: ResourceSettings) -> str:
    """What a step asks for, e.g. ``2 CPU, 4GiB memory, 1 license``."""
    parts = [f"{d.quantity:g} {d.name}" for d in settings.normalized_resources]
    if settings.gpu_count:
        gpu_class = f" {settings.gpu_class}" if settings.gpu_class else ""
        parts.append(f"{settings.gpu_count}{gpu_class} GPU")
    if settings.cpu_count is not None:
        parts.append(f"{settings.cpu_count:g} CPU")
    if settings.memory is not None:
        parts.append(f"{settings.memory} memory")
    return ", ".join(parts)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def _where(runtime: StepRuntime, placement: str | None) -> str:
    if runtime is not StepRuntime.ISOLATED:
        return "inline"
    return placement or "in its own process"


FINISHED_KEPT = 1000
"""How many finished runs a reporter remembers (late step ends of older ones are told)."""


@dataclass
class _Tally:
    name: str
    counts: Counter[str] = field(default_factory=Counter)
    ended: set[str] = field(default_factory=set)
    """The steps whose end was told."""


class ProgressReporter:
    """Tells ``listeners`` about a run's progress; without listeners, a no-op."""

    def __init__(self, listeners: Sequence[ProgressListener] = ()) -> None:
        """A listener with a ``wants(level)`` method is told only of the events it wants."""
        self._listeners = tuple(listeners)
        self._wants: tuple[Callable[[int], bool] | None, ...] = tuple(
            getattr(listener, "wants", None) for listener in self._listeners
        )
        self._lock = threading.Lock()
        self._runs: dict[UUID, _Tally] = {}
        self._finished: OrderedDict[UUID, None] = OrderedDict()
        """The last :data:`FINISHED_KEPT` runs whose summary was told: a step end told late (a
        waiter a forced stop left behind) is not told again after it."""

    @property
    def active(self) -> bool:
        return bool(self._listeners)

    def _wanted(self, run_id: UUID, level: int, count: str | None = None) -> bool:
        """Count the event for its run's summary (as ``count``); whether any listener wants
        to be told of it (if none does, the event is not built)."""
        if not self._listeners:
            return False
        if count is not None:
            with self._lock:
                tally = self._runs.get(run_id)
                if tally is not None:
                    tally.counts[count] += 1
        return any(wants is None or wants(level) for wants in self._wants)

    def _tell(self, event: ProgressEvent) -> None:
        for listener, wants in zip(self._listeners, self._wants, strict=True):
            if wants is None or wants(event.level):
                listener(event)

    def _first_end(self, run_id: UUID, step: str) -> bool:
        """Whether this is the first end told of ``step`` in the run (noted if so)."""
        with self._lock:
            if run_id in self._finished:
                return False
            tally = self._runs.get(run_id)
            if tally is None:
                return True
            if step in tally.ended:
                return False
            tally.ended.add(step)
            return True

    def _run_name(self, run_id: UUID) -> str:
        tally = self._runs.get(run_id)
        return tally.name if tally is not None else str(run_id)

    # ------------------------------------------------------------------ run

    def run_started(self, run: PipelineRunRecord, pipeline: str) -> None:
        if not self._listeners:
            return
        with self._lock:
            self._runs[run.id] = _Tally(run.name)
        if not self._wanted(run.id, logging.INFO):
            return
        message = f"Run '{run.name}' of pipeline '{pipeline}' started."
        self._tell(
            ProgressEvent(
                "run_started",
                run.name,
                run.id,
                message,
                status=run.status.value,
                details={"pipeline": pipeline},
            )
        )

    def run_finished(self, run: PipelineRunRecord) -> None:
        """The summary line of ``run`` as it ended (its counts: the step events of the run)."""
        if not self._listeners:
            return
        with self._lock:
            tally = self._runs.pop(run.id, None)
            self._finished[run.id] = None
            if len(self._finished) > FINISHED_KEPT:  # a long-lived process runs many runs
                self._finished.popitem(last=False)
        level = _ENDED_LEVEL.get(run.status, logging.INFO)
        if not self._wanted(run.id, level):
            return
        counts = tally.counts if tally is not None else Counter[str]()
        duration = _seconds(run.start_time or run.created, run.end_time)
        summary = ", ".join(f"{counts[k]} {k}" for k in _SUMMARY_ORDER if counts[k])
        took = f" in {format_duration(duration)}" if duration is not None else ""
        reason = first_line(run.status_reason) if not run.status.is_successful else None
        message = f"Run '{run.name}' {run.status.value}{took}: {summary or 'no steps'}."
        if reason:
            message += f" {reason}"
        details: dict[str, Any] = {"counts": {k: counts[k] for k in _SUMMARY_ORDER if counts[k]}}
        if reason:
            details["reason"] = reason
        self._tell(
            ProgressEvent(
                "run_finished",
                run.name,
                run.id,
                message,
                level=level,
                status=run.status.value,
                duration_s=duration,
                details=details,
            )
        )

    # ------------------------------------------------------------------ steps

    def step_started(
        self,
        run_id: UUID,
        step: str,
        runtime: StepRuntime,
        attempt: int,
        max_attempts: int,
        placement: str | None = None,
    ) -> None:
        """``placement``: where an isolated attempt runs, as its backend says (``as Kubernetes
        Job JOB (namespace NS)``); None: "in its own process"."""
        if not self._wanted(run_id, logging.INFO):
            return
        where = _where(runtime, placement)
        if attempt > 1:
            text = f"(attempt {attempt} of {max_attempts}, {where})"
        else:
            text = where if runtime is StepRuntime.ISOLATED else f"({where})"
        self._tell(
            ProgressEvent(
                "step_started",
                self._run_name(run_id),
                run_id,
                f"Step '{step}' started {text}.",
                step=step,
                status=ExecutionStatus.RUNNING.value,
                details={
                    "runtime": runtime.value,
                    "attempt": attempt,
                    "max_attempts": max_attempts,
                    "placement": placement if runtime is StepRuntime.ISOLATED else None,
                },
            )
        )

    def step_cached(self, run_id: UUID, step: str, from_run_id: UUID) -> None:
        if not self._wanted(run_id, logging.INFO, "cached"):
            return
        self._tell(
            ProgressEvent(
                "step_cached",
                self._run_name(run_id),
                run_id,
                f"Step '{step}' cached (from run {from_run_id.hex[:8]}).",
                step=step,
                status=ExecutionStatus.CACHED.value,
                details={"from_run_id": str(from_run_id)},
            )
        )

    def step_waiting(
        self, run_id: UUID, step: str, settings: ResourceSettings, reason: str | None
    ) -> None:
        if not self._wanted(run_id, logging.INFO):
            return
        demands = describe_demands(settings)
        found = _POOL.search(reason or "")
        pool = found.group(1) if found else None
        where = f" in pool '{pool}'" if pool else ""
        why = f" ({reason.strip()})" if reason and reason.strip() else ""
        self._tell(
            ProgressEvent(
                "step_waiting",
                self._run_name(run_id),
                run_id,
                f"Step '{step}' waiting for resources{where}: {demands}{why}",
                step=step,
                status=ExecutionStatus.QUEUED.value,
                details={"pool": pool, "demands": demands, "reason": reason},
            )
        )

    def step_retrying(
        self,
        run_id: UUID,
        step: str,
        attempt: int,
        max_attempts: int,
        reason: str | None,
        retry_in: float,
    ) -> None:
        if not self._wanted(run_id, logging.WARNING, "retried"):
            return
        error = first_line(reason)
        after = f" in {format_duration(retry_in)}" if retry_in > 0 else ""
        # A reclaimed attempt was cancelled, never failed (docs/resources.md).
        ended = "was cancelled" if error and RESOURCES_RECLAIMED in error else "failed"
        self._tell(
            ProgressEvent(
                "step_retrying",
                self._run_name(run_id),
                run_id,
                f"Step '{step}' attempt {attempt} of {max_attempts} {ended}, retrying{after}: "
                f"{error or 'no reason given'}",
                level=logging.WARNING,
                step=step,
                status=ExecutionStatus.RETRYING.value,
                details={
                    "attempt": attempt,
                    "max_attempts": max_attempts,
                    "reason": error,
                    "retry_in_s": retry_in,
                },
            )
        )

    def step_ended(
        self,
        run_id: UUID,
        step: str,
        status: ExecutionStatus,
        reason: str | None = None,
        started: datetime | None = None,
        ended: datetime | None = None,
    ) -> None:
        """Step ``step`` ended with ``status`` (completed, failed, stopped, cancelled);
        ``started``/``ended`` as recorded give its duration. Told once per step of a run."""
        if not self._first_end(run_id, step):
            return
        level = _ENDED_LEVEL.get(status, logging.WARNING)
        if not self._wanted(run_id, level, status.value):
            return
        duration = _seconds(started, ended)
        took = f" in {format_duration(duration)}" if duration is not None else ""
        error = None if status is ExecutionStatus.COMPLETED else first_line(reason)
        why = f": {error}" if error else "."
        self._tell(
            ProgressEvent(
                f"step_{status.value}",
                self._run_name(run_id),
                run_id,
                f"Step '{step}' {status.value}{took}{why}",
                level=level,
                step=step,
                status=status.value,
                duration_s=duration,
                details={"reason": error},
            )
        )
