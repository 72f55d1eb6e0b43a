"""Riding out a short outage of the artifact store while a step loads its inputs and saves its
outputs: an S3 endpoint gone for some seconds does not cost a step's work.

Owns :func:`through_artifact_outage`, :func:`step_logs_through_outage` (the same bound to a
step, for its log: an inline step's capture, an isolated step's file its backend copies) and
:func:`waits_ended_by` (a run's stop ends an isolated attempt's waits).
Invariants: only an error saying the store could not be reached
(:func:`~wharf.artifacts.fsspec_store.store_unreachable`) is waited out, for up to the run's
liveness timeout as the metadata store's outages are; a missing bucket, refused
credentials or a materializer's own error fail at once. A save is repeated at the same URI after
removing whatever the failed try left there: writes are published whole or not at all, so what
is removed was never a complete artifact, and the repeat leaves a whole one or nothing. A step's
stop ends its wait between two tries (``wharf.execution.step_region``), never inside one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TypeVar

from wharf.artifacts.fsspec_store import store_unreachable
from wharf.execution.allocation_waits import Stops
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.interrupt import UNWOKEN_WAIT_SECONDS, InterruptibleRegion
from wharf.execution.log_capture import ThroughOutage
from wharf.execution.outages import retry_through_outage
from wharf.execution.services import RunServices
from wharf.execution.step_region import StepRegion

T = TypeVar("T")


def through_artifact_outage(
    services: RunServices,
    call: Callable[[], T],
    what: str,
    *,
    before_again: Callable[[], object] | None = None,
    stop: StepRegion | None = None,
) -> T:
    """``call()``'s answer, called again while the artifact store cannot be reached, for up to
    the run's liveness timeout (``what`` names it in the log); ``before_again()`` runs before
    each repeat (an unreachable store there is waited out too, and an outage that outlasts the
    wait ends in the call's error, not in this one's). ``stop``: the step's region,
    whose interrupt (its run or the step stopped) ends the wait between two tries with
    ``StepInterrupted``; a try in flight is not cut (a save is whole or absent)."""
    tries = 0
    failed: Exception | None = None  # the last try's error: what the wait is about

    def attempt() -> T:
        nonlocal tries, failed
        tries += 1
        if tries > 1 and before_again is not None:
            try:
                before_again()
            except Exception as exc:
                if failed is None or not store_unreachable(exc):
                    raise
                raise failed from exc  # an outage ends in the error of the call, not the tidy
        try:
            return call()
        except Exception as exc:
            failed = exc
            raise

    def pause(seconds: float) -> None:
        """``services.sleep`` a slice at a time, ended by ``stop``'s interrupt."""
        while True:
            if stop is not None:
                stop.check_stop()
            if seconds <= 0:
                return
            services.sleep(min(seconds, UNWOKEN_WAIT_SECONDS))
            seconds -= UNWOKEN_WAIT_SECONDS

    with stop.waiting() if stop is not None else nullcontext():
        return retry_through_outage(
            attempt,
            what=what,
            patience=liveness_timeout_for(services.heartbeat_interval),
            clock=services.clock,
            sleep=pause if stop is not None else services.sleep,
            is_transient=store_unreachable,
        )


def step_logs_through_outage(services: RunServices, region: InterruptibleRegion) -> ThroughOutage:
    """:func:`through_artifact_outage` for the log of the step running in ``region``: the run's
    patience, ended by the step's stop when ``region`` is a :class:`StepRegion`."""
    stop = region if isinstance(region, StepRegion) else None
    return functools.partial(through_artifact_outage, services, stop=stop)


class _WaitsOf:
    """A run's stop seen by an isolated attempt's region: it ends the region's waits only."""

    def __init__(self, region: StepRegion) -> None:
        self._region = region

    def interrupt(self, reason: str) -> bool:
        return self._region.end_waits(reason)


@contextmanager
def waits_ended_by(stops: Stops | None, region: InterruptibleRegion) -> Iterator[None]:
    """While the block runs, a stop of the run (``stops``: its ``RunStopper``) ends the waits
    for the artifact store of the attempt in ``region`` (an isolated attempt's log copy), the
    one in progress and those to come, as it ends an inline attempt's; the region of an
    isolated attempt is not interrupted by a run's stop otherwise (its process hears of it)."""
    if stops is None or not isinstance(region, StepRegion):
        yield
        return
    waits = _WaitsOf(region)
    stops.add_region(waits)
    try:
        yield
    finally:
        stops.remove_region(waits)
