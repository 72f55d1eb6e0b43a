"""Pipeline runs over REST (``/api/v1/runs``), with run-scoped tokens for a run's processes.

A pipeline call's records go in one call (``POST /api/v1/runs/record``, one transaction on the
server: a refused run leaves no snapshot behind). A server from before that route is refused
(``ServerTooOldError``, from the session), never served by the plain calls composed: they would
leave a refused run's snapshot behind. The server has no route for a run's end or a
run created with its metadata: ``finish`` and ``create_with_metadata`` are the plain calls
composed (``wharf.store.composed``).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from pydantic import BaseModel

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus
from wharf.store.answers import LostRun, RunHeartbeatResponse
from wharf.store.composed import ComposedRuns
from wharf.store.models import (
    OrchestratorProcess,
    Page,
    PageRequest,
    PipelineRecord,
    PipelineRunRecord,
    RunCreate,
    RunFilter,
    RunStart,
    RunUpdate,
    SnapshotRecord,
)
from wharf.store.ports import RunMetadataRepository
from wharf.store.rest.http import HttpSession, page_params

DEFAULT_PAGE = PageRequest()
DEFAULT_FILTER = RunFilter()


class _Status(BaseModel):
    status: ExecutionStatus


class _GetOrCreate(BaseModel):
    run: PipelineRunRecord
    created: bool


class _Recorded(BaseModel):
    pipeline: PipelineRecord
    snapshot: SnapshotRecord
    run: PipelineRunRecord


class _RecordBody(BaseModel):
    project_id: UUID
    pipeline_name: str
    stack_id: UUID | None
    spec: PipelineSpec
    run: RunStart


class _Token(BaseModel):
    access_token: str


class _Runs(BaseModel):
    items: list[PipelineRunRecord]


class _LostRuns(BaseModel):
    items: list[LostRun]


class RestRunRepository(ComposedRuns):
    """``RunRepository`` over HTTP."""

    def __init__(self, http: HttpSession, metadata: RunMetadataRepository) -> None:
        self._http = http
        self._metadata = metadata

    def create(self, run: RunCreate) -> PipelineRunRecord:
        return self._http.model(PipelineRunRecord, "POST", "/api/v1/runs", body=run)

    def record(
        self,
        project_id: UUID,
        pipeline_name: str,
        stack_id: UUID | None,
        spec: PipelineSpec,
        run: RunStart,
    ) -> tuple[PipelineRecord, SnapshotRecord, PipelineRunRecord]:
        body = _RecordBody(
            project_id=project_id,
            pipeline_name=pipeline_name,
            stack_id=stack_id,
            spec=spec,
            run=run,
        )
        found = self._http.model(_Recorded, "POST", "/api/v1/runs/record", body=body)
        return found.pipeline, found.snapshot, found.run

    def get(self, run_id: UUID) -> PipelineRunRecord:
        return self._http.model(PipelineRunRecord, "GET", f"/api/v1/runs/{run_id}")

    def get_status(self, run_id: UUID) -> ExecutionStatus:
        return self._http.model(_Status, "GET", f"/api/v1/runs/{run_id}/status").status

    def list(
        self, filter: RunFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[PipelineRunRecord]:
        params = {**page_params(page), **filter.model_dump(mode="json", exclude_none=True)}
        return self._http.model(Page[PipelineRunRecord], "GET", "/api/v1/runs", params=params)

    def update(self, run_id: UUID, update: RunUpdate) -> PipelineRunRecord:
        return self._http.model(PipelineRunRecord, "PATCH", f"/api/v1/runs/{run_id}", body=update)

    def get_or_create(self, run: RunCreate) -> tuple[PipelineRunRecord, bool]:
        result = self._http.model(_GetOrCreate, "POST", "/api/v1/runs/get_or_create", body=run)
        return result.run, result.created

    def delete(self, run_id: UUID) -> None:
        self._http.send("DELETE", f"/api/v1/runs/{run_id}")

    def issue_token(self, run_id: UUID) -> str | None:
        return self._http.model(_Token, "POST", f"/api/v1/runs/{run_id}/token").access_token

    def update_heartbeat(self, run_id: UUID, process: OrchestratorProcess) -> RunHeartbeatResponse:
        path = f"/api/v1/runs/{run_id}/heartbeat"
        return self._http.model(RunHeartbeatResponse, "PUT", path, body=process)

    def list_sweep_candidates(
        self, now: datetime, host: str | None = None
    ) -> builtins.list[PipelineRunRecord]:
        params = {"now": now.isoformat(), **({} if host is None else {"host": host})}
        return self._http.model(_Runs, "GET", "/api/v1/runs/sweep_candidates", params=params).items

    def fail_lost_orchestrators(
        self, now: datetime, orphaned: Sequence[UUID] = (), spared: Sequence[UUID] = ()
    ) -> builtins.list[LostRun]:
        body = {
            "now": now.isoformat(),
            "orphaned": [str(i) for i in orphaned],
            "spared": [str(i) for i in spared],
        }
        return self._http.model(_LostRuns, "POST", "/api/v1/runs/lost", body=body).items
