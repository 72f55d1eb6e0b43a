"""A pipeline call whose run ended failed raises :class:`RunFailedError`, with the user's own
exception chained where it was raised in this process (kept by a :class:`FailureWatch`, since
the engine records only its text). A run ended ``stopped`` (or anything but ``failed``) raises
nothing. The engine leaves the traceback of a step's last failed attempt here to the watch
(``CALLER_SHOWS_STEP_ERROR``), which shows it once: chained, else logged at the run's end.
Invariant: the error's message stays readable whatever failed: it names at most
:data:`LISTED_STEPS` failed steps, each reason cut to :data:`REASON_CHARACTERS`, and says how
many it left out; ``step_reasons`` holds up to :data:`MAX_PAGE_SIZE` of them, in full.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepExecutionError, WharfError
from wharf.core.paging import MAX_PAGE_SIZE
from wharf.core.step_interface import StepInterface
from wharf.execution.attempt_ends import describe_exception
from wharf.execution.dynamic import CALLER_RAISES_BODY_ERROR
from wharf.execution.step_like import StepLike
from wharf.execution.step_runner import CALLER_SHOWS_STEP_ERROR
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter
from wharf.store.ports import Store

logger = logging.getLogger(__name__)

LISTED_STEPS = 20
"""The most failed steps a :class:`RunFailedError`'s message names, one line each (a sweep of
thousands of failed steps would otherwise print a message of megabytes)."""
REASON_CHARACTERS = 500
"""The most characters of a reason that message shows (a step's reason is its error's text,
of any length); ``step_reasons`` holds them whole."""


def _cut(reason: str) -> str:
    if len(reason) <= REASON_CHARACTERS:
        return reason
    return f"{reason[:REASON_CHARACTERS]}... ({len(reason) - REASON_CHARACTERS} more characters)"


class RunFailedError(WharfError):
    """A pipeline run ended failed. ``run`` is the run as recorded; ``step_reasons`` maps each
    failed step to its reason (empty when the run failed outside any step, e.g. in a dynamic
    pipeline's body), the first :data:`MAX_PAGE_SIZE` of them (``failed_steps``: how many
    failed in all). Where the failure was raised in this process (an inline step, a dynamic
    body), that exception is chained as ``__cause__``."""

    def __init__(
        self,
        run: PipelineRunRecord,
        step_reasons: dict[str, str],
        failed_steps: int | None = None,
    ) -> None:
        self.run = run
        self.step_reasons = dict(step_reasons)
        self.failed_steps = max(failed_steps or 0, len(self.step_reasons))
        reason = _cut(run.status_reason or "no reason recorded")
        lines = [f"Pipeline run '{run.name}' failed: {reason}"]
        listed = list(self.step_reasons.items())[:LISTED_STEPS]
        lines += [f"  step '{name}': {_cut(reason)}" for name, reason in listed]
        left_out = self.failed_steps - len(listed)
        if left_out:
            lines.append(
                f"  ... and {left_out} more failed step{'s' if left_out > 1 else ''} "
                f"({self.failed_steps} in all)"
            )
        logs = f"; each step's output and traceback: `wharf runs logs {run.id}`" if listed else ""
        lines.append(f"  (see `wharf runs show {run.id}`{logs})")
        super().__init__("\n".join(lines))


class _WatchedStep:
    """A step as the engine sees it (``StepLike``), whose exceptions are kept by name."""

    def __init__(self, func: Callable[..., Any], interface: StepInterface) -> None:
        self.func = func
        self.interface = interface


@dataclass
class FailureWatch:
    """What the user's code raised in this process during one pipeline call: it wraps the step
    lookup used in this process (:meth:`steps`) and a dynamic pipeline's body (:meth:`body`)."""

    step_errors: dict[str, BaseException] = field(default_factory=dict)
    body_error: BaseException | None = None
    shown_here: list[tuple[str, BaseException]] = field(default_factory=list)
    """The step errors whose traceback the engine left to :meth:`check`, with their step."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def steps(
        self, resolve: Callable[[StepSpec], StepLike], raises: bool = False
    ) -> Callable[[StepSpec], StepLike]:
        """``resolve`` whose steps keep the exception of their last failed attempt; ``raises``:
        the call raises it again (chained), so the engine leaves its traceback here."""

        def resolve_watched(spec: StepSpec) -> StepLike:
            step = resolve(spec)
            func = step.func

            @functools.wraps(func)
            def call(*args: Any, **kwargs: Any) -> Any:
                try:
                    return func(*args, **kwargs)
                except Exception as exc:
                    with self._lock:
                        self.step_errors[spec.name] = exc
                    raise

            return _WatchedStep(call, step.interface)

        if raises:
            setattr(resolve_watched, CALLER_SHOWS_STEP_ERROR, self._take_over)
        return resolve_watched

    def _take_over(self, error: BaseException) -> bool:
        with self._lock:
            for name, kept in self.step_errors.items():
                if kept is error:
                    self.shown_here.append((name, error))
                    return True
        return False

    def body(self, function: Callable[..., Any], raises: bool) -> Callable[..., Any]:
        """A dynamic pipeline's ``function`` whose exception is kept; ``raises``: the call
        raises it again (chained), so the engine need not log its traceback."""

        def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except (Exception, SystemExit) as exc:  # sys.exit fails the run like an error
                self.body_error = exc
                raise

        setattr(watched, CALLER_RAISES_BODY_ERROR, raises)
        return watched

    def check(self, store: Store, run: PipelineRunRecord) -> None:
        """Raise :class:`RunFailedError` if ``run`` (as recorded at its end) failed, with the
        failed steps' reasons read from the store and the exception kept here chained as
        ``__cause__`` (a dynamic body's first, else the first failed step's)."""
        if run.status is not ExecutionStatus.FAILED:
            self._log_shown_here(None)
            return
        failed = store.steps.list(
            StepRunFilter(run_id=run.id, status=ExecutionStatus.FAILED),
            PageRequest(sort="asc", size=MAX_PAGE_SIZE),
        )
        reasons = {s.name: s.status_reason or "failed" for s in failed.items}
        error = RunFailedError(run, reasons, failed.total)
        cause = self._cause(list(reasons))
        self._log_shown_here(cause)
        raise error from cause

    def _log_shown_here(self, cause: BaseException | None) -> None:
        """Log the tracebacks left here but not chained as ``cause``."""
        for name, error in self.shown_here:
            if error is not cause:
                logger.error(
                    "Step '%s' failed: %s", name, describe_exception(error), exc_info=error
                )

    def _cause(self, failed_steps: list[str]) -> BaseException | None:
        body = self.body_error
        if body is not None and not isinstance(body, StepExecutionError):
            return body
        with self._lock:
            for name in failed_steps:
                if name in self.step_errors:
                    return self.step_errors[name]
        return body
