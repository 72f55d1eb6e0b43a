"""A run whose credential the store refuses while it runs: its API key revoked, its account
deactivated or its permission withdrawn (401 or 403 from a workspace server).

Owns :class:`RunRefusedError` (what the pipeline call raises then) and :func:`run_refused`.
Nothing about the run can be written any more, so its end cannot be recorded from here: the
run loop stops its steps in this process without writing (``RunStopper.refuse``), and the call
ends with one line, no traceback, and a non-zero exit status when nobody catches it. The
server ends the run itself once its heartbeat deadline passes ("orchestrator lost").
"""

from __future__ import annotations

import sys
from types import TracebackType

from wharf.core.errors import CredentialsRefusedError, WharfError


class RunRefusedError(WharfError):
    """The store refused the run's credential while it ran; the run was stopped in this
    process. ``run_name``: the run; ``refusal``: the store's error (``status`` 401 or 403,
    ``detail``: the server's words)."""

    def __init__(self, run_name: str, refusal: CredentialsRefusedError) -> None:
        self.run_name = run_name
        self.refusal = refusal
        detail = " ".join(refusal.detail.split()).rstrip(".") or "refused"
        super().__init__(
            f"Run '{run_name}' stopped: the workspace server refused its credentials "
            f"({refusal.status}: {detail}). Nothing was written after that; the server ends "
            "the run as 'orchestrator lost' once its heartbeat deadline passes."
        )


def run_refused(run_name: str, refusal: CredentialsRefusedError) -> RunRefusedError:
    """The error that ends a call whose run ``run_name`` was refused; uncaught, the interpreter
    prints its one line instead of a traceback (and exits with status 1)."""
    _one_line_at_top_level()
    error = RunRefusedError(run_name, refusal)
    error.__suppress_context__ = True
    return error


def _one_line_at_top_level() -> None:
    """Let the interpreter print a :class:`RunRefusedError` that nobody caught as its message
    alone. Only the interpreter's own hook is replaced; every other exception still goes to
    it."""
    if sys.excepthook is not sys.__excepthook__:
        return
    original = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if isinstance(exc, RunRefusedError):
            sys.stderr.write(f"{exc}\n")
            return
        original(exc_type, exc, tb)

    sys.excepthook = hook


__all__ = ["RunRefusedError", "run_refused"]
