"""The engine's step-run writes that a step's resources go with, made through the port.

Owns the explicit calls of the resource path (:func:`create`, :func:`find_cached_or_create`,
:func:`find_cached_or_create_many`, :func:`heartbeat`, :func:`update`, :func:`finish`,
:func:`ended`). Without a port these are the store's plain calls; with the team adapter its
calls do nothing and the workspace server does the work in its step routes. Invariant: only
these calls set a step's ``resource_request_id`` in embedded mode, and every write that ends a
step that holds a request goes through :func:`ended` (or the release callback of a forced stop
or a lost-run sweep), so no request outlives its step's final status.

Creating step runs rides out a store outage shorter than the liveness timeout: each step run is
named (given its id) before the first try, and the store answers a repeated create of an id it
wrote with what it wrote, so a retry never writes a step twice; a step's request is made once
(itself retried through such an outage, as the embedded Resource Manager's database is the
store's), before the first try, and released only if the write failed for good.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar
from uuid import UUID

from wharf.config.spec import wants_resources
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import IllegalTransitionError, WharfError
from wharf.core.ids import new_id
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.outages import retry_through_outage
from wharf.execution.services import RunServices
from wharf.store.answers import CachedOrCreated, HeartbeatResponse
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

HOLDING = frozenset({ExecutionStatus.RUNNING, ExecutionStatus.CANCELLING, ExecutionStatus.STOPPING})
"""Step statuses whose heartbeats renew the lease: a step that was asked to stop still holds
its resources until its shutdown completes (its final status releases them)."""


def ended(services: RunServices, record: StepRunRecord) -> StepRunRecord:
    """``record`` as a write left it: its request is released if the step ended."""
    resources = services.resources
    if (
        resources is not None
        and record.resource_request_id is not None
        and (record.status.is_finished or record.status is ExecutionStatus.RETRYING)
    ):
        resources.release(record.resource_request_id)
    return record


def update(services: RunServices, step_id: UUID, change: StepRunUpdate) -> StepRunRecord:
    """``store.steps.update``, releasing the step's request if it ended."""
    return ended(services, services.store.steps.update(step_id, change))


def end(
    services: RunServices, step_id: UUID, status: ExecutionStatus, reason: str
) -> StepRunRecord:
    """End the step run with ``status`` and ``reason`` (:func:`update`); if it ended meanwhile
    (a forced stop, a sweep), the end recorded first stands and is returned."""
    change = StepRunUpdate(status=status, status_reason=reason)
    try:
        return update(services, step_id, change)
    except IllegalTransitionError:
        return services.store.steps.get(step_id)


def finish(
    services: RunServices,
    step_id: UUID,
    change: StepRunUpdate,
    outputs: Mapping[str, ArtifactVersionCreate],
) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
    """``store.steps.finish``, releasing the step's request."""
    record, versions = services.store.steps.finish(step_id, change, outputs)
    return ended(services, record), versions


def heartbeat(services: RunServices, step_id: UUID, liveness_timeout: float) -> HeartbeatResponse:
    """The step's heartbeat; a step holding a request renews it, and a running step whose
    request was reclaimed (or is over) is answered (and recorded) ``cancelling``."""
    response = services.store.steps.update_heartbeat(step_id, liveness_timeout)
    resources = services.resources
    request_id = response.resource_request_id
    if resources is None or request_id is None or response.status not in HOLDING:
        return response
    why = resources.renew(request_id, liveness_timeout)
    if why is None or response.status is not ExecutionStatus.RUNNING:
        return response
    cancelling = StepRunUpdate(
        status=ExecutionStatus.CANCELLING, status_reason=f"Cancelling: {why}."
    )
    try:
        services.store.steps.update(step_id, cancelling)
    except IllegalTransitionError:
        return response
    return response.model_copy(update={"status": ExecutionStatus.CANCELLING})


def fail_lost_heartbeats(services: RunServices, now: datetime, run_id: UUID) -> list[StepRunRecord]:
    """``store.steps.fail_lost_heartbeats``, releasing the requests of the steps it failed."""
    failed = services.store.steps.fail_lost_heartbeats(now, run_id)
    for step in failed:
        ended(services, step)
    return failed


def _named(step: StepRunCreate) -> StepRunCreate:
    """``step`` with its id chosen (kept if it has one): the id that makes its creation
    idempotent, the same on every try."""
    return step if step.id is not None else step.model_copy(update={"id": new_id()})


def _live(step: StepRunCreate, record: StepRunRecord) -> StepRunRecord:
    """``record``, the step run written for ``step``; raises if it has ended already: a
    repeated create answers the step run the lost try wrote, which the workspace server may
    have ended (its resource request failed, the error being the outage that was retried)."""
    if record.status.is_finished and not step.status.is_finished:
        raise WharfError(
            record.status_reason or f"Step run {record.name} ended {record.status.value}."
        )
    return record


def through_outage(services: RunServices, call: Callable[[], T], what: str) -> T:
    """``call()`` (safe to repeat: a lookup, a creation of named step runs, or a write that a
    repeat after a lost answer gets refused), repeated through a store outage shorter than the
    run's liveness timeout."""
    return retry_through_outage(
        call,
        what=what,
        patience=liveness_timeout_for(services.heartbeat_interval),
        clock=services.clock,
        sleep=services.sleep,
    )


