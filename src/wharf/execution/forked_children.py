"""Where a process forked by a step's code (a raw ``os.fork``) ends if it leaves that code.

Owns :func:`child_ends_here` and :func:`ending_children`. Invariant: a forked child never runs
Wharf's code that follows the user code it came out of (recording, finishing, logging its
parent's step, closing the parent's stores): once the block ends in another process than the
one that entered it, that process ends there, with ``os._exit`` and the exit code Python would
give it.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import NoReturn, TypeVar

T = TypeVar("T")


@contextmanager
def child_ends_here() -> Iterator[None]:
    """Run the block (user code); a forked child that leaves it, by a return, ``sys.exit`` or
    an exception, ends there (:func:`exit_as_python_would`), its parent goes on."""
    pid = os.getpid()
    try:
        yield
    except BaseException as exc:
        if os.getpid() != pid:
            exit_as_python_would(exc)
        raise
    if os.getpid() != pid:
        exit_as_python_would(None)


def ending_children(call: Callable[[], T]) -> Callable[[], T]:
    """``call`` run in :func:`child_ends_here`."""

    def ends_children() -> T:
        with child_ends_here():
            return call()

    return ends_children


def exit_as_python_would(exc: BaseException | None) -> NoReturn:
    """End this process as an uncaught ``exc`` (None: none) ends Python: ``SystemExit``'s code
    (a code that is no int printed, then 1), else the exception shown and 1 (a
    ``KeyboardInterrupt``: killed by SIGINT). No ``atexit`` handler, ``finally`` or thread
    join runs: they belong to the parent; the standard streams are flushed."""
    code = 0
    if isinstance(exc, SystemExit):
        if isinstance(exc.code, int):
            code = exc.code & 0xFF
        elif exc.code is not None:
            with suppress(BaseException):
                print(exc.code, file=sys.stderr)
            code = 1
    elif exc is not None:
        with suppress(BaseException):
            sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with suppress(BaseException):
            if stream is not None:
                stream.flush()
    if isinstance(exc, KeyboardInterrupt):
        with suppress(BaseException):
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)
