"""The store's behavioural contract: one Protocol per aggregate, plus the :class:`Store` bundle.

Every backend (SQL and REST) implements these exactly; the contract suite in
``tests/store/contract`` checks each rule on every backend. Shared rules:
- ``get`` of an unknown id raises :class:`~wharf.core.errors.EntityNotFoundError` naming the
  kind and the id; creating a duplicate unique name raises ``EntityExistsError``.
- Every write is atomic: on any error nothing of it is stored.
- Status updates are checked against ``wharf.core.transitions`` (an illegal one raises
  ``IllegalTransitionError`` and changes nothing); ``start_time`` is set when a run or step
  first becomes running, ``end_time`` when it reaches a finished status.
- Lists are ordered by creation time (then id) and paged with :class:`PageRequest`.
- An id chosen for a new record may be stored as another (``wharf.server.chosen_ids``).

The workspace server's account ports (login, service accounts, memberships) are
``wharf.store.account_ports``'s.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ComponentType, ExecutionStatus, MetadataResourceType
from wharf.store.answers import CachedOrCreated, HeartbeatResponse, LostRun, RunHeartbeatResponse
from wharf.store.models import (
    ArtifactFilter,
    ArtifactRecord,
    ArtifactVersionCreate,
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    ComponentCreate,
    ComponentRecord,
    OrchestratorProcess,
    Page,
    PageRequest,
    PipelineFilter,
    PipelineRecord,
    PipelineRunRecord,
    ProjectRecord,
    RunCreate,
    RunFilter,
    RunMetadataRecord,
    RunStart,
    RunUpdate,
    ScheduleCreate,
    ScheduleFilter,
    ScheduleRecord,
    SnapshotCreate,
    SnapshotRecord,
    StackRecord,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
    UserRecord,
)


class UserRepository(Protocol):
    def create(self, name: str, *, is_admin: bool = False) -> UserRecord: ...
    def get(self, user_id: UUID) -> UserRecord: ...
    def get_by_name(self, name: str) -> UserRecord: ...
    def list(self, page: PageRequest = ...) -> Page[UserRecord]: ...


class ProjectRepository(Protocol):
    def create(self, name: str) -> ProjectRecord: ...
    def get(self, project_id: UUID) -> ProjectRecord: ...
    def get_by_name(self, name: str) -> ProjectRecord: ...
    def list(self, page: PageRequest = ...) -> Page[ProjectRecord]: ...


class StackRepository(Protocol):
    """Stack components and the stacks that group them (one component per type)."""

    def create_component(self, component: ComponentCreate) -> ComponentRecord: ...
    def get_component(self, component_id: UUID) -> ComponentRecord: ...
    def get_component_by_name(self, type: ComponentType, name: str) -> ComponentRecord: ...
    def list_components(
        self, type: ComponentType | None = None, page: PageRequest = ...
    ) -> Page[ComponentRecord]: ...
    def create_stack(self, name: str, components: dict[ComponentType, UUID]) -> StackRecord:
        """Every component id must exist and be of the type it is listed under."""
        ...

    def get_stack(self, stack_id: UUID) -> StackRecord: ...
    def get_stack_by_name(self, name: str) -> StackRecord: ...
    def list_stacks(self, page: PageRequest = ...) -> Page[StackRecord]: ...
    def update_component(
        self, component_id: UUID, configuration: dict[str, Any]
    ) -> ComponentRecord:
        """Replace the component's whole configuration (name, type and flavor stay); the caller
        validates and merges. Refused with IllegalOperationError, naming the runs, while a run is
        unfinished on a stack that lists the component (its steps read the component as they
        start, so a change could split the run across two configurations). An unknown id raises
        EntityNotFoundError."""
        ...

    def delete_component(self, component_id: UUID) -> None:
        """Delete an unused component. One that a stack lists is refused with
        IllegalOperationError naming those stacks (delete them first); an unknown id raises
        EntityNotFoundError."""
        ...

    def delete_stack(self, stack_id: UUID) -> None:
        """Delete a stack; its components are kept. Refused with IllegalOperationError while a
        run of one of its snapshots is unfinished or a schedule (paused or not; a deleted
        schedule is gone) uses one of its snapshots. Otherwise, in one transaction, its
        snapshots get ``stack_id = None`` (finished runs keep their history), then its links
        and the stack row go. An unknown id raises EntityNotFoundError."""
        ...


class PipelineRepository(Protocol):
    def get_or_create(self, project_id: UUID, name: str) -> PipelineRecord:
        """The pipeline of that name in the project, created if missing (race-safe)."""
        ...

    def get(self, pipeline_id: UUID) -> PipelineRecord: ...
    def list(
        self, filter: PipelineFilter = ..., page: PageRequest = ...
    ) -> Page[PipelineRecord]: ...


class SnapshotRepository(Protocol):
    def create(self, snapshot: SnapshotCreate) -> SnapshotRecord:
        """A repeat under ``snapshot.id`` answers the snapshot written (another: EntityExists)."""
        ...

    def get(self, snapshot_id: UUID) -> SnapshotRecord: ...


class RunRepository(Protocol):
    def create(self, run: RunCreate) -> PipelineRunRecord:
        """Raises EntityExistsError if (snapshot, orchestrator_run_id) is taken. A repeat under
        ``run.id`` answers the run it wrote (another run there: EntityExistsError)."""
        ...

    def create_with_metadata(self, run: RunCreate, metadata: dict[str, Any]) -> PipelineRunRecord:
        """``create``, with the run's metadata ``metadata`` (``run_metadata.add``'s checks): both
        or neither where the store has transactions (composed, an error leaves the run)."""
        ...

    def get(self, run_id: UUID) -> PipelineRunRecord: ...
    def get_status(self, run_id: UUID) -> ExecutionStatus:
        """Just the status: the engine reads it before starting each step."""
        ...

    def list(self, filter: RunFilter = ..., page: PageRequest = ...) -> Page[PipelineRunRecord]: ...
    def update(self, run_id: UUID, update: RunUpdate) -> PipelineRunRecord:
        """Checks the status transition. The orchestrator run id can be set once: setting a
        different value on a run that has one raises IllegalOperationError."""
        ...

    def get_or_create(self, run: RunCreate) -> tuple[PipelineRunRecord, bool]:
        """The run for ``run`` and whether it was created.

        1. If ``run.orchestrator_run_id`` is set and a non-placeholder run of that snapshot has
           it, return that run.
        2. If ``run`` is not a placeholder, replace a placeholder run (status initializing or
           provisioning) of the same snapshot, pipeline and project whose orchestrator run id
           equals ``run.orchestrator_run_id`` or is NULL, preferring the equal one, then the
           oldest: its status, name and orchestrator run id become those of ``run``.
        3. Otherwise create it (falling back to 1 if a concurrent writer created it first).
        """
        ...

    def delete(self, run_id: UUID) -> None:
        """Delete a run and its step runs (used when a run fails to initialise)."""
        ...

    def record(
        self,
        project_id: UUID,
        pipeline_name: str,
        stack_id: UUID | None,
        spec: PipelineSpec,
        run: RunStart,
    ) -> tuple[PipelineRecord, SnapshotRecord, PipelineRunRecord]:
        """The records of a pipeline call: ``pipelines.get_or_create(project_id,
        pipeline_name)``, then ``snapshots.create`` of ``spec`` on ``stack_id`` for that
        pipeline, then ``create`` of ``run`` for that snapshot, all or nothing (a refused run
        leaves no snapshot or pipeline behind). Repeated with
        ``run.id`` (and ``run.snapshot_id``) it answers what it wrote, as ``create`` does."""
        ...

    def finish(
        self, run_id: UUID, status: ExecutionStatus, reason: str | None
    ) -> PipelineRunRecord:
        """End the run as :func:`wharf.core.transitions.run_end` decides from its current
        status, read by this call (a finished run is returned unchanged; a stopping one ends
        stopped, or failed): a stop committed before it is always honoured."""
        ...

    def issue_token(self, run_id: UUID) -> str | None:
        """A credential for the processes of one run, scoped to it (it reads the run and its
        snapshot and writes the run's steps, artifacts and heartbeats, nothing else); None from
        a store whose other processes need none (a database they open themselves)."""
        ...

    def update_heartbeat(self, run_id: UUID, process: OrchestratorProcess) -> RunHeartbeatResponse:
        """The orchestrating process ``process`` is alive: record it on the run, with
        ``last_heartbeat = now`` and ``heartbeat_deadline = now + its liveness timeout`` (store
        clock), if the run is running or stopping (a finished run is left unchanged); return
        the run's status and whether its stop is forced."""
        ...

    def list_sweep_candidates(
        self, now: datetime, host: str | None = None
    ) -> builtins.list[PipelineRunRecord]:
        """Running or stopping runs with a heartbeat deadline that passed before ``now``, or
        whose orchestrating process runs on ``host``; oldest first."""
        ...

    def fail_lost_orchestrators(
        self, now: datetime, orphaned: Sequence[UUID] = (), spared: Sequence[UUID] = ()
    ) -> builtins.list[LostRun]:
        """End failed, with reason "orchestrator lost (last seen <time>)", every running or
        stopping run whose heartbeat deadline passed before ``now`` and each run of
        ``orphaned`` still running or stopping with a heartbeat record, but none of ``spared``
        (runs whose orchestrating process the caller saw alive); every unfinished step of
        those runs ends failed (its deadline cleared). Returns them with the steps it ended.
        Safe to run concurrently (each run is ended once); releasing the steps' resource
        requests is the caller's (``wharf.store.lost_runs``)."""
        ...


class StepRunRepository(Protocol):
    def create(self, step: StepRunCreate) -> StepRunRecord:
        """The run must exist and not be stopping or stopped (else ``RunStoppingError``: this
        is how the engine learns of a stop at a step boundary, in the same write that would
        start the step); inputs/outputs must name existing artifact versions."""
        ...

    def get(self, step_run_id: UUID) -> StepRunRecord: ...
    def list(self, filter: StepRunFilter = ..., page: PageRequest = ...) -> Page[StepRunRecord]: ...
    def update(self, step_run_id: UUID, update: StepRunUpdate) -> StepRunRecord: ...
    def find_cached(self, project_id: UUID, cache_key: str, now: datetime) -> StepRunRecord | None:
        """The newest completed step run of the project with this cache key whose
        ``cache_expires_at`` is unset or later than ``now``."""
        ...

    def update_heartbeat(
        self, step_run_id: UUID, liveness_timeout_seconds: float
    ) -> HeartbeatResponse:
        """Record a heartbeat: ``last_heartbeat = now``, ``heartbeat_deadline = now + timeout``
        (store clock), and return the step's and its run's current status. A finished step is
        left unchanged (its status is returned, so the worker stops beating)."""
        ...

    def fail_lost_heartbeats(
        self, now: datetime, run_id: UUID | None = None
    ) -> builtins.list[StepRunRecord]:
        """Mark failed, with reason "Heartbeat lost: ...", every unfinished step run (of ``run_id``
        if given) whose ``heartbeat_deadline`` is before ``now``; return them. Safe to run
        concurrently from several processes (each step is failed once)."""
        ...

    def create_many(self, steps: Sequence[StepRunCreate]) -> builtins.list[StepRunRecord]:
        """Create several step runs at once: all or nothing, records in the order given."""
        ...

    def find_cached_or_create(
        self, step: StepRunCreate, project_id: UUID, now: datetime, *, record_hit: bool = False
    ) -> CachedOrCreated:
        """The engine's start of a step. A hit (``created`` False) if ``find_cached(project_id,
        step.cache_key, now)`` finds a step run (with its output versions where the store
        reads them in the same call), and, if ``record_hit``, with the step run recording it
        as ``recorded``: ``step.reusing(found)`` created under ``step``'s id (else nothing is
        created: the caller records the hit). Else ``create(step)`` (``created`` True). The
        lookup comes before the creation. ``step.cache_key`` must be set (else InputError).

        Repeated with the id of a step run it wrote (a retry whose answer was lost), it
        answers what it wrote, as ``create`` does, whatever the lookup finds now: the miss
        created (also once another run cached its key, and whatever ``record_hit``), or the
        hit recorded (the step run found then, also once it expired)."""
        ...

    def find_cached_or_create_many(
        self,
        steps: Sequence[StepRunCreate],
        project_id: UUID,
        now: datetime,
        *,
        record_hit: bool = False,
        create: Sequence[bool] | None = None,
    ) -> builtins.list[CachedOrCreated | None]:
        """:meth:`find_cached_or_create` of each of ``steps`` (one ``now``), answers in order:
        the engine's cache decisions for several steps at once. ``create`` (default: all
        True) says per step whether a miss creates it; a miss that may not is answered None
        and creates nothing (a hit is recorded all the same if ``record_hit``). Every lookup
        comes before any creation of the call, so two steps of one call with one cache key
        both miss or both hit. A refused step (``RunStoppingError``, an existing step) fails
        the whole call: all or nothing where the store has a transaction for it. Repeated, a
        step whose step run it wrote is answered as written (see :meth:`find_cached_or_create`),
        also where a miss it may not create now would be answered None."""
        ...

    def finish(
        self,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        """The engine's end of a step: create the ``outputs`` artifact versions, then apply
        ``update`` with them added to its outputs. The versions are created first: if the
        update is refused they remain unreferenced (or, in one transaction, are not created),
        never half-linked. A repeat of a finish that completed the step (a retry whose answer
        was lost) creates nothing and answers the step run and output versions it recorded."""
        ...


class ArtifactRepository(Protocol):
    def create_version(self, version: ArtifactVersionCreate) -> ArtifactVersionRecord:
        """Creates the artifact on first use; versions count 1, 2, ... per artifact, even
        under concurrent writers."""
        ...

    def create_versions(
        self, versions: Sequence[ArtifactVersionCreate]
    ) -> builtins.list[ArtifactVersionRecord]:
        """Create several versions at once: all or nothing, numbered as if created one after
        the other in the order given."""
        ...

    def get_version(self, version_id: UUID) -> ArtifactVersionRecord: ...
    def list_versions(
        self, filter: ArtifactVersionFilter = ..., page: PageRequest = ...
    ) -> Page[ArtifactVersionRecord]: ...
    def get(self, artifact_id: UUID) -> ArtifactRecord: ...
    def list(
        self, filter: ArtifactFilter = ..., page: PageRequest = ...
    ) -> Page[ArtifactRecord]: ...


class RunMetadataRepository(Protocol):
    def add(
        self, resource_type: MetadataResourceType, resource_id: UUID, values: dict[str, Any]
    ) -> list[RunMetadataRecord]:
        """Values must be JSON-serialisable; a later value for a key wins on read."""
        ...

    def list(
        self, resource_type: MetadataResourceType, resource_id: UUID
    ) -> list[RunMetadataRecord]: ...


class ScheduleRepository(Protocol):
    def create(self, schedule: ScheduleCreate) -> ScheduleRecord: ...
    def get(self, schedule_id: UUID) -> ScheduleRecord: ...
    def list(
        self, filter: ScheduleFilter = ..., page: PageRequest = ...
    ) -> Page[ScheduleRecord]: ...
    def set_active(self, schedule_id: UUID, active: bool) -> ScheduleRecord: ...
    def delete(self, schedule_id: UUID) -> None: ...


class Store(Protocol):
    """All repositories of one metadata store; the unit the engine and Client depend on.

    The combined calls (``runs.record``/``finish``/``create_with_metadata``,
    ``steps.find_cached_or_create``/``find_cached_or_create_many``/``finish``/``create_many``,
    ``artifacts.create_versions``) are part of the ports, so no caller asks what a store offers.
    A store does each in one transaction or one request (the REST store composes ``finish`` and
    ``create_with_metadata`` from the plain calls, ``wharf.store.composed``: same effect, more
    round trips).
    """

    users: UserRepository
    projects: ProjectRepository
    stacks: StackRepository
    pipelines: PipelineRepository
    snapshots: SnapshotRepository
    runs: RunRepository
    steps: StepRunRepository
    artifacts: ArtifactRepository
    run_metadata: RunMetadataRepository
    schedules: ScheduleRepository

    @property
    def url(self) -> str:
        """The store's location, with any password masked."""
        ...

    def close(self) -> None: ...
