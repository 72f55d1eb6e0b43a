"""The default combined calls of the store ports, composed from the plain calls: mixins a store
inherits when it cannot do a combined call of ``wharf.store.ports`` in one transaction or one
request (the REST store's ``runs.record`` and ``runs.finish``). ``create_many`` has no
default: it must be all or nothing.

Invariants (those of the ports): the cache lookup comes before any creation and nothing is
created on a hit; output versions are created before the update that links them, so a refused
update leaves them unreferenced, never half-linked; a run's end is decided from the status the
call read, and decided again if it changed before the update (a stop request). Unlike a
transaction, an error leaves what the calls before it wrote.

A cache decision is idempotent by id as the plain ``create`` is: the step run it writes (the
step, or its recorded hit) keeps the id the caller chose, and a decision repeated with it (a
retry whose answer was lost) answers what was written, as created or as the recorded hit,
whatever the lookup finds now (the plain ``create`` answers a repeated create as stored).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import IllegalTransitionError, InputError
from wharf.core.transitions import run_end
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    CachedOrCreated,
    PipelineRecord,
    PipelineRunRecord,
    RunCreate,
    RunStart,
    RunUpdate,
    SnapshotCreate,
    SnapshotRecord,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import ArtifactRepository, PipelineRepository, SnapshotRepository

RUN_END_ATTEMPTS = 3
"""Times a composed ``runs.finish`` decides again when the run's status changed under it."""


class _PlainRuns(Protocol):
    """What :class:`ComposedRuns` builds on: the plain run calls and the run's neighbours."""

    @property
    def _pipelines(self) -> PipelineRepository: ...
    @property
    def _snapshots(self) -> SnapshotRepository: ...
    def create(self, run: RunCreate) -> PipelineRunRecord: ...
    def get(self, run_id: UUID) -> PipelineRunRecord: ...
    def update(self, run_id: UUID, update: RunUpdate) -> PipelineRunRecord: ...


class ComposedRuns:
    """``record``, ``finish`` and ``issue_token`` of a ``RunRepository`` (no run tokens).
    A subclass has the plain run calls and sets ``_pipelines`` and ``_snapshots`` when it is
    constructed (only ``record`` uses them)."""

    def record(
        self: _PlainRuns,
        project_id: UUID,
        pipeline_name: str,
        stack_id: UUID | None,
        spec: PipelineSpec,
        run: RunStart,
    ) -> tuple[PipelineRecord, SnapshotRecord, PipelineRunRecord]:
        pipeline = self._pipelines.get_or_create(project_id, pipeline_name)
        snapshot = self._snapshots.create(
            SnapshotCreate(
                project_id=project_id, pipeline_id=pipeline.id, stack_id=stack_id, spec=spec
            )
        )
        return pipeline, snapshot, self.create(run.of(snapshot))

    def finish(
        self: _PlainRuns, run_id: UUID, status: ExecutionStatus, reason: str | None
    ) -> PipelineRunRecord:
        for _ in range(RUN_END_ATTEMPTS):
            current = self.get(run_id)
            end = run_end(current.status, status, reason)
            if end is None:
                return current
            target, why = end
            try:
                return self.update(run_id, RunUpdate(status=target, status_reason=why))
            except IllegalTransitionError:
                continue  # the status changed under us (a stop request): decide again
        return self.get(run_id)

    def issue_token(self, run_id: UUID) -> str | None:
        return None


class _PlainSteps(Protocol):
    """What :class:`ComposedStepRuns` builds on: the plain step calls and the artifacts."""

    @property
    def _artifacts(self) -> ArtifactRepository: ...
    def create(self, step: StepRunCreate) -> StepRunRecord: ...
    def get(self, step_run_id: UUID) -> StepRunRecord: ...
    def update(self, step_run_id: UUID, update: StepRunUpdate) -> StepRunRecord: ...
    def find_cached(
        self, project_id: UUID, cache_key: str, now: datetime
    ) -> StepRunRecord | None: ...


