"""The user's script in the ``spawn`` and ``forkserver`` workers of a step's own process.

A step's own process executes the user's script as module ``__wharf_script__``
(:mod:`wharf.execution.step_runner`), so a function of the script is pickled as
``__wharf_script__.<name>``: a process pool's worker started afresh (``spawn``, ``forkserver``:
Python 3.14's default on Linux) could not import it and the pool waited forever. When the script
runs its steps itself, ``multiprocessing`` has each such worker execute the script's ``__main__``
as ``__mp_main__`` first; here, likewise, each worker of a step's process executes the script as
``__wharf_script__`` before it unpickles any work.

Owns :func:`serve` (called once by the step's process: ``wharf.execution.entrypoint``) and
:func:`record` (called by ``step_runner`` once it executed the script). Mechanism: the
preparation data ``multiprocessing`` sends each new worker names this module as the one to run
as ``__mp_main__`` (``init_main_from_name``; the step's process's own ``__main__``, Wharf's entry
point, is of no use to a worker), and :data:`SCRIPT_ENV`, inherited by the workers, tells them
which script. Invariants: a worker executes the script under the step process's name for it,
``__wharf_script__``, never as ``__main__`` (its ``if __name__ == "__main__":`` block is skipped)
and as the step's process does (a pipeline call at top level stops or is skipped:
``step_runner.load_script_copy``); a process that did not call :func:`serve`, or a step not
defined in a script, starts its workers as ``multiprocessing`` always does.
"""

from __future__ import annotations

import json
import multiprocessing.spawn as mp_spawn
import os
import threading
from dataclasses import asdict, dataclass

SCRIPT_ENV = "WHARF_STEP_SCRIPT"
"""The script a step's process executed (JSON of :class:`ScriptLoaded`), for its workers.
A Wharf setting: a step's process started from a worker does not inherit it."""

MODULE = "wharf.execution.script_workers"
"""This module's name: each worker runs it as its main module."""
WORKER_MAIN = "__mp_main__"
"""The name ``multiprocessing`` runs a worker's main module under."""

_lock = threading.Lock()
_serving = False


@dataclass(frozen=True)
class ScriptLoaded:
    """The script a step's process executed as ``__wharf_script__``, and for which step."""

    path: str
    step_name: str
    attribute: str


def serve() -> None:
    """Have this process's new ``spawn`` and ``forkserver`` workers execute the script it
    executes (once :func:`record` tells which) before they run any work. Idempotent."""
    global _serving
    with _lock:
        if _serving:
            return
        original = mp_spawn.get_preparation_data

        def with_script(name: str) -> dict[str, object]:
            data: dict[str, object] = original(name)
            if os.environ.get(SCRIPT_ENV):
                data.pop("init_main_from_path", None)
                data["init_main_from_name"] = MODULE
            return data

        mp_spawn.get_preparation_data = with_script
        _serving = True


def record(loaded: ScriptLoaded) -> None:
    """Tell this process's future workers which script it executed (only once :func:`serve`
    was called: in a step's own process)."""
    if _serving:
        os.environ[SCRIPT_ENV] = json.dumps(asdict(loaded))


def load_in_worker() -> None:
    """In a worker (this module run as its ``__mp_main__``): execute the script the step's
    process executed, as ``__wharf_script__``; its own workers will too. Whatever the script
    raises is raised (the worker cannot run the script's functions without it)."""
    raw = os.environ.get(SCRIPT_ENV)
    if not raw:
        return
    loaded = ScriptLoaded(**json.loads(raw))
    from wharf.execution.step_runner import load_script_copy

    serve()
    load_script_copy(loaded)


if __name__ == WORKER_MAIN:  # a worker: its state is the module's, imported by its name
    from wharf.execution.script_workers import load_in_worker as _load

    _load()
