"""Making, renewing and releasing a step's Resource Manager request: the calls behind the
step-resources port's ``request``, ``renew`` and ``release``.

Owns :class:`StepRequester`, used by the embedded adapter (:mod:`.embedded`) and the workspace
server's step-resource service (:mod:`wharf.server.step_resources`); never installed on a
store. Invariants: a request's idempotency key is its step run's id and a nonce of the one
call that makes it (the id alone where the caller asks it repeatable); RM errors on renewal
and release are only logged (the step keeps running while its lease is valid), a release that
met an outage is retried in the background (:mod:`.release_retries`), and an unreleased lease
lapses on its own.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError, WharfError
from wharf.core.ids import new_id
from wharf.execution.lost_resources import RM_UNREACHABLE, lease_lost, reclaimed
from wharf.execution.outages import retry_through_outage, transient
from wharf.execution.resources.release_retries import ReleaseRetries
from wharf.execution.resources.waiting import Renews
from wharf.store.models import PipelineRunRecord, StepRunCreate, UserRecord
from wharf.store.ports import Store

if TYPE_CHECKING:  # the RM's models load only when a step actually asks for resources
    from wharf.execution.resources.step_requests import RunSubjects
    from wharf.resource_manager.contract.models import ResourceRequestCreate, ResourceRequestInfo


class StepRequests(Renews, Protocol):
    """The requests client steps' requests are made, renewed and released with (the RM's
    :class:`~wharf.resource_manager.contract.protocol.RequestsClient` has these calls)."""

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo: ...
    def release(self, request_id: UUID, *, by: str | None = None) -> ResourceRequestInfo: ...


AccountOf = Callable[[PipelineRunRecord], UserRecord]
"""The account a run's resource requests are made for (WharfError when there is none)."""


logger = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


RECLAIMED = frozenset(
    {
        ResourceRequestStatus.PREEMPTING,
        ResourceRequestStatus.PREEMPTED,
        ResourceRequestStatus.CANCELLED,
        ResourceRequestStatus.REJECTED,
        ResourceRequestStatus.RELEASED,
        ResourceRequestStatus.EXPIRED,
    }
)
PREEMPTED = frozenset({ResourceRequestStatus.PREEMPTING, ResourceRequestStatus.PREEMPTED})
"""Statuses of a request the RM took back for another (its step "was reclaimed", not "is
preempting", which reads as if it were preempting others)."""
CREATE_PATIENCE_SECONDS = 10.0
"""How long making a request rides out an unreachable RM (a restart): on the workspace server
this holds the step's creation call, whose client waits 30 s for an answer."""
RUNS_REMEMBERED = 256
"""Runs whose shared request subjects one requester remembers (least recently used go first)."""
UNREACHED_REMEMBERED = 50_000
"""Requests whose last renewal failed that one requester remembers (then it forgets them all)."""


