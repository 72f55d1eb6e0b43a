"""The run calls of the store ports composed from the plain calls (:class:`ComposedRuns`, the
REST store's ``runs.finish`` and ``runs.create_with_metadata``), and the checked ``create``
flags of a batched cache decision (:func:`creation_flags`), shared by the stores that decide
one.

Invariants (those of the ports): a run's end is decided from the status the call read, and
decided again if it changed before the update (a stop request). Unlike a transaction, an error
leaves what the calls before it wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from wharf.core.enums import ExecutionStatus, MetadataResourceType
from wharf.core.errors import IllegalTransitionError, InputError
from wharf.core.transitions import run_end
from wharf.store.models import (
    PipelineRunRecord,
    RunCreate,
    RunUpdate,
    StepRunCreate,
)
from wharf.store.ports import RunMetadataRepository

RUN_END_ATTEMPTS = 3
"""Times a composed ``runs.finish`` decides again when the run's status changed under it."""


class _PlainRuns(Protocol):
    """What :class:`ComposedRuns` builds on: the plain run calls and the run's neighbours."""

    @property
    def _metadata(self) -> RunMetadataRepository: ...
    def create(self, run: RunCreate) -> PipelineRunRecord: ...
    def get(self, run_id: UUID) -> PipelineRunRecord: ...
    def update(self, run_id: UUID, update: RunUpdate) -> PipelineRunRecord: ...


class ComposedRuns:
    """``finish``, ``create_with_metadata`` and ``issue_token`` of a ``RunRepository`` (no run
    tokens). A subclass has the plain run calls and sets ``_metadata`` (used by
    ``create_with_metadata``) when it is constructed."""

    def create_with_metadata(
        self: _PlainRuns, run: RunCreate, metadata: dict[str, Any]
    ) -> PipelineRunRecord:
        created = self.create(run)
        if metadata:
            self._metadata.add(MetadataResourceType.PIPELINE_RUN, created.id, metadata)
        return created

    def finish(
        self: _PlainRuns, run_id: UUID, status: ExecutionStatus, reason: str | None
    ) -> PipelineRunRecord:
        for _ in range(RUN_END_ATTEMPTS):
            current = self.get(run_id)
            end = run_end(current.status, status, reason, forced=current.stop_forced)
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


def creation_flags(steps: Sequence[StepRunCreate], create: Sequence[bool] | None) -> list[bool]:
    """The ``create`` flags of ``find_cached_or_create_many`` (default: all True), checked:
    one per step, and every step has a cache key (else InputError)."""
    flags = [True] * len(steps) if create is None else list(create)
    if len(flags) != len(steps):
        raise InputError(f"{len(flags)} create flags for {len(steps)} steps.")
    if any(s.cache_key is None for s in steps):
        raise InputError("find_cached_or_create_many needs step runs with a cache key.")
    return flags