def _requested(services: RunServices, create: StepRunCreate) -> StepRunCreate:
    """``create`` with its request made, if it is a queued step that asks for resources and the
    port makes requests here (raises the port's ``WharfError``)."""
    resources = services.resources
    if (
        resources is None
        or create.status is not ExecutionStatus.QUEUED
        or not wants_resources(create.spec)
    ):
        return create
    step_id = create.id or new_id()
    request_id = resources.request(step_id, create)
    if request_id is None:
        return create
    return create.model_copy(update={"id": step_id, "resource_request_id": request_id})


def _release(services: RunServices, request_id: UUID | None) -> None:
    if request_id is not None and services.resources is not None:
        services.resources.release(request_id)


def _written(
    services: RunServices,
    create: StepRunCreate,
    write: Callable[[StepRunCreate], StepRunRecord],
) -> tuple[StepRunRecord, UUID | None]:
    """Write ``create`` (named) with its request; the record and the id of the request made
    for it. If the request fails, the step is written all the same and ends failed with the
    reason, and the error is raised; if the write fails (also after riding out an outage), the
    request is released. ``write`` is repeated through an outage."""

    def written(step: StepRunCreate) -> StepRunRecord:
        return through_outage(services, lambda: write(step), f"create step run {step.name}")

    try:  # the request, like the write, rides out an outage (of the embedded RM's database)
        ready = through_outage(
            services, lambda: _requested(services, create), f"request resources for {create.name}"
        )
    except WharfError as exc:
        record = written(create)
        reason = f"Could not request resources: {exc}"
        try:
            services.store.steps.update(
                record.id, StepRunUpdate(status=ExecutionStatus.FAILED, status_reason=reason)
            )
        except WharfError as failed:  # the request's error matters more than this one
            logger.warning("Could not mark step %s failed: %s", record.name, failed)
        raise
    try:
        return written(ready), ready.resource_request_id
    except BaseException:
        _release(services, ready.resource_request_id)
        raise


def create(services: RunServices, step: StepRunCreate) -> StepRunRecord:
    """``store.steps.create``, a queued step that asks for resources with its request (made
    before its row is written, so the row is written once, request id included)."""
    step = _named(step)
    return _live(step, _written(services, step, services.store.steps.create)[0])


def find_cached_or_create(
    services: RunServices,
    step: StepRunCreate,
    project_id: UUID,
    now: datetime,
    *,
    record_hit: bool,
) -> CachedOrCreated:
    """``store.steps.find_cached_or_create``; only a step that will run gets a request (the
    cache is looked up first), released if another run cached the step meanwhile."""
    steps = services.store.steps
    resources = services.resources
    step = _named(step)
    key = step.cache_key
    if (
        resources is None
        or not resources.makes_requests
        or key is None
        or step.status is not ExecutionStatus.QUEUED
        or not wants_resources(step.spec)
        or through_outage(
            services,
            lambda: steps.find_cached(project_id, key, now),
            f"look up the cached step run of step {step.name}",
        )
        is not None
    ):
        plain = through_outage(
            services,
            lambda: steps.find_cached_or_create(step, project_id, now, record_hit=record_hit),
            f"create step run {step.name}",
        )
        if plain.created:
            _live(step, plain.step)
        return plain
    found: list[CachedOrCreated] = []

    def write(ready: StepRunCreate) -> StepRunRecord:
        found.append(steps.find_cached_or_create(ready, project_id, now, record_hit=record_hit))
        return found[-1].step

    _, request_id = _written(services, step, write)
    if not found[-1].created:  # a run of it finished meanwhile: cached, no request needed
        _release(services, request_id)
    else:
        _live(step, found[-1].step)
    return found[-1]


def find_cached_or_create_many(
    services: RunServices,
    steps: Sequence[StepRunCreate],
    project_id: UUID,
    now: datetime,
    *,
    record_hit: bool,
    create: Sequence[bool] | None = None,
) -> list[CachedOrCreated | None]:
    """``store.steps.find_cached_or_create_many``, answers in order: one store call for the
    steps that get no request here; each one that does (a queued step asking for resources,
    with a port that makes requests) goes through :func:`find_cached_or_create`, and so does
    a batch of one step that may be created (the plain call: a chain's steps decide one by
    one)."""
    flags = [True] * len(steps) if create is None else list(create)
    steps = [_named(step) for step in steps]
    if len(steps) == 1 and flags[0]:
        return [find_cached_or_create(services, steps[0], project_id, now, record_hit=record_hit)]
    resources = services.resources
    alone: set[int] = set()
    if resources is not None and resources.makes_requests:
        alone = {
            i
            for i, step in enumerate(steps)
            if flags[i] and step.status is ExecutionStatus.QUEUED and wants_resources(step.spec)
        }
    answers: list[CachedOrCreated | None] = [None] * len(steps)
    for i in sorted(alone):
        answers[i] = find_cached_or_create(
            services, steps[i], project_id, now, record_hit=record_hit
        )
    together = [i for i in range(len(steps)) if i not in alone]
    if together:
        batch = [steps[i] for i in together]
        found = through_outage(
            services,
            lambda: services.store.steps.find_cached_or_create_many(
                batch, project_id, now, record_hit=record_hit, create=[flags[i] for i in together]
            ),
            f"create the step runs of {len(batch)} step(s)",
        )
        for i, answer in zip(together, found, strict=True):
            if answer is not None and answer.created:
                _live(steps[i], answer.step)
            answers[i] = answer
    return answers
