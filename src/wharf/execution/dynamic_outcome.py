"""How a dynamic run ended, and the errors its step calls raise when another step failed.

Owns :class:`DynamicOutcome` (the run's final status and reason, from its steps and its
function), the step-call errors of a run's execution mode (:class:`StepHaltedError`: a step
not started, or stopped by ``fail_fast``, because another step failed) and how a pipeline
function that raised or exited is told (:func:`what_the_body_did`), :class:`StepFailedError`
(a called step, or a submitted one waited for, failed) and how the run tells one the function
did not catch (:func:`uncaught_failure`), and :class:`UpstreamNotSucceededError` (a step not
started because a step it waits for did not succeed, in any execution mode). Invariant: a step
halted by another's failure is never the run's reason; the failed step is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepExecutionError
from wharf.execution.attempt_ends import describe_exception
from wharf.execution.lost_resources import lost_resources, reclaimed_resources, stopped_steps
from wharf.execution.step_outcome import StepOutcome, failed_steps_reason


@dataclass
class DynamicOutcome:
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    stop_requested: bool = False
    error: str | None = None
    diverged: str | None = None
    """Why a resumed run's replayed function did not make the earlier process's calls."""

    def final_status(self) -> tuple[ExecutionStatus, str | None]:
        if self.stop_requested:
            return ExecutionStatus.STOPPED, "Stopped on request."
        if self.diverged is not None:
            return ExecutionStatus.FAILED, self.diverged
        if self.error is not None:
            return ExecutionStatus.FAILED, self.error
        failed = failed_steps_reason(self.steps)
        if failed is not None:
            return ExecutionStatus.FAILED, failed
        lost = lost_resources((n, o.status, o.reason) for n, o in self.steps.items())
        if lost is not None:
            return ExecutionStatus.FAILED, lost
        reclaimed = reclaimed_resources((n, o.status, o.reason) for n, o in self.steps.items())
        if reclaimed is not None:
            return ExecutionStatus.STOPPED, reclaimed
        stopped = stopped_steps((n, o.status, o.reason) for n, o in self.steps.items())
        if stopped is not None:
            return ExecutionStatus.STOPPED, stopped
        return ExecutionStatus.COMPLETED, None


class StepHaltedError(StepExecutionError):
    """A step call cut short because another step of the run failed (in a run whose execution
    mode halts on a failure), or did not succeed where the step waited for it; that step is
    the run's reason, not this."""


class StepNotStartedError(StepHaltedError):
    """A submitted step still waiting for a thread of the run's pool when another step of the
    run failed, in a run whose execution mode starts no waiting steps then."""


class StepStoppedByFailureError(StepHaltedError):
    """A step running when another step of the run failed, in a ``fail_fast`` run: it was
    interrupted, as a static pipeline's running steps are, and ended stopped."""


class StepFailedError(StepExecutionError):
    """Step ``step`` failed with ``reason`` (its step run's): raised by its call, or by its
    future's ``result()``/``load()`` if it was submitted. The message is the step's failure as
    the function may catch it; one the function lets through is the run's reason as
    :func:`uncaught_failure` words it."""

    def __init__(self, step: str, reason: str | None) -> None:
        super().__init__(f"Step '{step}' failed: {reason}")
        self.step = step
        self.reason = reason

    def __reduce__(self) -> tuple[type[StepFailedError], tuple[str, str | None]]:
        return type(self), (self.step, self.reason)


def uncaught_failure(error: StepFailedError) -> str:
    """The run's reason when its pipeline function let ``error`` through: which step failed,
    that the function did not catch its failure, and the step's own reason (a caught failure
    leaves the run's reason to the steps: ``Step(s) failed: NAME.``)."""
    why = f": {error.reason}" if error.reason else "."
    return f"Step '{error.step}' failed (the pipeline function did not catch it){why}"


class UpstreamNotSucceededError(StepHaltedError):
    """A step not started because a step it runs after (``after=``) or takes an output of
    failed, was stopped or was not started itself, as a static pipeline's step never starts
    after its upstream step failed; it gets no step run, as there."""


def what_the_body_did(exc: Exception | SystemExit) -> str:
    """How a pipeline function ended the run, as a phrase after "The pipeline function":
    "raised: ValueError: …", or for ``sys.exit`` "exited with code 3" (``sys.exit()``: code 0;
    ``sys.exit("bad config")``: "exited (sys.exit): bad config")."""
    if not isinstance(exc, SystemExit):
        return f"raised: {describe_exception(exc)}"
    if exc.code is None or isinstance(exc.code, int):
        return f"exited with code {exc.code or 0} (sys.exit)"
    return f"exited (sys.exit): {exc.code}"


__all__ = [
    "DynamicOutcome",
    "StepFailedError",
    "StepHaltedError",
    "StepNotStartedError",
    "StepStoppedByFailureError",
    "UpstreamNotSucceededError",
    "uncaught_failure",
    "what_the_body_did",
]
