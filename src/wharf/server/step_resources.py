"""The step-resource application service: what the workspace server's step routes do besides
storing a step run.

Owns :class:`StepResourceService`, on ``ServerState.step_runs``: the step routes and the
lost-run sweeps write step runs through it, getting, renewing and releasing their steps'
Resource Manager requests (the calls themselves are the engine's
:class:`wharf.execution.resources.requester.StepRequester`).

Invariant: the server's store is never wrapped; a client's ``resource_request_id`` is stripped
from every step write, so a step only ever points at a request the server made for it.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from uuid import UUID

from wharf.config.spec import wants_resources
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityNotFoundError, IllegalTransitionError, WharfError
from wharf.core.ids import new_id
from wharf.execution.outages import transient
from wharf.execution.resources.pairing import recorded_user
from wharf.execution.resources.port import ended_by
from wharf.execution.resources.requester import StepRequester, StepRequests
from wharf.execution.step_writes import HOLDING
from wharf.store.answers import CachedOrCreated, HeartbeatResponse
from wharf.store.composed import creation_flags
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import Store

logger = logging.getLogger(__name__)


def _asks_for_resources(step: StepRunCreate) -> bool:
    return step.status is ExecutionStatus.QUEUED and wants_resources(step.spec)


def _no_request(step: StepRunCreate) -> StepRunCreate:
    """``step`` without a request id: only the server sets one, for a request it made."""
    if step.resource_request_id is None:
        return step
    return step.model_copy(update={"resource_request_id": None})


def _unused(ready: StepRunCreate, record: StepRunRecord) -> bool:
    """Whether the request made for ``ready`` is not the one of ``record``, the step run the
    store answered for it (written by another call of a repeated create)."""
    return (
        ready.resource_request_id is not None
        and record.resource_request_id != ready.resource_request_id
    )


def without_request_id(update: StepRunUpdate) -> StepRunUpdate:
    """``update`` minus any request id: pointing a step at another request would let its
    heartbeats and its finish renew or release a request it does not hold."""
    if update.resource_request_id is None:
        return update
    return update.model_copy(update={"resource_request_id": None})


class StepResourceService(StepRequester):
    """The step writes of the server's routes, with their steps' requests.

    A queued step that asks for resources gets its request (for the user its run records) before
    its row is written, so the row is written once, request id included. A step that turns out
    cached makes none: the cache is looked up first, and a request made for a step that a
    concurrent run cached meanwhile is released. A heartbeat renews the request and turns a
    reclaimed one into a ``cancelling`` step; a finished or retrying status releases it. The
    combined calls (``create_many``, ``find_cached_or_create``, ``finish``) stay one store call
    each. A batch in which a request fails is written all the same, its asking steps end failed
    (requests already made are released) and the error is raised; unless the RM was only
    unreachable (an outage, 503): then nothing is written, so the caller's retry of the same
    steps asks again, and an RM outage as long as the engine's patience costs no step.

    A step's request is keyed by its step run id alone (``repeatable``): a creation repeated
    after its answer was lost, by this replica or another (the first one killed between the
    request and the write), gets the same request back, never a second one while the first
    holds resources for nobody until its lease lapses. So a request made for a write that
    failed in an outage is kept for that retry (it lapses if none comes).

    A create repeated with the id of a step run that was written (a client's retry whose answer
    was lost) makes no request: the store answers the step run as written, with its request. A
    request made for a step the store answers as written by another call with another request
    is released; one made for a write refused for good is released too.
    """

    MISSED_RENEWALS = (
        "because no heartbeat of the step reached the workspace server in time (the server "
        "was unreachable, or the step stalled)"
    )

    def __init__(self, store: Store, requests: StepRequests) -> None:
        super().__init__(store, requests, recorded_user(store))
        self._inner = store.steps

    # -------------------------------------------------------------- with resources

    def find_cached(self, project_id: UUID, cache_key: str, now: datetime) -> StepRunRecord | None:
        """The lookup before a step's request is made (a hit needs none)."""
        return self._inner.find_cached(project_id, cache_key, now)

    def fail_lost_heartbeats(
        self, now: datetime, run_id: UUID | None = None
    ) -> builtins.list[StepRunRecord]:
        failed = self._inner.fail_lost_heartbeats(now, run_id)
        for step in failed:
            self._release(step)
        return failed

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
        not take part (an RM outage writes nothing: see the class). If the write is refused
        for good, the requests made for it are released; in an outage they are kept for the
        caller's retry."""
        ready, error = self.with_requests(steps)
        if error is not None and transient(error):
            raise error  # an outage: write nothing; the retry gets the requests made back
        try:
            records = write(ready)
        except BaseException as exc:
            if not transient(exc):  # an outage keeps them for the retry (the write may be done)
                self.release_requests(ready)
            raise
        self.release_requests([s for s, r in zip(ready, records, strict=True) if _unused(s, r)])
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
            if error is not None or not _asks_for_resources(step) or self._written(step):
                ready.append(_no_request(step))
                continue
            step_id = step.id or new_id()
            try:
                request_id = self._create_request(step_id, step, repeatable=True)
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
        if error is not None and transient(error):
            raise error  # an outage: nothing made, nothing written; a retry asks again
        try:
            found = inner.find_cached_or_create(ready[0], project_id, now, record_hit=record_hit)
        except BaseException as exc:
            if not transient(exc):  # an outage keeps it for the retry (the write may be done)
                self.release_requests(ready)
            raise
        if not found.created or _unused(ready[0], found.step):
            # a run of it finished meanwhile (cached, no request needed), or another call
            # wrote the step with its own request
            self.release_requests(ready)
            if not found.created:
                return found
        if error is not None:
            self.fail_unrequested([(found.step, step)], f"{error}")
            raise error
        return found

    def find_cached_or_create_many(
        self,
        steps: Sequence[StepRunCreate],
        project_id: UUID,
        now: datetime,
        *,
        record_hit: bool = False,
        create: Sequence[bool] | None = None,
    ) -> builtins.list[CachedOrCreated | None]:
        """One store call for the steps that ask for no resources (or may not be created);
        each one that does goes through :meth:`find_cached_or_create` (its request made
        only if it misses). Answers in order."""
        flags = creation_flags(steps, create)
        alone = {i for i, s in enumerate(steps) if flags[i] and _asks_for_resources(s)}
        answers: builtins.list[CachedOrCreated | None] = [None] * len(steps)
        for i in sorted(alone):
            answers[i] = self.find_cached_or_create(
                steps[i], project_id, now, record_hit=record_hit
            )
        together = [i for i in range(len(steps)) if i not in alone]
        if together:
            found = self._inner.find_cached_or_create_many(
                [_no_request(steps[i]) for i in together],
                project_id,
                now,
                record_hit=record_hit,
                create=[flags[i] for i in together],
            )
            for i, answer in zip(together, found, strict=True):
                answers[i] = answer
        return answers

    def finish(
        self,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        record, versions = self._inner.finish(step_run_id, without_request_id(update), outputs)
        return self.updated(record), versions

    # -------------------------------------------------------------- internals

    def _written(self, step: StepRunCreate) -> bool:
        """Whether a step run is stored under ``step``'s id already (a repeated create)."""
        if step.id is None:
            return False
        try:
            self._inner.get(step.id)
        except EntityNotFoundError:
            return False
        return True

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
        """Release the request of ``record``, a step another call ended (a lost-run sweep),
        saying so in the request's status reason."""
        if record.resource_request_id is not None:
            self._release_request(record.resource_request_id, record.name, by=ended_by(record))

    def _release(self, record: StepRunRecord) -> None:
        if record.resource_request_id is not None:
            self._release_request(record.resource_request_id, record.name)
