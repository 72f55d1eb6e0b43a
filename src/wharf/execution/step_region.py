"""A step's interruptible region that also ends Wharf's own waits around the step's code.

Owns :class:`StepRegion`: an :class:`~wharf.execution.interrupt.InterruptibleRegion` whose
:meth:`~StepRegion.waiting` marks a wait of Wharf's outside the user code (an input load or
an output or log save waiting through an outage of the artifact store). Invariants: an
interrupt asked while such a wait lasts ends it at its next pause between tries (never inside
a try, so a write is never cut in half) with ``StepInterrupted``, and every later wait of the
attempt pauses no more (its first failure ends it), as after :meth:`~StepRegion.end_waits` (a
run's stop reaching an isolated attempt, whose code runs elsewhere); an interrupt of the user
code itself is the region's, unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted


class StepRegion(InterruptibleRegion):
    """A step's region; an interrupt also ends the waits of :meth:`waiting`."""

    def __init__(self) -> None:
        super().__init__()
        self._waits = 0
        self._waits_lock = threading.Lock()
        self._asked = threading.Event()
        """Set once an interrupt came while a wait lasted (or the user code was interrupted)."""

    def interrupt(self, reason: str) -> bool:
        """As the region's; also ends a wait of :meth:`waiting` in progress (True then)."""
        sent = super().interrupt(reason)
        with self._waits_lock:
            if sent:
                self._asked.set()
            if not self._waits or self._asked.is_set():
                return sent
            if self.reason is None:
                self.reason = reason
            self._asked.set()
        return True

    @property
    def stop_asked(self) -> bool:
        """Whether a wait of :meth:`waiting` was (or would be) ended by an interrupt."""
        return self._asked.is_set()

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Mark a wait of Wharf's outside the user code while the block runs: an interrupt
        meanwhile makes :meth:`check_stop` raise (called between tries)."""
        with self._waits_lock:
            self._waits += 1
        try:
            yield
        finally:
            with self._waits_lock:
                self._waits -= 1

    def end_waits(self, reason: str) -> bool:
        """End the waits of :meth:`waiting`, the one in progress and every later one, as an
        interrupt during a wait does, without interrupting the region itself (an isolated
        attempt's, whose code runs elsewhere: a run's stop ends its log's wait for the artifact
        store); True."""
        with self._waits_lock:
            if self.reason is None:
                self.reason = reason
            self._asked.set()
        return True

    def check_stop(self) -> None:
        """Raise ``StepInterrupted`` once :attr:`stop_asked`."""
        if self._asked.is_set():
            raise StepInterrupted(self.reason)
