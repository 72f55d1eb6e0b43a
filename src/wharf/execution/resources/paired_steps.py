"""The workspace side of step resources: requests, lease renewal on heartbeats, release.

:class:`ResourceAwareStepRuns` wraps a store's step-run repository. Everything is delegated,
with three additions:

- ``create`` of a *queued* step run whose spec asks for resources creates a Resource Manager
  request enriched with its context (subjects: account with ``is_superuser``, project ->
  pipeline -> pipeline run -> step run, each stack component; metadata: names and ids; the
  pipeline run as preemption group) and stores only the request id on the step run. The step
  run is named first and its request made before its row is written, so the row is written
  once, request id included (a step that turns out cached makes none: the cache is looked up
  first, and a request made for a step that a concurrent run cached meanwhile is released);
- ``update_heartbeat`` renews the request's lease for the liveness timeout (runtime state
  running) and turns a request that is being reclaimed, gone, or otherwise over into a
  ``cancelling`` step, which the heartbeat worker then interrupts;
- ``update`` to a finished or retrying status releases the request, whatever the outcome.

RM errors on renewal are logged and the step keeps running while its lease is valid; the
same wrapper serves embedded mode (in-process RM) and the workspace server (HTTP RM). The
requesting account comes from an :data:`AccountOf` resolver: the workspace's own user in
embedded mode (:func:`fixed_account`), the user each run records on the server
(:func:`recorded_user`). The port's combined calls (``create_many``,
``find_cached_or_create``, ``finish``) get the same behaviour and stay one call of the wrapped
repository each, so pairing never costs the engine (or the server's batch routes) a store
call. What a request says is built in :mod:`.step_requests`.

Invariant: only this wrapper records a step's ``resource_request_id`` (a caller's value is
ignored), so a heartbeat or a finish never renews or releases a request the step did not get.

:class:`StepRequester` holds the explicit calls (request, renew, release) that the embedded
step-resources port makes for the engine (:mod:`wharf.execution.step_writes`);
:class:`ResourceAwareStepRuns` wraps them around a step-run repository for the workspace
server's step routes. Neither is ever installed on a store: the store only keeps the step
run's ``resource_request_id`` column.
"""

from __future__ import annotations

import builtins
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from wharf.config.spec import wants_resources
from wharf.core.enums import (
    ExecutionStatus,
    ResourceRequestRuntimeState,
    ResourceRequestStatus,
)
from wharf.core.errors import (
    EntityNotFoundError,
    IllegalTransitionError,
    WharfError,
)
from wharf.core.ids import new_id
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    CachedOrCreated,
    HeartbeatResponse,
    Page,
    PageRequest,
    PipelineRunRecord,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
    UserRecord,
)
from wharf.store.ports import ResourceRequestRepository, StepRunRepository, Store

if TYPE_CHECKING:  # the RM's models load only when a step actually asks for resources
    from wharf.execution.resources.step_requests import RunSubjects
    from wharf.resource_manager.contract.models import ResourceRequestCreate, ResourceRequestInfo


class StepRequests(ResourceRequestRepository, Protocol):
    """The requests client the wrapper makes, renews and releases its steps' requests with."""

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo: ...


AccountOf = Callable[[PipelineRunRecord], UserRecord]
"""The account a run's resource requests are made for (WharfError when there is none)."""


logger = logging.getLogger(__name__)

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
HOLDING = frozenset({ExecutionStatus.RUNNING, ExecutionStatus.CANCELLING, ExecutionStatus.STOPPING})
"""Step statuses whose heartbeats renew the lease: a step that was asked to stop still holds
its resources until its shutdown completes (its final status releases them)."""
RUNS_REMEMBERED = 256
"""Runs whose shared request subjects one wrapper remembers (least recently used go first)."""
_ALL_STEPS = StepRunFilter()
_FIRST_PAGE = PageRequest()


def _asks_for_resources(step: StepRunCreate) -> bool:
    return step.status is ExecutionStatus.QUEUED and wants_resources(step.spec)


def _no_request(step: StepRunCreate) -> StepRunCreate:
    """``step`` without a request id: only this wrapper sets one, for a request it made."""
    if step.resource_request_id is None:
        return step
    return step.model_copy(update={"resource_request_id": None})


