"""The engine's per-step store calls: combined where the store offers it, composed where not.

A step costs the engine two writes: look the cache up and create the step run if nothing is
cached (:func:`find_cached_or_create`; on a hit it can record the cached step run in the same
call and sends the found step's output versions along), and record how it ended together with
its outputs (:func:`finish_step`). Stores whose repositories offer the optional capabilities of
``wharf.store.ports`` (the REST store, the SQL store) do each in one call -- one HTTP request
over REST. Any other store, or a wrapper that hides the capabilities (the Resource Manager
pairing of the embedded store), gets the same effect from the plain repository methods. The
engine calls only these functions, so it has one path whatever the store.

Invariants (those of the capabilities): the cache lookup comes before the creation, and nothing
is created on a hit; output versions are created before the step update that links them, so an
update refused (e.g. the step was failed meanwhile) leaves them unreferenced, never half-linked.

:class:`KnownVersions` remembers artifact versions this process created, read or was sent, so
a cached step's outputs are not fetched again. Only their immutable fields matter to the engine (id,
URI, type, materializer, content hash); ``producer_step_run_id`` of a remembered record can
lag behind a later run deletion.
"""

from __future__ import annotations

import builtins
import functools
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import cast
from uuid import UUID

from wharf.core.errors import InputError
from wharf.store.models import (
    MAX_PAGE_SIZE,
    ArtifactVersionCreate,
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    CachedOrCreated,
    PageRequest,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import ArtifactBatchOperations, StepRunBatchOperations, Store

KNOWN_VERSIONS_LIMIT = 10_000
"""Most versions one process remembers (least recently used ones are forgotten first)."""


@functools.cache
def offers(cls: type, capability: type) -> bool:
    """Whether instances of ``cls`` offer ``capability`` (a runtime-checkable protocol of
    methods only). Decided once per class: ``isinstance`` against a protocol inspects every
    member on each call (10-25 µs here), and this is asked on every step."""
    return issubclass(cls, capability)


def find_cached_or_create(
    store: Store, step: StepRunCreate, project_id: UUID, now: datetime, *, record_hit: bool = False
) -> CachedOrCreated:
    """A hit on a reusable step run of ``step.cache_key`` (nothing is created, unless
    ``record_hit``: then ``step.reusing(found)`` is), else the new step run. The composed path
    sends no output versions along; :meth:`KnownVersions.outputs_of` reads what is missing."""
    steps = store.steps
    if offers(type(steps), StepRunBatchOperations):
        return cast(StepRunBatchOperations, steps).find_cached_or_create(
            step, project_id, now, record_hit=record_hit
        )
    if step.cache_key is None:
        raise InputError("find_cached_or_create needs a step run with a cache key.")
    cached = steps.find_cached(project_id, step.cache_key, now)
    if cached is None:
        return CachedOrCreated(step=steps.create(step), created=True)
    recorded = steps.create(step.reusing(cached)) if record_hit else None
    return CachedOrCreated(step=cached, created=False, recorded=recorded)


def finish_step(
    store: Store,
    step_run_id: UUID,
    update: StepRunUpdate,
    outputs: Mapping[str, ArtifactVersionCreate],
) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
    """Create the ``outputs`` versions, then apply ``update`` with them linked as outputs."""
    steps = store.steps
    if offers(type(steps), StepRunBatchOperations):
        return cast(StepRunBatchOperations, steps).finish(step_run_id, update, outputs)
    versions = create_versions(store, outputs)
    if versions:
        links = {**(update.outputs or {}), **{n: v.id for n, v in versions.items()}}
        update = update.model_copy(update={"outputs": links})
    return steps.update(step_run_id, update), versions


def create_versions(
    store: Store, versions: Mapping[str, ArtifactVersionCreate]
) -> dict[str, ArtifactVersionRecord]:
    names = list(versions)
    artifacts = store.artifacts
    if len(names) > 1 and offers(type(artifacts), ArtifactBatchOperations):
        created = cast(ArtifactBatchOperations, artifacts).create_versions(
            [versions[n] for n in names]
        )
        return dict(zip(names, created, strict=True))
    return {name: artifacts.create_version(versions[name]) for name in names}


class KnownVersions:
    """Artifact versions by id, as this process created or read them (thread-safe, bounded)."""

    def __init__(self, limit: int = KNOWN_VERSIONS_LIMIT) -> None:
        self._limit = limit
        self._records: OrderedDict[UUID, ArtifactVersionRecord] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def remember(self, records: Iterable[ArtifactVersionRecord]) -> None:
        with self._lock:
            for record in records:
                self._records[record.id] = record
                self._records.move_to_end(record.id)
            while len(self._records) > self._limit:
                self._records.popitem(last=False)

    def _known(self, ids: Iterable[UUID]) -> dict[UUID, ArtifactVersionRecord]:
        with self._lock:
            found = {}
            for version_id in ids:
                record = self._records.get(version_id)
                if record is not None:
                    self._records.move_to_end(version_id)
                    found[version_id] = record
            return found

    def outputs_of(
        self,
        store: Store,
        step: StepRunRecord,
        sent: Collection[ArtifactVersionRecord] = (),
    ) -> dict[str, ArtifactVersionRecord]:
        """The output versions of ``step``: those ``sent`` along with it (by the cache lookup)
        and remembered ones as they are, the others read from the store (all of them in one
        list call when several are missing: a completed step's outputs are the versions it
        produced)."""
        self.remember(sent)
        known = self._known(step.outputs.values())
        known.update({v.id: v for v in sent if v.id in step.outputs.values()})
        missing = {name: v for name, v in step.outputs.items() if v not in known}
        if len(missing) > 1:
            page = store.artifacts.list_versions(
                ArtifactVersionFilter(producer_step_run_id=step.id),
                PageRequest(size=min(MAX_PAGE_SIZE, max(len(missing), PageRequest().size))),
            )
            produced = {v.id: v for v in page.items if v.id in missing.values()}
            known.update(produced)
        fetched: builtins.list[ArtifactVersionRecord] = []
        for version_id in missing.values():
            if version_id not in known:
                known[version_id] = store.artifacts.get_version(version_id)
            fetched.append(known[version_id])
        self.remember(fetched)
        return {name: known[v] for name, v in step.outputs.items()}