class StepRequester:
    """Makes, renews and releases the requests of steps through ``requests``: the explicit
    calls the embedded step-resources port makes for the engine.

    A request is enriched with its step's context (subjects: account with ``is_superuser``,
    project -> pipeline -> pipeline run -> step run, the component that launches the step;
    metadata: names and ids; the pipeline run as preemption group; built in
    :mod:`.step_requests`). Making one rides out an unreachable RM for
    :data:`CREATE_PATIENCE_SECONDS`. The requesting account comes from an :data:`AccountOf`
    resolver: the workspace's own user in embedded mode (:func:`.pairing.fixed_account`), the
    user each run records on the workspace server (:func:`.pairing.recorded_user`).

    A renewal that finds the lease expired says what kept renewals from the RM: its last
    renewal attempts failed (the RM was unreachable), or none was made in time
    (:attr:`MISSED_RENEWALS`: the step's heartbeats did not come)."""

    MISSED_RENEWALS = "because no heartbeat of the step renewed it in time"
    """Why a lease expired that no failed renewal explains (a requester remembers the requests
    whose last renewal failed)."""

    def __init__(
        self,
        store: Store,
        requests: StepRequests,
        account: AccountOf,
        *,
        clock: Callable[[], datetime] = _utc_now,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self._clock, self._sleep = clock, sleep
        self._store = store
        self._requests = requests
        self._account = account
        self._runs: OrderedDict[UUID, RunSubjects] = OrderedDict()
        self._runs_lock = threading.Lock()
        self._unreached: set[UUID] = set()
        self._unreached_lock = threading.Lock()
        """Requests whose last renewal failed to reach the RM."""
        self._late_releases = ReleaseRetries(requests.release)

    def renew(self, request_id: UUID, liveness_timeout_seconds: float) -> str | None:
        """Renew ``request_id``'s lease for the liveness timeout (runtime state running); why
        its step must be cancelled if the request is reclaimed, gone or otherwise over, else
        None (also when the RM is unreachable: the step keeps running while its lease holds)."""
        try:
            request = self._requests.renew(
                request_id,
                math.ceil(liveness_timeout_seconds),
                ResourceRequestRuntimeState.RUNNING,
            )
        except EntityNotFoundError:
            return f"its resource request {request_id} is gone"
        except WharfError as exc:  # the RM is unreachable: keep running while the lease holds
            logger.warning("Could not renew the lease of request %s: %s", request_id, exc)
            self._note_unreached(request_id, True)
            return None
        unreached = self._note_unreached(request_id, False)
        if request.status is ResourceRequestStatus.EXPIRED:
            return lease_lost(RM_UNREACHABLE if unreached else self.MISSED_RENEWALS)
        if request.status in PREEMPTED:
            return reclaimed(request.id, request.status_reason)
        if request.status in RECLAIMED:  # with the RM's reason: who released it, why
            because = f": {request.status_reason.rstrip('.')}" if request.status_reason else ""
            return f"its resource request {request.id} is {request.status.value}{because}"
        return None

    def _note_unreached(self, request_id: UUID, failed: bool) -> bool:
        """Note whether the latest renewal of ``request_id`` failed; whether the one before
        it did."""
        with self._unreached_lock:
            before = request_id in self._unreached
            if not failed:
                self._unreached.discard(request_id)
            elif not before:
                if len(self._unreached) >= UNREACHED_REMEMBERED:
                    self._unreached.clear()
                self._unreached.add(request_id)
            return before

    def request(self, step_id: UUID, step: StepRunCreate) -> UUID:
        """Make the request of the queued step ``step`` that will be written as ``step_id``."""
        return self._create_request(step_id, step)

    def release(self, request_id: UUID, *, by: str | None = None) -> None:
        """Release ``request_id`` (a failure is logged; one that met an outage is retried in
        the background, :mod:`.release_retries`; else the lease lapses on its own). ``by``:
        who ended its step, when not the step itself (``port.ended_by``)."""
        self._release_request(request_id, None, by=by)

    def _release_request(
        self, request_id: UUID, step_name: str | None, *, by: str | None = None
    ) -> None:
        try:
            self._requests.release(request_id, by=by)
        except WharfError as exc:  # never fail a step's bookkeeping
            of = "" if step_name is None else f" of step {step_name}"
            if not transient(exc):  # it lapses on its own
                logger.warning("Could not release resource request %s%s: %s", request_id, of, exc)
                return
            logger.warning(
                "Could not release resource request %s%s (retrying in the background): %s",
                request_id,
                of,
                exc,
            )
            self._late_releases.add(request_id)

    def _create_request(
        self, step_id: UUID, step: StepRunCreate, *, repeatable: bool = False
    ) -> UUID:
        """Make the request of ``step`` (to be written as ``step_id``).

        ``repeatable``: the idempotency key names the step alone, so a creation of the step
        repeated by another call (its first answer lost: a workspace server replica killed
        between the request and the step's write) gets the same request back rather than a
        second one holding resources for nobody; the caller then never releases a request
        of a step that may be created again."""
        from wharf.execution.resources.step_requests import step_request

        spec = step_request(self._run_subjects(step.run_id), step_id, step)
        # The idempotency key makes a creation repeated through an RM outage answer the first
        # one's request. Unless repeatable, it is this call's own: a step's creation retried
        # after its write failed (its request released then) names the step the same and
        # needs a fresh request, not the released one replayed.
        key = f"step-run-{step_id}" if repeatable else f"step-run-{step_id}-{new_id().hex}"
        return retry_through_outage(
            lambda: self._requests.create(spec, idempotency_key=key).id,
            what=f"request resources for step {step.name}",
            patience=CREATE_PATIENCE_SECONDS,
            clock=self._clock,
            sleep=self._sleep,
        )

    def _run_subjects(self, run_id: UUID) -> RunSubjects:
        """The run's shared subjects, read once per run (a run's steps ask many times)."""
        from wharf.execution.resources.step_requests import run_subjects

        with self._runs_lock:
            known = self._runs.get(run_id)
            if known is not None:
                self._runs.move_to_end(run_id)
                return known
        run = self._store.runs.get(run_id)
        subjects = run_subjects(self._store, run, self._account(run))
        with self._runs_lock:
            self._runs[run_id] = subjects
            while len(self._runs) > RUNS_REMEMBERED:
                self._runs.popitem(last=False)
        return subjects
