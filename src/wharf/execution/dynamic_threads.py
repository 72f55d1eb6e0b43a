"""Which dynamic run a step call in this thread belongs to, if any.

Owns the run's context (:func:`run_context`, :func:`outside_run`) and
:func:`current_run`. A dynamic pipeline's steps are called from its function's own
thread, where each call gets its id and its place in the run's call order (what a resumed run's
replay is checked against); ``step.submit``/``step.map`` are how the function runs steps
concurrently. A thread that the function starts itself (``threading.Thread``, a
``ThreadPoolExecutor``) has none of the function's context: a step called there ran as a plain
function, unrecorded, as if no run were going on. Invariants: a step call in a thread started
while a dynamic run's function runs in another thread of this process is refused
(:class:`~wharf.core.errors.StepInterfaceError`, naming ``.submit``/``.map``); a step's own
code (run by the runner in any thread) calls steps as plain functions, as outside any pipeline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from wharf.core.errors import StepInterfaceError

_NOT_SET: Any = object()
_ACTIVE: ContextVar[Any] = ContextVar("wharf_dynamic_run")
"""The run whose function runs in this context; None in a step's own code; not set in a thread
that neither the runner nor a function's context started."""
_LOCK = threading.Lock()
_FUNCTIONS: dict[int, tuple[str, int]] = {}
"""id(run) -> (pipeline name, thread ident) of each dynamic run whose function runs now."""


@contextmanager
def run_context(run: Any, pipeline: str) -> Iterator[None]:
    """Run ``run``'s pipeline function (of pipeline ``pipeline``) in this context: a step
    called here is a step of ``run``."""
    token = _ACTIVE.set(run)
    with _LOCK:
        _FUNCTIONS[id(run)] = (pipeline, threading.get_ident())
    try:
        yield
    finally:
        with _LOCK:
            _FUNCTIONS.pop(id(run), None)
        _ACTIVE.reset(token)


@contextmanager
def outside_run() -> Iterator[None]:
    """Run a step's own code here: a step it calls is a plain function call."""
    token = _ACTIVE.set(None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def current_run() -> Any:
    """The dynamic run a step called in this thread belongs to; None outside any (a plain
    function call). Raises :class:`StepInterfaceError` in a thread that a running dynamic
    pipeline's function may have started."""
    run = _ACTIVE.get(_NOT_SET)
    if run is not _NOT_SET:
        return run
    here = threading.get_ident()
    with _LOCK:
        elsewhere = [name for name, thread in _FUNCTIONS.values() if thread != here]
    if not elsewhere:
        return None
    raise StepInterfaceError(
        f"A step was called in thread '{threading.current_thread().name}' while dynamic "
        f"pipeline '{elsewhere[0]}' runs its function in another thread: a dynamic "
        "pipeline's steps are called from its function's own thread (where each call is "
        "recorded, in order); to run steps concurrently, use step.submit(...) or "
        "step.map(...) there instead of threads. (Code that is no pipeline's may call the "
        "step's plain function: step.func(...).)"
    )


__all__ = ["current_run", "outside_run", "run_context"]
