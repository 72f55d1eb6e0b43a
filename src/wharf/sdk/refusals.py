"""A pipeline run the active stack refuses before anything is recorded (a step naming a step
operator the stack lacks, settings its components cannot honour), as a script that does not
catch it shows it: ``Error: …`` in one line on stderr and exit status 1, without a traceback
(the refusal says what to change; the traceback would only show Wharf's checks).

:func:`mark_refused` marks the exception where the check raises it; :func:`quiet_refusals` is
called by ``Pipeline.__call__`` (a script's call, not ``run_in``) when a marked exception leaves
it. A caller that catches the exception gets it unchanged. Only unmarked exceptions reach the
hook it replaced, so every other exception is shown as before.
"""

from __future__ import annotations

import sys
from types import TracebackType

_MARK = "_wharf_refusal"


def mark_refused(exc: BaseException) -> None:
    """Mark ``exc`` as a run refused before it was recorded."""
    setattr(exc, _MARK, True)


def is_refused(exc: BaseException) -> bool:
    return bool(getattr(exc, _MARK, False))


def quiet_refusals() -> None:
    """Let an uncaught refusal print one line instead of a traceback (idempotent)."""
    original = sys.excepthook
    if getattr(original, _MARK, False):
        return

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if is_refused(exc):
            sys.stderr.write(f"Error: {exc}\n")
            sys.stderr.flush()
            return
        original(exc_type, exc, tb)

    setattr(hook, _MARK, True)
    sys.excepthook = hook
