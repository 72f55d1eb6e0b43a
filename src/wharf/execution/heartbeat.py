"""The heartbeat worker: a thread per running step that tells the store the step is alive.

Owns :class:`HeartbeatWorker`, :class:`HeartbeatScheduler` (many steps' beats from one
thread) and :func:`beat_on_signal` (a step process beats at once on its orchestrator's signal);
the liveness timeout is ``wharf.config.liveness``'s (:func:`liveness_timeout_for`, importable
from here too). Invariants: a step keeps beating until its final status is recorded (the owner
calls ``stop()`` only then), even when asked to stop, unless the store refused its credential (a
revoked API key: beating again cannot succeed); ``on_stop`` and ``on_refused`` are each called
at most once; a failed beat never costs the step its liveness window. Time is injected
(``wait(seconds) -> bool``), so tests need no real sleeps.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from types import FrameType

from wharf.config.liveness import liveness_timeout_for as liveness_timeout_for  # noqa: PLC0414
from wharf.core.errors import CredentialsRefusedError
from wharf.execution.outages import refused
from wharf.store.answers import HeartbeatResponse
from wharf.store.models import StepRunRecord

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 15.0
FINISH_ON_RUN_STOP_ENV = "WHARF_STEP_FINISHES_ON_RUN_STOP"
"""``1`` in a step process's environment: a graceful stop of its run lets the step finish (set
by the Kubernetes orchestrator on its step pods); otherwise the stop interrupts it."""
FIRST_RETRY_FRACTION = 0.25
BEAT_NOW_SIGNAL = signal.SIGWINCH
"""The signal that makes a step process's heartbeat beat at once (its orchestrator sends it when
the run stops gracefully: ``LocalProcessBackend.beat_now``). Its default action is to ignore
it, so a process that has not yet installed :func:`beat_on_signal`'s handler is not harmed, and
a step's process has no terminal (its own session) to send it a real one."""


def stops_with_run(environ: Mapping[str, str]) -> bool:
    """Whether a step process with ``environ`` stops when its run stops gracefully."""
    return environ.get(FINISH_ON_RUN_STOP_ENV, "").strip() != "1"


def startup_allowance_granted(record: StepRunRecord, interval: float) -> bool:
    """Whether ``record``'s liveness window, as last recorded, is longer than the usual one for
    ``interval`` (by more than a second): the engine granted the attempt its backend's startup
    allowance with its first beat, and the step's own process should beat as it starts."""
    if record.last_heartbeat is None or record.heartbeat_deadline is None:
        return False
    window = (record.heartbeat_deadline - record.last_heartbeat).total_seconds()
    return window > liveness_timeout_for(interval) + 1.0


@dataclass
class HeartbeatStats:
    beats: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    stop_signalled: bool = False
    run_stop_seen: bool = False
    """A stopping run was seen by a worker that lets its step finish."""
    refused: bool = False
    """The store refused the step's credential: the worker beats no more."""


