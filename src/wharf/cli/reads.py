"""Where the read-only commands read: :mod:`wharf.cli.quick_reads` when it can answer (an
up-to-date embedded SQLite store), otherwise a :class:`~wharf.sdk.client.Client`.

Both give the same records (see ``quick_reads``), so commands are written once against
:class:`Reads`, the part of ``Client`` they use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar
from uuid import UUID

if TYPE_CHECKING:
    from wharf.config.global_config import WharfConfig
    from wharf.core.enums import ExecutionStatus
    from wharf.store.models import (
        ArtifactRecord,
        ArtifactVersionRecord,
        Page,
        PipelineRecord,
        PipelineRunRecord,
        SnapshotRecord,
        StepRunRecord,
    )

T = TypeVar("T")


class Reads(Protocol):
    def list_pipelines(self, *, page: int = ..., size: int = ...) -> Page[PipelineRecord]: ...

    def list_pipeline_runs(
        self,
        *,
        pipeline: str | UUID | None = ...,
        status: ExecutionStatus | str | None = ...,
        page: int = ...,
        size: int = ...,
    ) -> Page[PipelineRunRecord]: ...

    def get_pipeline(self, name_or_id: str | UUID) -> PipelineRecord: ...

    def get_pipeline_run(self, name_or_id: str | UUID) -> PipelineRunRecord: ...

    def get_snapshot(self, snapshot_id: UUID) -> SnapshotRecord: ...

    def get_snapshot_stack_ids(self, snapshot_ids: Sequence[UUID]) -> dict[UUID, UUID | None]: ...

    def get_stack_name(self, stack_id: UUID) -> str | None: ...

    def get_step_run(self, step_run_id: str | UUID) -> StepRunRecord: ...

    def list_run_steps(
        self, run: str | UUID, *, page: int = ..., size: int = ...
    ) -> Page[StepRunRecord]: ...

    def list_artifacts(
        self, *, name: str | None = ..., page: int = ..., size: int = ...
    ) -> Page[ArtifactRecord]: ...

    def list_artifact_versions(
        self, *, name: str | None = ..., page: int = ..., size: int = ...
    ) -> Page[ArtifactVersionRecord]: ...


def read(query: Callable[[Reads], T], config: WharfConfig | None = None) -> T:
    """``query`` answered by the quick path if it applies, else by a ``Client``."""
    from wharf.cli.quick_reads import QuickReadError, QuickReads
    from wharf.config.global_config import load_config

    config = config or load_config()
    quick = QuickReads.open(config)
    if quick is not None:
        try:
            return query(quick)
        except QuickReadError:
            pass  # the normal store repeats the reads and reports any real problem
        finally:
            quick.close()
    from wharf.sdk.client import Client

    with Client(config) as client:
        return query(client)
