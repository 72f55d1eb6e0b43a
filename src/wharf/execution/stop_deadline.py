"""How long an isolated step's process may take to end once it is cancelled, and the cut-off.

Owns :class:`StopDeadline` and the stop grace (:func:`stop_grace_from_env`: the step's
``WHARF_STEP_STOP_GRACE``, set by the Kubernetes step backend from ``pod_stop_grace_period`` and
by the local-process backend from its component's ``stop_grace_period``; without it
:data:`DEFAULT_STOP_GRACE_SECONDS`, as when a step's orchestrator is gone:
``wharf.execution.parent_watch``). Invariant: exactly one of the step's own end
(:meth:`StopDeadline.settle`) and the cut-off happens; a step whose user code returned in time
is never cut off, even while it publishes its outputs.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping

from wharf.core.errors import InputError
from wharf.execution.parent_watch import DEFAULT_GRACE_SECONDS

logger = logging.getLogger(__name__)

STOP_GRACE_ENV = "WHARF_STEP_STOP_GRACE"
"""Seconds a cancelled step's process has to end (its pod's or its component's stop grace)."""
DEFAULT_STOP_GRACE_SECONDS = DEFAULT_GRACE_SECONDS
MAX_STOP_GRACE_SECONDS = 1e9
"""Longest grace timed (about 31 years): a longer one (``pod_stop_grace_period`` takes any
int64) is the same in practice, and the waits that time it overflow far below int64."""
BACKSTOP_SECONDS = 5.0
"""How long after the grace the C-level backstop exits a process whose Python threads could not
run (native code holding the GIL)."""
RECORDING_SECONDS = 60.0
"""How long the cut-off may take to record the attempt's end before the backstop exits anyway."""
EXIT_CODE = 1
"""The exit code of a cut-off process (the attempt did not complete)."""


def stop_grace_from_env(environ: Mapping[str, str]) -> float:
    """The stop grace ``environ`` sets (:data:`STOP_GRACE_ENV`), else the default."""
    text = environ.get(STOP_GRACE_ENV, "").strip()
    if not text:
        return DEFAULT_STOP_GRACE_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"{STOP_GRACE_ENV} must be a number of seconds >= 0, got {text!r}.")
    return min(seconds, MAX_STOP_GRACE_SECONDS)


class StopDeadline:
    """Cuts off a cancelled step's user code that does not return within ``grace`` seconds.

    A step is cancelled (``cancelling``) when the Resource Manager reclaims its allocation or
    its request ends: its heartbeat interrupts the user code at its next safe point
    (``wharf.execution.attempts.heartbeat_for``). User code that ignores the interrupt is cut
    off once the grace has passed: the deadline records the attempt's end as any interrupted
    attempt's (``give_up(reason)``: retrying or cancelled, its request released) and exits the
    process at once (``exit_process``; tests pass one that returns), so its pod ends too and
    the allocation is free. Native code that holds the GIL keeps the deadline's thread from
    running: a C-level backstop (``backstop``: ``faulthandler``) then writes the threads'
    stacks to the step's log and exits the process :data:`BACKSTOP_SECONDS` later; the engine
    records the attempt lost and releases its request."""

    def __init__(
        self,
        grace: float,
        give_up: Callable[[str], object],
        *,
        exit_process: Callable[[int], None] = os._exit,
        backstop: bool = True,
    ) -> None:
        self.grace = min(grace, MAX_STOP_GRACE_SECONDS)
        self._give_up = give_up
        self._exit = exit_process
        self._backstop = backstop
        self._lock = threading.Lock()
        self._returned = threading.Event()
        self._armed = False
        self._settled = False
        self.cut_off = False
        """The grace passed before the user code returned: the attempt's end was recorded here."""

    def arm(self, reason: str) -> None:
        """The step was cancelled (``reason``): its grace starts now (once; later calls and
        calls after :meth:`settle` do nothing)."""
        with self._lock:
            if self._armed or self._settled:
                return
            self._armed = True
            if self._backstop:
                _arm_backstop(self.grace + BACKSTOP_SECONDS)
        threading.Thread(
            target=self._expire, args=(reason,), name="wharf-stop-deadline", daemon=True
        ).start()

    def settle(self) -> bool:
        """The user code returned: whether the step may record its own end (False once it was
        cut off; in a real process the cut-off exits first, so this then never returns)."""
        with self._lock:
            self._settled = True
            self._returned.set()
            if self._armed and self._backstop and not self.cut_off:
                faulthandler.cancel_dump_traceback_later()  # the step ends by itself
            return not self.cut_off

    def _expire(self, reason: str) -> None:
        if self._returned.wait(self.grace):
            return
        with self._lock:  # held until the exit: the step's own end waits in settle()
            if self._settled:
                return
            self.cut_off = True
            if self._backstop:  # this thread runs: bound the recording instead
                _arm_backstop(RECORDING_SECONDS)
            logger.error(
                "The step did not stop within %g s of being cancelled (%s); ending its process.",
                self.grace,
                reason,
            )
            try:
                self._give_up(reason)
            except Exception:
                logger.exception("Could not record the end of the cancelled step.")
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            self._exit(EXIT_CODE)


def _arm_backstop(seconds: float) -> None:
    """Exit the process in ``seconds`` from a C-level thread (replacing any earlier backstop)."""
    try:
        faulthandler.dump_traceback_later(seconds, exit=True)
    except (OSError, RuntimeError, ValueError, AttributeError) as exc:  # stderr has no file
        logger.warning("No backstop for the step's stop deadline: %s", exc)