class ComposedStepRuns:
    """``find_cached_or_create`` and ``finish`` of a ``StepRunRepository``. A subclass has
    the plain step calls and sets ``_artifacts`` (where ``finish`` creates the step's output
    versions) when it is constructed. The composed lookup sends no output versions along."""

    def find_cached_or_create(
        self: _PlainSteps,
        step: StepRunCreate,
        project_id: UUID,
        now: datetime,
        *,
        record_hit: bool = False,
    ) -> CachedOrCreated:
        if step.cache_key is None:
            raise InputError("find_cached_or_create needs a step run with a cache key.")
        cached = self.find_cached(project_id, step.cache_key, now)
        return _decided(self, step, cached, record_hit)

    def find_cached_or_create_many(
        self: _PlainSteps,
        steps: Sequence[StepRunCreate],
        project_id: UUID,
        now: datetime,
        *,
        record_hit: bool = False,
        create: Sequence[bool] | None = None,
    ) -> builtins.list[CachedOrCreated | None]:
        flags = creation_flags(steps, create)
        found = [self.find_cached(project_id, s.cache_key or "", now) for s in steps]
        return [
            None if cached is None and not make else _decided(self, step, cached, record_hit)
            for step, cached, make in zip(steps, found, flags, strict=True)
        ]

    def finish(
        self: _PlainSteps,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        versions = create_versions(self._artifacts, outputs)
        if versions:
            links = {**(update.outputs or {}), **{n: v.id for n, v in versions.items()}}
            update = update.model_copy(update={"outputs": links})
        return self.update(step_run_id, update), versions


def _decided(
    steps: _PlainSteps, step: StepRunCreate, cached: StepRunRecord | None, record_hit: bool
) -> CachedOrCreated:
    """The cache decision of ``step`` once its lookup found ``cached``: the step created on a
    miss, the hit (recorded under ``step``'s id if ``record_hit``). What the plain ``create``
    answers decides: a repeated decision gets the step run a lost try wrote, which may be the
    other of the two."""
    if cached is not None and not record_hit:
        return CachedOrCreated(step=cached, created=False)
    write = step if cached is None else step.reusing(cached).model_copy(update={"id": step.id})
    return _as_written(steps, steps.create(write), cached)


def _as_written(
    steps: _PlainSteps, record: StepRunRecord, cached: StepRunRecord | None
) -> CachedOrCreated:
    """The decision whose written step run is ``record``: the hit it records (of ``cached``,
    or of the step run it names, read), else the step created."""
    original = record.original_step_run_id
    if record.status is not ExecutionStatus.CACHED or original is None:
        return CachedOrCreated(step=record, created=True)
    found = cached if cached is not None and cached.id == original else steps.get(original)
    return CachedOrCreated(step=found, created=False, recorded=record)


def creation_flags(steps: Sequence[StepRunCreate], create: Sequence[bool] | None) -> list[bool]:
    """The ``create`` flags of ``find_cached_or_create_many`` (default: all True), checked:
    one per step, and every step has a cache key (else InputError)."""
    flags = [True] * len(steps) if create is None else list(create)
    if len(flags) != len(steps):
        raise InputError(f"{len(flags)} create flags for {len(steps)} steps.")
    if any(s.cache_key is None for s in steps):
        raise InputError("find_cached_or_create_many needs step runs with a cache key.")
    return flags


class _PlainArtifacts(Protocol):
    def create_version(self, version: ArtifactVersionCreate) -> ArtifactVersionRecord: ...


class ComposedArtifacts:
    """``create_versions`` of an ``ArtifactRepository``: one ``create_version`` after another
    (not all or nothing: an error leaves the versions created before it)."""

    def create_versions(
        self: _PlainArtifacts, versions: Sequence[ArtifactVersionCreate]
    ) -> builtins.list[ArtifactVersionRecord]:
        return [self.create_version(v) for v in versions]


def create_versions(
    artifacts: ArtifactRepository, versions: Mapping[str, ArtifactVersionCreate]
) -> dict[str, ArtifactVersionRecord]:
    """The ``versions`` created, by name: several in one ``create_versions`` call, a single
    one with ``create_version``."""
    names = list(versions)
    if len(names) > 1:
        created = artifacts.create_versions([versions[n] for n in names])
        return dict(zip(names, created, strict=True))
    return {name: artifacts.create_version(versions[name]) for name in names}
