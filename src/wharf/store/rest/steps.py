"""Step runs over REST (``/api/v1/steps``); each batch and combined call is one request (a
batch of cache decisions: one per :data:`DECISIONS_PER_REQUEST` steps, so a chunk that fails
leaves the chunks before it done).

``list`` sends ``names`` as ``name=oneof:[...]``; a filter too long for the server fails with
``RequestTooLargeError`` (414) or ``InputError`` (422): use :func:`list_step_runs_by_names`
to fetch any number of names in chunks.
"""

from __future__ import annotations

import builtins
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from wharf.core.errors import InputError
from wharf.store.answers import CachedOrCreated, HeartbeatResponse
from wharf.store.composed import creation_flags
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    Page,
    PageRequest,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.rest.http import HttpSession, page_params

DEFAULT_PAGE = PageRequest()
DEFAULT_FILTER = StepRunFilter()
ONEOF = "oneof:"
DECISIONS_PER_REQUEST = 200
"""Most cache decisions one ``find_cached_or_create_many`` request carries (a larger batch is
sent in several requests, in order)."""


class _Items(BaseModel):
    items: list[StepRunRecord]


class _Cached(BaseModel):
    step: StepRunRecord | None


class _Decisions(BaseModel):
    items: list[CachedOrCreated | None]


class _Finished(BaseModel):
    step: StepRunRecord
    outputs: dict[str, ArtifactVersionRecord]


def oneof(values: Sequence[str]) -> str:
    return ONEOF + json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))


def _statuses(filter: StepRunFilter) -> builtins.list[str] | None:
    """The statuses both status filters allow (None: no status filter)."""
    allowed: builtins.list[str] | None = None
    if filter.statuses is not None:
        allowed = [s.value for s in filter.statuses]
    if filter.status is not None:
        allowed = (
            [filter.status.value]
            if allowed is None
            else [s for s in allowed if s == filter.status.value]
        )
    return allowed