class HeartbeatWorker:
    """Beats for one step: every ``interval`` seconds it calls ``beat(liveness_timeout)``
    (``update_step_heartbeat``).

    The response carries the step's and its run's status; when either says stop or cancel,
    the worker calls ``on_stop`` (which interrupts the step's user code) once, and its stop
    listeners with every such response (a step's process arms its cut-off on a cancel:
    ``wharf.execution.stop_deadline``). With ``stops_with_run=False`` it heeds only the step's
    own status: a graceful stop of its run lets the step finish (a Kubernetes run's step
    pods). It keeps beating after a stop, because the step's shutdown (publishing outputs, the
    final status) must finish while the step is known to be alive. A failed beat is logged and
    retried sooner, with exponential backoff up to the interval (interval/4, /2, then every
    interval), so a briefly unreachable store never costs the step its liveness window, while
    an outage is not hammered. A beat refused the step's credential (401 or 403: revoked, or
    its permission withdrawn) is the last: the worker calls ``on_refused`` once and stops."""

    def __init__(
        self,
        name: str,
        beat: Callable[[float], HeartbeatResponse],
        on_stop: Callable[[HeartbeatResponse], None],
        interval: float = DEFAULT_INTERVAL_SECONDS,
        liveness_timeout: float | None = None,
        *,
        stops_with_run: bool = True,
        on_refused: Callable[[CredentialsRefusedError], None] | None = None,
    ) -> None:
        """``stops_with_run``: a stopping run stops the step too (else only a stop or cancel
        of the step itself does); ``on_refused``: told once when the store refuses the step's
        credential (it interrupts the step: its result could not be recorded)."""
        self.name = name
        self._on_refused = on_refused
        self._stops_with_run = stops_with_run
        self._beat = beat
        self._on_stop = on_stop
        self.interval = interval
        self.liveness_timeout = liveness_timeout or liveness_timeout_for(interval)
        self.stats = HeartbeatStats()
        self._stopped = threading.Event()
        self._wakes: SimpleQueue[bool] = SimpleQueue()
        """Wakes the loop's wait: :meth:`beat_now` and :meth:`stop` (safe in a signal handler)."""
        self._thread: threading.Thread | None = None
        self.last_response: HeartbeatResponse | None = None
        self.scheduled = True
        """False once removed from a :class:`HeartbeatScheduler`."""
        self._stop_listeners: list[Callable[[HeartbeatResponse], None]] = []
        self.attempt_ended = False
        """Set once the step's end is recorded (its log may still be stored, beating on)."""

    def add_stop_listener(self, listener: Callable[[HeartbeatResponse], None]) -> None:
        """Also call ``listener`` (after ``on_stop``) with every response that asks the step
        to stop (a run's stop may come first, a cancel later); it must not raise."""
        self._stop_listeners.append(listener)

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds`` or until woken (:meth:`beat_now`, :meth:`stop`); whether stopped."""
        try:
            self._wakes.get(timeout=max(seconds, 0.0))
            while True:  # several wakes at once make one beat
                self._wakes.get_nowait()
        except Empty:
            pass
        return self._stopped.is_set()

    def beat_now(self) -> None:
        """Make the loop beat at once instead of at the end of its wait (the run may be
        stopping). Takes no lock: safe in a signal handler."""
        self._wakes.put(True)

    def next_delay(self) -> float:
        failures = self.stats.consecutive_failures
        if not failures:
            return self.interval
        retry_after: float = self.interval * FIRST_RETRY_FRACTION * 2 ** (failures - 1)
        return min(self.interval, retry_after)

    def beat_once(self) -> HeartbeatResponse | None:
        """One heartbeat; returns the response, or None if it failed (logged) or the store
        refused the step's credential (told to ``on_refused``, once; no beat after it)."""
        if self.stats.refused:
            return None
        try:
            response = self._beat(self.liveness_timeout)
        except Exception as exc:
            if refused(exc):
                self.stats.refused = True
                logger.debug("Heartbeat of %s refused: %s", self.name, exc)
                if self._on_refused is not None:
                    self._on_refused(exc)
                return None
            self.stats.failures += 1
            self.stats.consecutive_failures += 1
            logger.warning(
                "Heartbeat of %s failed (%d in a row): %s",
                self.name,
                self.stats.consecutive_failures,
                exc,
            )
            return None
        self.stats.beats += 1
        self.stats.consecutive_failures = 0
        self.last_response = response
        if not (response.should_stop if self._stops_with_run else response.step_should_stop):
            if response.should_stop and not self.stats.run_stop_seen:
                self.stats.run_stop_seen = True
                logger.info("The run of %s is stopping; the step runs to its end.", self.name)
            return response
        if not self.stats.stop_signalled:
            self.stats.stop_signalled = True
            logger.log(  # once its end is recorded, the status that says stop is that end
                logging.DEBUG if self.attempt_ended else logging.INFO,
                "%s was asked to stop (step %s, run %s); interrupting it.",
                self.name[:1].upper() + self.name[1:],  # it begins the line: "Step 'x' was ..."
                response.status.value,
                response.run_status.value,
            )
            self._on_stop(response)
        for listener in self._stop_listeners:
            listener(response)
        return response

    def run(self) -> None:
        """The loop: beat every interval (sooner after a failure) until stopped. The first
        beat comes after one interval: a step's record was just written, and short steps
        should not pay for a beat they do not need."""
        while not self.stats.refused and not self.wait(self.next_delay()):
            self.beat_once()

    def start(self, beat_first: bool = False) -> HeartbeatWorker:
        """Start beating in a thread of its own. ``beat_first``: beat once now, in the
        caller's thread, before returning (a step whose start was allowed longer than the usual
        liveness window, :func:`startup_allowance_granted`, so the allowance covers only the
        time until its process runs); a failed beat is logged and retried by the thread sooner
        than the interval, as any other."""
        if beat_first:
            self.beat_once()
        self._thread = threading.Thread(target=self.run, name=f"heartbeat-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._wakes.put(True)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


def beat_on_signal(worker: HeartbeatWorker) -> Callable[[], None] | None:
    """Let :data:`BEAT_NOW_SIGNAL` make ``worker`` beat at once (a step's own process, whose
    orchestrator sends it on a graceful stop); call only from the main thread. Taken only if
    its handler is the default one. Returns what gives it back, or None if it was not taken."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(BEAT_NOW_SIGNAL) is not signal.SIG_DFL:
        return None

    def handler(signum: int, frame: FrameType | None) -> None:
        worker.beat_now()

    signal.signal(BEAT_NOW_SIGNAL, handler)

    def give_back() -> None:
        if signal.getsignal(BEAT_NOW_SIGNAL) is handler:
            signal.signal(BEAT_NOW_SIGNAL, signal.SIG_DFL)

    return give_back


class HeartbeatScheduler:
    """Drives the heartbeats of many steps from one thread.

    The inline steps of a run share it, so a step costs no thread of its own (and a short
    step, which finishes before its first interval, costs nothing but two dict operations).
    A beat runs outside the lock; a step removed while its beat is in flight is not
    rescheduled. Adding a step wakes the thread only if its beat is due before the moment the
    thread sleeps until (a burst of steps does not wake it once per step).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[HeartbeatWorker, float] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        self._sleeps_until = -math.inf
        """When the thread looks at the schedule next; -inf while it is not asleep (it looks
        before it sleeps again), inf while it sleeps with nothing due."""

    def add(self, worker: HeartbeatWorker) -> None:
        with self._cond:
            due = time.monotonic() + worker.next_delay()
            self._due[worker] = due
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="wharf-heartbeats", daemon=True
                )
                self._thread.start()
            if due < self._sleeps_until:
                self._cond.notify()

    def remove(self, worker: HeartbeatWorker) -> None:
        with self._cond:
            self._due.pop(worker, None)
            worker.scheduled = False

    def _sleep(self, until: float) -> None:
        """Wait (holding the condition) until ``until`` or a notification."""
        self._sleeps_until = until
        try:
            self._cond.wait(None if until == math.inf else until - time.monotonic())
        finally:
            self._sleeps_until = -math.inf

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._due.clear()
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                if not self._due:
                    self._sleep(math.inf)
                    continue
                worker, when = min(self._due.items(), key=lambda item: item[1])
                if when > time.monotonic():
                    self._sleep(when)
                    continue
                del self._due[worker]
            worker.beat_once()
            with self._cond:
                if worker.scheduled and not self._closed and not worker.stats.refused:
                    self._due[worker] = time.monotonic() + worker.next_delay()
