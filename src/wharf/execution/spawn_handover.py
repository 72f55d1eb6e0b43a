"""What a ``spawn`` or ``forkserver`` worker (an exec'd interpreter, which no at-fork hook
reaches) is handed as it starts: objects sent inside the ``Process`` object it unpickles before
it runs any work, as ``multiprocessing`` hands it its own descriptors.

Owns :func:`hand_over`: a maker, asked in the starting thread as each process starts for the
object to send (or None). The object's ``__reduce__`` runs in the parent while the process
starts (``multiprocessing.context.get_spawning_popen()`` is set then; it returns something
inert otherwise) and names what the worker calls as it unpickles it. Invariants:
``BaseProcess.start`` is wrapped once, whoever registers; a process running another interpreter
(``multiprocessing.set_executable``, which may lack Wharf) is handed nothing; a forked process
unpickles nothing (at-fork hooks serve it).
"""

from __future__ import annotations

import contextlib
import multiprocessing.process as mp_process
import multiprocessing.spawn as mp_spawn
import os
import sys
import threading
from collections.abc import Callable

Maker = Callable[[], object | None]

_HANDED = "_wharf_handed"
"""The attribute of a ``Process`` holding the objects handed to it while it starts."""
_lock = threading.Lock()
_makers: dict[str, Maker] = {}


def hand_over(name: str, make: Maker) -> None:
    """From now on, ask ``make`` as each process starts for an object to hand it. Idempotent by
    ``name``: the first maker registered under a name holds."""
    with _lock:
        if name in _makers:
            return
        first = not _makers
        _makers[name] = make
    if first:
        _wrap_start()


def _wrap_start() -> None:
    start = mp_process.BaseProcess.start

    def start_with_handover(process: mp_process.BaseProcess) -> None:
        ours = os.fsencode(mp_spawn.get_executable()) == os.fsencode(sys.executable or "")
        handed = [o for make in list(_makers.values()) if (o := make()) is not None] if ours else []
        if not handed:
            start(process)
            return
        setattr(process, _HANDED, tuple(handed))
        try:
            start(process)
        finally:
            with contextlib.suppress(AttributeError):
                delattr(process, _HANDED)

    setattr(mp_process.BaseProcess, "start", start_with_handover)  # noqa: B010
