"""The engine's port for a step's resources: what the launcher asks of whoever provides them.

Owns the :class:`StepResources` protocol, implemented by the embedded adapter
(:mod:`wharf.execution.resources.embedded`) and the team adapter
(:mod:`wharf.execution.resources.team`), and :func:`releaser`. The launcher gets it explicitly
(``RunServices.resources``; None: steps run without requests), never through the store.
Invariants: one port per process's workspace, shared by all its runs, so its wait room and
holders' gate see every step of the process that asks for resources; when a run ends, nothing
stays allocated to it (:meth:`StepResources.release_left`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from wharf.config.settings import ResourceSettings
from wharf.execution.resources.holders_first import HoldersFirst
from wharf.execution.resources.wait_room import RequestState
from wharf.store.models import StepRunCreate, StepRunRecord

if TYPE_CHECKING:
    from wharf.execution.allocation import WaitStop
    from wharf.resource_manager.contract.models import ResourceRequestInfo


class StepResources(Protocol):
    """A step's resources as the engine sees them.

    A step's request is made (:meth:`request`) before its queued step run is written, renewed
    on its heartbeats and released wherever the step ends; the engine makes these calls itself
    (:mod:`wharf.execution.step_writes`), and the team adapter's do nothing (the workspace
    server's step routes do the work). The launcher also waits here for the allocation, marks
    the step started, and tells the port when a step that held resources ended, so the waiters
    of this process whose request left the queue are woken at once."""

    makes_requests: bool
    """Whether :meth:`request` makes requests here (False in team mode: the server does)."""

    def request(self, step_id: UUID, step: StepRunCreate) -> UUID | None:
        """Make the request of ``step``, a queued step that asks for resources and will be
        written as ``step_id``; its id (None where the server makes it: team mode). Raises
        ``WharfError`` when the request cannot be made."""
        ...

    def renew(self, request_id: UUID, liveness_timeout_seconds: float) -> str | None:
        """Renew the lease of a running step's request on its heartbeat; why the step must be
        cancelled if the request was reclaimed or is over, else None (team mode: always None,
        the server renews)."""
        ...

    @property
    def holders(self) -> HoldersFirst:
        """The process's gate: steps holding an allocation go before creations of waiting ones."""
        ...

    def wait(
        self,
        request_id: UUID,
        settings: ResourceSettings,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], object],
        on_pending: Callable[[RequestState], object] | None = None,
        stop: WaitStop | None = None,
    ) -> RequestState:
        """Block until ``request_id`` is allocated; raises ``AllocationFailedError`` (with the
        reason) when it ends without an allocation or the wait times out, and
        ``StepInterrupted`` at once when ``stop`` is interrupted (a graceful stop of the run)."""
        ...

    def mark_started(
        self,
        request_id: UUID,
        settings: ResourceSettings,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], object],
    ) -> ResourceRequestInfo:
        """The allocation is being used: renew for initialization, runtime state submitted
        (retried through a short outage)."""
        ...

    def release_left(
        self,
        request_ids: Iterable[UUID],
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], object],
    ) -> None:
        """A run ended: release those of its steps' ``request_ids`` that are still pending or
        held, whoever should have released them (retried through a short outage; a failure
        is logged, never raised)."""
        ...

    def release(self, request_id: UUID, *, by: str | None = None) -> None:
        """Give back ``request_id``, whose step another call ended (a forced stop, a lost-run
        sweep; ``by`` says so in the request's status reason: :func:`ended_by`); a
        failure is logged, never raised (the lease lapses on its own). Does nothing where the
        server releases (team mode)."""
        ...

    def step_ended(self, *, elsewhere: bool) -> None:
        """A step that held resources ended and its request was released (``elsewhere``: by
        another process, e.g. the step's own): wake the waiters whose request left the queue."""
        ...


ENDER_LENGTH = 400
"""Most characters of :func:`ended_by` (the Resource Manager takes up to 512)."""


def ended_by(step: StepRunRecord) -> str:
    """Who released the request of ``step``, a step another call ended (a lost-run sweep, a
    forced stop), for the request's status reason: "Released by Wharf, as step 'train' ended
    failed: Orchestrator lost (last seen …)."."""
    reason = (step.status_reason or "").strip().rstrip(".")
    text = f"Wharf, as step '{step.name}' ended {step.status.value}" + (
        f": {reason}" if reason else ""
    )
    return text if len(text) <= ENDER_LENGTH else text[: ENDER_LENGTH - 1] + "…"


def releaser(resources: StepResources | None) -> Callable[[StepRunRecord], None] | None:
    """What releases the request of a step run another call ended, through ``resources``
    (None: no port, nothing to release); given to forced stops and lost-run sweeps."""
    if resources is None:
        return None
    port = resources

    def release(step: StepRunRecord) -> None:
        if step.resource_request_id is not None:
            port.release(step.resource_request_id, by=ended_by(step))

    return release
