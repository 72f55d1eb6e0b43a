"""Run metadata and schedules over REST."""

from __future__ import annotations

import builtins
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from wharf.core.enums import MetadataResourceType
from wharf.store.models import (
    Page,
    PageRequest,
    RunMetadataRecord,
    ScheduleCreate,
    ScheduleFilter,
    ScheduleRecord,
)
from wharf.store.rest.http import HttpSession, page_params

DEFAULT_PAGE = PageRequest()
DEFAULT_FILTER = ScheduleFilter()


class _Items(BaseModel):
    items: list[RunMetadataRecord]


class RestRunMetadataRepository:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def add(
        self, resource_type: MetadataResourceType, resource_id: UUID, values: dict[str, Any]
    ) -> list[RunMetadataRecord]:
        import json

        from wharf.core.errors import InputError

        for key, value in values.items():
            try:  # the store's own check, before the value has to travel as JSON
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise InputError(
                    f"Metadata value of '{key}' is not JSON-serialisable: {exc}"
                ) from None
        body = {
            "resource_type": MetadataResourceType(resource_type).value,
            "resource_id": str(resource_id),
            "values": values,
        }
        return self._http.model(_Items, "POST", "/api/v1/run_metadata", body=body).items

    def list(
        self, resource_type: MetadataResourceType, resource_id: UUID
    ) -> builtins.list[RunMetadataRecord]:
        params = {
            "resource_type": MetadataResourceType(resource_type).value,
            "resource_id": str(resource_id),
        }
        return self._http.model(_Items, "GET", "/api/v1/run_metadata", params=params).items


class RestScheduleRepository:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def create(self, schedule: ScheduleCreate) -> ScheduleRecord:
        return self._http.model(ScheduleRecord, "POST", "/api/v1/schedules", body=schedule)

    def get(self, schedule_id: UUID) -> ScheduleRecord:
        return self._http.model(ScheduleRecord, "GET", f"/api/v1/schedules/{schedule_id}")

    def list(
        self, filter: ScheduleFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[ScheduleRecord]:
        params = {
            **page_params(page),
            **{
                key: None if value is None else str(value)
                for key, value in filter.model_dump().items()
            },
        }
        return self._http.model(Page[ScheduleRecord], "GET", "/api/v1/schedules", params=params)

    def set_active(self, schedule_id: UUID, active: bool) -> ScheduleRecord:
        path = f"/api/v1/schedules/{schedule_id}/active"
        return self._http.model(ScheduleRecord, "PUT", path, body={"active": active})

    def delete(self, schedule_id: UUID) -> None:
        self._http.send("DELETE", f"/api/v1/schedules/{schedule_id}")
