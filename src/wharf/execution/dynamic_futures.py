"""What a dynamic pipeline's function gets back from its step calls.

Owns :class:`OutputArtifact` (its value loaded once, on the first ``load()``), a call's
:data:`StepOutputs` (``None``, one artifact or a tuple of them), :class:`StepFuture`
(``step.submit``), :class:`MapResultsFuture` (``step.map``, in input order) and
:func:`unmapped`. Invariants: these handles hold no run state: the runner
(``wharf.execution.dynamic``) creates them and settles their futures; a handle is never taken
for its value: testing it (``if``) or comparing it with anything but a handle (``==``, ``<``)
raises ``TypeError`` naming ``.load()``, where Python would silently answer (always true,
never equal). A wait for a step (``wait``, ``result``, ``load``, a map's) is a loop of short
waits (``interrupt.UNWOKEN_WAIT_SECONDS``), each followed by the runner's check (``between``):
a forced stop raises in a function run off the main thread (which no signal wakes) within a
fraction of a second, and again if its code swallowed it, not once the step returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from typing import Any

from wharf.execution.interrupt import UNWOKEN_WAIT_SECONDS
from wharf.store.models import ArtifactVersionRecord


class _NoValue:
    """A handle that is not its step's value: a comparison with a value raises ``TypeError``
    (``handle == 5`` was silently False, ``handle != 5`` True) naming ``.load()``; a handle
    equals only itself (hashable by identity, so handles still go in sets and dicts)."""

    def _not_its_value(self) -> str:
        raise NotImplementedError

    def _compared(self, other: object, operator: str) -> TypeError:
        return TypeError(
            f"{self._not_its_value()}; compare its .load() instead "
            f"(it was compared {operator} {type(other).__name__})."
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _NoValue):
            return self is other
        raise self._compared(other, "==")

    def __ne__(self, other: object) -> bool:
        if isinstance(other, _NoValue):
            return self is not other
        raise self._compared(other, "!=")

    def __lt__(self, other: object) -> bool:
        raise self._compared(other, "<")

    def __le__(self, other: object) -> bool:
        raise self._compared(other, "<=")

    def __gt__(self, other: object) -> bool:
        raise self._compared(other, ">")

    def __ge__(self, other: object) -> bool:
        raise self._compared(other, ">=")

    __hash__ = object.__hash__


class OutputArtifact(_NoValue):
    """One output of a step that ran in this dynamic pipeline; ``load()`` reads its value."""

    def __init__(
        self,
        step_name: str,
        output_name: str,
        version: ArtifactVersionRecord,
        loader: Callable[[ArtifactVersionRecord], Any],
    ) -> None:
        self.step_name = step_name
        self.output_name = output_name
        self.version = version
        self._loader = loader
        self._lock = threading.Lock()
        self._loaded = False
        self._value: Any = None

    @property
    def id(self) -> Any:
        return self.version.id

    def load(self) -> Any:
        with self._lock:
            if not self._loaded:
                self._value = self._loader(self.version)
                self._loaded = True
            return self._value

    def _not_its_value(self) -> str:
        return (
            f"Output '{self.output_name}' of step '{self.step_name}' is an artifact handle, "
            "not its value"
        )

    def __bool__(self) -> bool:
        # Without this every handle is true: `if output:` would silently take one branch.
        raise TypeError(f"{self._not_its_value()}; branch on its .load().")

    def __repr__(self) -> str:
        return f"<OutputArtifact {self.step_name}.{self.output_name} {self.version.id}>"


StepOutputs = None | OutputArtifact | tuple[OutputArtifact, ...]


@dataclass(frozen=True)
class Unmapped:
    value: Any


def unmapped(value: Any) -> Unmapped:
    """Pass ``value`` whole to every step of a ``step.map(...)``."""
    return Unmapped(value)


def _nothing() -> None:
    pass


def settle(
    future: Future[Any], timeout: float | None = None, between: Callable[[], None] = _nothing
) -> bool:
    """Wait for ``future`` (at most ``timeout`` seconds; None: until it is done) in waits of
    :data:`~wharf.execution.interrupt.UNWOKEN_WAIT_SECONDS`, calling ``between`` after each
    one it did not end (it may raise); whether it is done. An exception sent to this thread
    (a forced stop's) is raised within one such wait, in any thread."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not future.done():
        left = UNWOKEN_WAIT_SECONDS if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return False
        try:  # the future's own wait (a with block: its lock is released whatever is raised)
            future.exception(min(left, UNWOKEN_WAIT_SECONDS))
        except TimeoutError:
            between()
        except CancelledError:
            break  # a cancelled future: nothing to wait for
    return True


class StepFuture(_NoValue):
    """A step submitted with ``step.submit(...)``; ``between``: called between the short waits
    of a wait for it (the runner's: it raises a forced stop that the function swallowed)."""

    def __init__(
        self,
        invocation_id: str,
        future: Future[StepOutputs],
        between: Callable[[], None] = _nothing,
    ) -> None:
        self.invocation_id = invocation_id
        self._future = future
        self._between = between

    @property
    def future(self) -> Future[StepOutputs]:
        """The future the runner settles once the step ended (what a step waits for)."""
        return self._future

    def running(self) -> bool:
        return not self._future.done()

    def done(self) -> bool:
        return self._future.done()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the step ended (successfully or not), or ``timeout`` seconds passed."""
        settle(self._future, timeout, self._between)

    def result(self, timeout: float | None = None) -> StepOutputs:
        """The step's outputs; raises :class:`StepExecutionError` if it did not succeed
        (``TimeoutError`` if it did not end within ``timeout`` seconds)."""
        settle(self._future, timeout, self._between)
        return self._future.result(0)

    def load(self) -> Any:
        outputs = self.result()
        if outputs is None:
            return None
        if isinstance(outputs, OutputArtifact):
            return outputs.load()
        return tuple(o.load() for o in outputs)

    def _not_its_value(self) -> str:
        return f"Step '{self.invocation_id}' was submitted: its future is not its value"

    def __bool__(self) -> bool:
        # Without this every future is true: `if step.submit(...):` would take one branch.
        raise TypeError(f"{self._not_its_value()}; branch on its .load().")

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        return f"<StepFuture {self.invocation_id} {state}>"


class MapResultsFuture(_NoValue, Sequence[StepFuture]):
    """The steps submitted by one ``step.map(...)``, in input order (an empty map is false, as
    an empty list; ``len`` tells how many)."""

    def __init__(self, futures: list[StepFuture]) -> None:
        self.futures = futures

    def __getitem__(self, index: int) -> StepFuture:  # type: ignore[override]
        return self.futures[index]

    def __len__(self) -> int:
        return len(self.futures)

    def __iter__(self) -> Iterator[StepFuture]:
        return iter(self.futures)

    def running(self) -> bool:
        return any(f.running() for f in self.futures)

    def wait(self) -> None:
        for f in self.futures:
            f.wait()

    def result(self) -> list[StepOutputs]:
        return [f.result() for f in self.futures]

    def load(self) -> list[Any]:
        return [f.load() for f in self.futures]

    def _not_its_value(self) -> str:
        ids = [f.invocation_id for f in self.futures[:1]]
        first = f" (steps {ids[0]}...)" if ids else ""
        return f"A step.map(...){first} is its steps' futures, not their values"


__all__ = [
    "MapResultsFuture",
    "OutputArtifact",
    "StepFuture",
    "StepOutputs",
    "Unmapped",
    "settle",
    "unmapped",
]
