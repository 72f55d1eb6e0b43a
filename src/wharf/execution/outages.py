"""Riding out a short outage of the store, the workspace server or the Resource Manager on the
engine's wait, heartbeat and end-of-run paths.

Owns :func:`transient` (which errors an outage raises), :func:`refused` (which errors say that
the caller's credential is refused for good) and :func:`retry_through_outage`. Invariants: only
calls that are safe to repeat go through it (reads, heartbeats, lease renewals, releases, and
ending a run, which returns a finished run unchanged); a refused credential is never waited
out (a revoked API key stays revoked): the engine stops the run instead
(``wharf.execution.refusal``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TypeGuard, TypeVar

from wharf.core.errors import CredentialsRefusedError, StoreUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_SECONDS = 0.25
MAX_DELAY_SECONDS = 5.0


def transient(error: BaseException) -> bool:
    """Whether ``error`` says that a service could not be reached or is briefly unavailable
    (connection refused or reset, timeout, 503: ``StoreUnavailableError``, raised by the REST
    store, the workspace server and the Resource Manager's client), rather than that the call
    is wrong."""
    return isinstance(error, StoreUnavailableError)


def refused(error: BaseException) -> TypeGuard[CredentialsRefusedError]:
    """Whether ``error`` says that the store refused the caller's credential for good: 401
    (revoked, expired, the account deactivated) or 403 (its permission withdrawn). Never
    :func:`transient`: calling again with the same credential cannot succeed."""
    return isinstance(error, CredentialsRefusedError)


def retry_through_outage(
    call: Callable[[], T],
    *,
    what: str,
    patience: float,
    clock: Callable[[], datetime],
    sleep: Callable[[float], object],
    is_transient: Callable[[BaseException], bool] = transient,
) -> T:
    """``call()``'s answer, calling again through a transient outage of up to ``patience``
    seconds (``what`` names the call in the log); the last error once patience runs out.
    Backs off from :data:`FIRST_DELAY_SECONDS` doubling up to :data:`MAX_DELAY_SECONDS`, on
    the injected clock; any other error is raised at once. ``is_transient`` tells an outage's
    errors (default :func:`transient`: the store's, the server's, the RM's)."""
    started = clock()
    delay = FIRST_DELAY_SECONDS
    failures = 0
    while True:
        try:
            result = call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            waited = (clock() - started).total_seconds()
            if waited >= patience:
                raise
            failures += 1
            if failures == 1:
                logger.warning("Could not %s (retrying for up to %.0f s): %s", what, patience, exc)
            sleep(min(delay, max(0.0, patience - waited)))
            delay = min(MAX_DELAY_SECONDS, delay * 2)
            continue
        if failures:
            logger.info("Managed to %s after %d failed attempt(s).", what, failures)
        return result