def without_request_id(update: StepRunUpdate) -> StepRunUpdate:
    """``update`` minus any request id: pointing a step at another request would let its
    heartbeats and its finish renew or release a request it does not hold."""
    if update.resource_request_id is None:
        return update
    return update.model_copy(update={"resource_request_id": None})


class StepRequester:
    """Makes, renews and releases the requests of steps through ``requests`` (see the module
    docstring): the explicit calls the embedded step-resources port makes for the engine."""

    def __init__(self, store: Store, requests: StepRequests, account: AccountOf) -> None:
        self._store = store
        self._requests = requests
        self._account = account
        self._runs: OrderedDict[UUID, RunSubjects] = OrderedDict()
        self._runs_lock = threading.Lock()

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
            return None
        if request.status in RECLAIMED:
            return f"its resource request {request.id} is {request.status.value}"
        return None

    def request(self, step_id: UUID, step: StepRunCreate) -> UUID:
        """Make the request of the queued step ``step`` that will be written as ``step_id``."""
        return self._create_request(step_id, step)

    def release(self, request_id: UUID) -> None:
        """Release ``request_id`` (a failure is logged: the lease lapses on its own)."""
        try:
            self._requests.release(request_id)
        except WharfError as exc:
            logger.warning("Could not release resource request %s: %s", request_id, exc)

    def _release_request(self, request_id: UUID, step_name: str) -> None:
        try:
            self._requests.release(request_id)
        except WharfError as exc:  # it lapses on its own; never fail a step's bookkeeping
            logger.warning(
                "Could not release resource request %s of step %s: %s", request_id, step_name, exc
            )

    def _create_request(self, step_id: UUID, step: StepRunCreate) -> UUID:
        from wharf.execution.resources.step_requests import step_request

        spec = step_request(self._run_subjects(step.run_id), step_id, step)
        return self._requests.create(spec, idempotency_key=f"step-run-{step_id}").id

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


