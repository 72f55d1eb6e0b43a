"""Response bodies that are not store records (records and ``Page[...]`` are sent as they are)."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from wharf.core.enums import ExecutionStatus
from wharf.store.account_models import ApiKeyRecord, ProjectRole
from wharf.store.models import (
    ArtifactVersionRecord,
    PipelineRecord,
    PipelineRunRecord,
    SnapshotRecord,
    StepRunRecord,
    UserRecord,
)

T = TypeVar("T")


class Response(BaseModel):
    model_config = ConfigDict(frozen=True)


class Items(Response, Generic[T]):
    items: list[T]


class Health(Response):
    status: Literal["ok"] = "ok"
    version: str


class TokenResponse(Response):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: float
    """Seconds until the token expires."""


class ApiKeyCreated(Response):
    key: ApiKeyRecord
    secret: str
    """The full API key: shown this once, never stored in clear."""


class Me(Response):
    kind: Literal["user", "service_account"]
    id: UUID
    name: str
    is_admin: bool
    run_id: UUID | None
    """Set for a run-scoped token."""
    projects: dict[UUID, ProjectRole]


class ListedUser(UserRecord):
    """A user as ``GET /users`` lists them: with whether they may log in."""

    active: bool
    """False once an admin deactivated the user (``wharf user update NAME --inactive``)."""


class RunStatusResponse(Response):
    status: ExecutionStatus


class RunGetOrCreateResponse(Response):
    run: PipelineRunRecord
    created: bool


class RunRecordResponse(Response):
    pipeline: PipelineRecord
    snapshot: SnapshotRecord
    run: PipelineRunRecord


class CachedStepResponse(Response):
    step: StepRunRecord | None


class FinishResponse(Response):
    step: StepRunRecord
    outputs: dict[str, ArtifactVersionRecord]
