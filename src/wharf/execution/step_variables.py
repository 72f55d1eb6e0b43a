"""A step's ``environment=`` variables, set in ``os.environ`` while the step runs.

Owns :func:`step_variables`, the one place where a step's variables (the pipeline's, overridden
by the step's own: ``StepConfig.environment``) enter the process environment, and the
process-wide table of who set what. Invariants, over concurrent inline steps: a variable is set
to only one value at a time; it goes back to its value from before the first step that set it
once the last such step ended. This module reads the environment only to restore it;
configuration is read by :mod:`wharf.config` alone.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted

logger = logging.getLogger(__name__)

STOP_POLL_SECONDS = 0.1
"""How often a waiting step checks whether it was asked to stop."""


@dataclass
class _Held:
    value: str
    holders: int
    previous: str | None
    """The variable's value before the first of its holders set it (None: unset)."""


class _ProcessVariables:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held: dict[str, _Held] = {}

    def _conflicts(self, variables: Mapping[str, str]) -> list[str]:
        return sorted(
            k for k, v in variables.items() if k in self._held and self._held[k].value != v
        )

    def acquire(
        self, step_name: str, variables: Mapping[str, str], region: InterruptibleRegion
    ) -> None:
        with self._changed:
            told = False
            while conflicts := self._conflicts(variables):
                if region.interrupted:
                    raise StepInterrupted(region.reason)
                if not told:
                    logger.info(
                        "Step '%s' waits: a running inline step sets %s to another value.",
                        step_name,
                        ", ".join(conflicts),
                    )
                    told = True
                self._changed.wait(STOP_POLL_SECONDS)
            for name, value in variables.items():
                held = self._held.get(name)
                if held is None:
                    self._held[name] = _Held(value, 1, os.environ.get(name))
                else:
                    held.holders += 1
                os.environ[name] = value

    def release(self, variables: Mapping[str, str]) -> None:
        with self._changed:
            for name in variables:
                held = self._held[name]
                held.holders -= 1
                if held.holders == 0:
                    del self._held[name]
                    if held.previous is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = held.previous
            self._changed.notify_all()


_PROCESS = _ProcessVariables()


@contextmanager
def step_variables(
    step_name: str, variables: Mapping[str, str], region: InterruptibleRegion
) -> Iterator[None]:
    """Set ``variables`` in ``os.environ`` for the block; call it outside ``region`` (its
    bookkeeping must not be cut by an interrupt).

    A step's own process (isolated) and a thread of the orchestrating process (inline) go
    through it alike: the variables are set from before the step's inputs are loaded until its
    outputs are saved. A step whose variables conflict with those of a running step (same name,
    another value) waits until that step ended; steps whose variables agree or do not overlap
    run together; a step that sets no variable is never held back and sees those of the steps
    running beside it. A wait ends early, raising :class:`StepInterrupted`, when the step is
    asked to stop."""
    if not variables:
        yield
        return
    _PROCESS.acquire(step_name, variables, region)
    try:
        yield
    finally:
        _PROCESS.release(variables)