class RestStepRunRepository:
    """``StepRunRepository`` over HTTP, every combined call one request."""

    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def create(self, step: StepRunCreate) -> StepRunRecord:
        return self._http.model(StepRunRecord, "POST", "/api/v1/steps", body=step)

    def get(self, step_run_id: UUID) -> StepRunRecord:
        return self._http.model(StepRunRecord, "GET", f"/api/v1/steps/{step_run_id}")

    def list(
        self, filter: StepRunFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[StepRunRecord]:
        statuses = _statuses(filter)
        if statuses == [] or filter.names == ():
            return Page(items=[], index=page.index, size=page.size, total=0)
        params: dict[str, Any] = {
            **page_params(page),
            "project_id": None if filter.project_id is None else str(filter.project_id),
            "run_id": None if filter.run_id is None else str(filter.run_id),
            "cache_key": filter.cache_key,
            "id_prefix": filter.id_prefix,
            "name": None if filter.names is None else oneof(filter.names),
            "status": None if statuses is None else oneof(statuses),
        }
        return self._http.model(Page[StepRunRecord], "GET", "/api/v1/steps", params=params)

    def update(self, step_run_id: UUID, update: StepRunUpdate) -> StepRunRecord:
        path = f"/api/v1/steps/{step_run_id}"
        if update.pid is None:
            return self._http.model(StepRunRecord, "PATCH", path, body=update)
        # The process is recorded on its own route, which only the step's own run token may
        # use; the rest of the change (if any) is an ordinary update.
        process = {"pid": update.pid, "host": update.pid_host, "start": update.pid_start}
        record = self._http.model(StepRunRecord, "PUT", f"{path}/process", body=process)
        rest = update.model_copy(update={"pid": None, "pid_host": None, "pid_start": None})
        if rest == StepRunUpdate():
            return record
        return self._http.model(StepRunRecord, "PATCH", path, body=rest)

    def find_cached(self, project_id: UUID, cache_key: str, now: datetime) -> StepRunRecord | None:
        params = {"project_id": str(project_id), "cache_key": cache_key, "now": now.isoformat()}
        return self._http.model(_Cached, "GET", "/api/v1/steps/cached", params=params).step

    def update_heartbeat(
        self, step_run_id: UUID, liveness_timeout_seconds: float
    ) -> HeartbeatResponse:
        seconds = liveness_timeout_seconds
        if not (math.isfinite(seconds) and seconds > 0):  # JSON cannot even carry NaN or inf
            raise InputError(
                f"A liveness timeout must be a positive number of seconds, got {seconds}."
            )
        body = {"liveness_timeout_seconds": seconds}
        path = f"/api/v1/steps/{step_run_id}/heartbeat"
        return self._http.model(HeartbeatResponse, "PUT", path, body=body)

    def fail_lost_heartbeats(
        self, now: datetime, run_id: UUID | None = None
    ) -> builtins.list[StepRunRecord]:
        body = {"now": now.isoformat(), "run_id": None if run_id is None else str(run_id)}
        return self._http.model(_Items, "POST", "/api/v1/steps/lost_heartbeats", body=body).items

    # ----------------------------------------------------------------- combined calls

    def create_many(self, steps: Sequence[StepRunCreate]) -> builtins.list[StepRunRecord]:
        body = {"steps": [s.model_dump(mode="json") for s in steps]}
        return self._http.model(_Items, "POST", "/api/v1/steps/batch", body=body).items

    def find_cached_or_create(
        self, step: StepRunCreate, project_id: UUID, now: datetime, *, record_hit: bool = False
    ) -> CachedOrCreated:
        body = {
            "step": step.model_dump(mode="json"),
            "project_id": str(project_id),
            "now": now.isoformat(),
            "record_hit": record_hit,
        }
        path = "/api/v1/steps/find_cached_or_create"
        return self._http.model(CachedOrCreated, "POST", path, body=body)

    def find_cached_or_create_many(
        self,
        steps: Sequence[StepRunCreate],
        project_id: UUID,
        now: datetime,
        *,
        record_hit: bool = False,
        create: Sequence[bool] | None = None,
    ) -> builtins.list[CachedOrCreated | None]:
        flags = creation_flags(steps, create)
        answers: builtins.list[CachedOrCreated | None] = []
        path = "/api/v1/steps/find_cached_or_create_many"
        for start in range(0, len(steps), DECISIONS_PER_REQUEST):
            end = start + DECISIONS_PER_REQUEST
            body = {
                "steps": [s.model_dump(mode="json") for s in steps[start:end]],
                "project_id": str(project_id),
                "now": now.isoformat(),
                "record_hit": record_hit,
                "create": flags[start:end],
            }
            answers.extend(self._http.model(_Decisions, "POST", path, body=body).items)
        return answers

    def finish(
        self,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        body = {
            "update": update.model_dump(mode="json", exclude_none=True),
            "outputs": {n: v.model_dump(mode="json") for n, v in outputs.items()},
        }
        path = f"/api/v1/steps/{step_run_id}/finish"
        result = self._http.model(_Finished, "POST", path, body=body)
        return result.step, result.outputs


def list_step_runs_by_names(
    steps: RestStepRunRepository, run_id: UUID, names: Sequence[str], budget: int = 5000
) -> builtins.list[StepRunRecord]:
    """Every step run of ``run_id`` named in ``names``, fetched in chunks of at most ``budget``
    characters (ZenML's batched fetch); a chunk the server finds too large (414/422) is split
    in half and retried. A single name still too large raises the server's error."""
    from wharf.store.rest.errors import RequestTooLargeError

    chunks: builtins.list[builtins.list[str]] = [[]]
    used = 0
    for name in dict.fromkeys(names):
        if chunks[-1] and used > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(name)
        used += len(name) + 5
    found: builtins.list[StepRunRecord] = []
    pending = [c for c in chunks if c]
    while pending:
        chunk = pending.pop()
        try:
            found.extend(_all_pages(steps, StepRunFilter(run_id=run_id, names=tuple(chunk))))
        except (RequestTooLargeError, InputError):
            if len(chunk) == 1:
                raise
            half = len(chunk) // 2
            pending.extend([chunk[:half], chunk[half:]])
    return found


def _all_pages(steps: RestStepRunRepository, filter: StepRunFilter) -> builtins.list[StepRunRecord]:
    records: builtins.list[StepRunRecord] = []
    index = 1
    while True:
        page = steps.list(filter, PageRequest(index=index, size=1000, sort="asc"))
        records.extend(page.items)
        if index >= page.total_pages:
            return records
        index += 1
