"""A run whose credential the store refuses while it runs: its API key revoked, its account
deactivated or its permission withdrawn (401 or 403 from a workspace server).

Owns :class:`RunRefusedError` (what the pipeline call raises then) and :func:`run_refused`.
Nothing about the run can be written any more, so its end cannot be recorded from here: the
run loop stops its steps in this process without writing (``RunStopper.refuse``), and the call
raises this one error, whose message is one line. The server ends the run itself once its
heartbeat deadline passes ("orchestrator lost").
"""

from __future__ import annotations

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
    """The error that ends a call whose run ``run_name`` was refused (without the store's error
    as its context: the message says it all)."""
    error = RunRefusedError(run_name, refusal)
    error.__suppress_context__ = True
    return error


__all__ = ["RunRefusedError", "run_refused"]
