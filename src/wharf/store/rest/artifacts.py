"""Artifacts and artifact versions over REST, with batch creation."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from uuid import UUID

from pydantic import BaseModel

from wharf.store.models import (
    ArtifactFilter,
    ArtifactRecord,
    ArtifactVersionCreate,
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    Page,
    PageRequest,
)
from wharf.store.rest.http import HttpSession, page_params

DEFAULT_PAGE = PageRequest()
DEFAULT_FILTER = ArtifactFilter()
DEFAULT_VERSION_FILTER = ArtifactVersionFilter()


class _Items(BaseModel):
    items: list[ArtifactVersionRecord]


class RestArtifactRepository:
    """``ArtifactRepository`` over HTTP (a batch of versions is one request)."""

    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def create_version(self, version: ArtifactVersionCreate) -> ArtifactVersionRecord:
        return self._http.model(
            ArtifactVersionRecord, "POST", "/api/v1/artifact_versions", body=version
        )

    def create_versions(
        self, versions: Sequence[ArtifactVersionCreate]
    ) -> builtins.list[ArtifactVersionRecord]:
        body = {"versions": [v.model_dump(mode="json") for v in versions]}
        return self._http.model(_Items, "POST", "/api/v1/artifact_versions/batch", body=body).items

    def get_version(self, version_id: UUID) -> ArtifactVersionRecord:
        path = f"/api/v1/artifact_versions/{version_id}"
        return self._http.model(ArtifactVersionRecord, "GET", path)

    def list_versions(
        self,
        filter: ArtifactVersionFilter = DEFAULT_VERSION_FILTER,
        page: PageRequest = DEFAULT_PAGE,
    ) -> Page[ArtifactVersionRecord]:
        params = {**page_params(page), **filter.model_dump(mode="json", exclude_none=True)}
        return self._http.model(
            Page[ArtifactVersionRecord], "GET", "/api/v1/artifact_versions", params=params
        )

    def get(self, artifact_id: UUID) -> ArtifactRecord:
        return self._http.model(ArtifactRecord, "GET", f"/api/v1/artifacts/{artifact_id}")

    def list(
        self, filter: ArtifactFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[ArtifactRecord]:
        params = {**page_params(page), **filter.model_dump(mode="json", exclude_none=True)}
        return self._http.model(Page[ArtifactRecord], "GET", "/api/v1/artifacts", params=params)