class ResourceAwareStepRuns(StepRequester):
    """A ``StepRunRepository`` that keeps the Resource Manager in step with step runs (the
    workspace server's step routes write through it)."""

    def __init__(
        self,
        inner: StepRunRepository,
        store: Store,
        requests: StepRequests,
        account: AccountOf,
    ) -> None:
        super().__init__(store, requests, account)
        self._inner = inner

    # -------------------------------------------------------------- delegated as they are

    def get(self, step_run_id: UUID) -> StepRunRecord:
        return self._inner.get(step_run_id)

    def list(
        self, filter: StepRunFilter = _ALL_STEPS, page: PageRequest = _FIRST_PAGE
    ) -> Page[StepRunRecord]:
        return self._inner.list(filter, page)

    def find_cached(self, project_id: UUID, cache_key: str, now: datetime) -> StepRunRecord | None:
        return self._inner.find_cached(project_id, cache_key, now)

    def fail_lost_heartbeats(
        self, now: datetime, run_id: UUID | None = None
    ) -> builtins.list[StepRunRecord]:
        failed = self._inner.fail_lost_heartbeats(now, run_id)
        for step in failed:
            self._release(step)
        return failed

    # -------------------------------------------------------------- with resources

    def create(self, step: StepRunCreate) -> StepRunRecord:
        return self.create_requested([step], lambda ready: [self._inner.create(ready[0])])[0]

    def create_requested(
        self,
        steps: Sequence[StepRunCreate],
        write: Callable[[builtins.list[StepRunCreate]], builtins.list[StepRunRecord]],
    ) -> builtins.list[StepRunRecord]:
        """Write ``steps`` with ``write`` (one store call), each queued step that asks for
        resources named beforehand and given its request first, so its row is written once,
        request id included. If a request fails, the steps are written all the same, those
        that asked for resources end failed (requests already made are released) and the
        error is raised: a batch is all or nothing for the caller, even where the RM could
        not take part. If the write fails, the requests made for it are released."""
        ready, error = self.with_requests(steps)
        try:
            records = write(ready)
        except BaseException:
            self.release_requests(ready)
            raise
        if error is not None:
            self.fail_unrequested(list(zip(records, steps, strict=True)), f"{error}")
            raise error
        return records

    def with_requests(
        self, steps: Sequence[StepRunCreate]
    ) -> tuple[builtins.list[StepRunCreate], WharfError | None]:
        """``steps`` ready to write: each queued step that asks for resources with a fresh id and
        the request made for it, every other one without a request id (whatever its caller
        set); and the error of the first request that failed (no more are made after it)."""
        ready: builtins.list[StepRunCreate] = []
        error: WharfError | None = None
        for step in steps:
            if error is not None or not _asks_for_resources(step):
                ready.append(_no_request(step))
                continue
            step_id = step.id or new_id()
            try:
                request_id = self._create_request(step_id, step)
            except WharfError as exc:
                error = exc
                ready.append(_no_request(step))
                continue
            ready.append(step.model_copy(update={"id": step_id, "resource_request_id": request_id}))
        return ready, error

    def release_requests(self, steps: Sequence[StepRunCreate]) -> None:
        """Release the requests made for ``steps`` (by :meth:`with_requests`)."""
        for step in steps:
            if step.resource_request_id is not None:
                self._release_request(step.resource_request_id, step.name)

    def update(self, step_run_id: UUID, update: StepRunUpdate) -> StepRunRecord:
        return self.updated(self._inner.update(step_run_id, without_request_id(update)))

    def updated(self, record: StepRunRecord) -> StepRunRecord:
        """``record`` as an update left it: its request is released if the step ended."""
        if record.status.is_finished or record.status is ExecutionStatus.RETRYING:
            self._release(record)
        return record

    def update_heartbeat(
        self, step_run_id: UUID, liveness_timeout_seconds: float
    ) -> HeartbeatResponse:
        response = self._inner.update_heartbeat(step_run_id, liveness_timeout_seconds)
        request_id = response.resource_request_id
        if response.status not in HOLDING or request_id is None:
            return response
        why = self.renew(request_id, liveness_timeout_seconds)
        if why is None or response.status is not ExecutionStatus.RUNNING:
            return response
        try:
            self._inner.update(
                step_run_id,
                StepRunUpdate(
                    status=ExecutionStatus.CANCELLING, status_reason=f"Cancelling: {why}."
                ),
            )
        except IllegalTransitionError:
            return response
        return response.model_copy(update={"status": ExecutionStatus.CANCELLING})

    # -------------------------------------------------------------- combined calls

    def create_many(self, steps: Sequence[StepRunCreate]) -> builtins.list[StepRunRecord]:
        return self.create_requested(steps, self._inner.create_many)

    def find_cached_or_create(
        self, step: StepRunCreate, project_id: UUID, now: datetime, *, record_hit: bool = False
    ) -> CachedOrCreated:
        inner = self._inner
        # A hit (recorded or not) is cached, never queued: it needs no request. Only a step
        # that will run gets one, made before its row is written.
        if (
            not _asks_for_resources(step)
            or step.cache_key is None
            or self.find_cached(project_id, step.cache_key, now) is not None
        ):
            return inner.find_cached_or_create(
                _no_request(step), project_id, now, record_hit=record_hit
            )
        ready, error = self.with_requests([step])
        try:
            found = inner.find_cached_or_create(ready[0], project_id, now, record_hit=record_hit)
        except BaseException:
            self.release_requests(ready)
            raise
        if not found.created:  # a run of it finished meanwhile: cached, no request needed
            self.release_requests(ready)
            return found
        if error is not None:
            self.fail_unrequested([(found.step, step)], f"{error}")
            raise error
        return found

    def finish(
        self,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        record, versions = self._inner.finish(step_run_id, without_request_id(update), outputs)
        return self.updated(record), versions

    # -------------------------------------------------------------- internals

    def fail_unrequested(
        self, created: Sequence[tuple[StepRunRecord, StepRunCreate]], error: str
    ) -> None:
        """End failed every step of ``created`` that asked for resources (a batch in which a
        request failed), releasing the requests that were made."""
        reason = f"Could not request resources: {error}"
        for record, step in created:
            if not _asks_for_resources(step):
                continue
            try:
                failed = self._inner.update(
                    record.id, StepRunUpdate(status=ExecutionStatus.FAILED, status_reason=reason)
                )
            except WharfError as exc:  # the caller's error matters more than this one
                logger.warning("Could not mark step %s failed: %s", record.name, exc)
                failed = record
            self._release(failed)

    def release_ended(self, record: StepRunRecord) -> None:
        """Release the request of ``record``, a step another call ended (a lost-run sweep)."""
        self._release(record)

    def _release(self, record: StepRunRecord) -> None:
        if record.resource_request_id is not None:
            self._release_request(record.resource_request_id, record.name)
