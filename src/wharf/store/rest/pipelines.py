"""Pipelines and snapshots over REST (``/api/v1/pipelines``, ``/api/v1/snapshots``)."""

from __future__ import annotations

from uuid import UUID

from wharf.store.models import (
    Page,
    PageRequest,
    PipelineFilter,
    PipelineRecord,
    SnapshotCreate,
    SnapshotRecord,
)
from wharf.store.rest.http import HttpSession, page_params

DEFAULT_PAGE = PageRequest()
DEFAULT_FILTER = PipelineFilter()


class RestPipelineRepository:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def get_or_create(self, project_id: UUID, name: str) -> PipelineRecord:
        body = {"project_id": str(project_id), "name": name}
        return self._http.model(PipelineRecord, "POST", "/api/v1/pipelines", body=body)

    def get(self, pipeline_id: UUID) -> PipelineRecord:
        return self._http.model(PipelineRecord, "GET", f"/api/v1/pipelines/{pipeline_id}")

    def list(
        self, filter: PipelineFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[PipelineRecord]:
        params = {
            **page_params(page),
            "project_id": None if filter.project_id is None else str(filter.project_id),
            "name": filter.name,
            "id_prefix": filter.id_prefix,
        }
        return self._http.model(Page[PipelineRecord], "GET", "/api/v1/pipelines", params=params)


class RestSnapshotRepository:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def create(self, snapshot: SnapshotCreate) -> SnapshotRecord:
        return self._http.model(SnapshotRecord, "POST", "/api/v1/snapshots", body=snapshot)

    def get(self, snapshot_id: UUID) -> SnapshotRecord:
        return self._http.model(SnapshotRecord, "GET", f"/api/v1/snapshots/{snapshot_id}")
