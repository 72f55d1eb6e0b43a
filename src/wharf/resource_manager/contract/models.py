"""Wire models of the Resource Manager: what clients send and what they get back, shared by the
service, the in-process client, the HTTP API and the HTTP client, so every mode speaks the same
shapes (domain models are reused where already wire-shaped; pages are :mod:`wharf.core.paging`'s).

Invariants: clients send durations in whole seconds (``lease_seconds``), never timestamps, and
every instant in a response comes from the server's clock; numbers are strict (a quantity or
duration is an ``int``, never a float or a bool, so ``1.5`` GPUs is an input error, not
rounded); update models are partial: only the fields a client set are applied (an explicit
``null`` sets a limit to unlimited).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from wharf.core.enums import ReclaimTolerance, ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.paging import MAX_PAGE_SIZE, Page, PageRequest
from wharf.core.resources import NAME_PATTERN, ResourceDemand
from wharf.core.validation import describe_errors
from wharf.resource_manager.domain import (
    Allocation,
    AttributeSelector,
    MissingAction,
    Reclaimable,
    ResourceDescriptor,
    ResourceRequest,
    SubjectChain,
    SubjectSelector,
    SubjectType,
    Unit,
)
from wharf.resource_manager.domain.units import AttributeValue

MAX_DURATION_SECONDS = 10 * 365 * 24 * 3600
"""Longest lease or wait a client may ask for (ten years)."""
KEY_LENGTH = 255
MAX_RENEWALS = 1000
MAX_BY_LENGTH = 512
"""Longest ``by`` of a release or cancellation (who ended a request, in its status reason)."""
"""Most renewals in one bulk call: bounds the request's body (about 100 KB) and the time one
call holds the service's renewal transaction."""

StrictInt = Annotated[int, Field(strict=True)]
NonNegativeStrictInt = Annotated[int, Field(strict=True, ge=0)]
PositiveStrictInt = Annotated[int, Field(strict=True, gt=0)]
DurationSeconds = Annotated[int, Field(strict=True, gt=0, le=MAX_DURATION_SECONDS)]
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Key = Annotated[str, Field(min_length=1, max_length=KEY_LENGTH)]
QuantityValue = NonNegativeStrictInt | Annotated[str, Field(min_length=1, max_length=64)]
"""A whole number of the resource's *base* unit (``8000`` mCPU), or a string with a unit
(``"8CPU"``, ``"512GiB"``; a bare ``"8"`` means the descriptor's default unit). The server
converts it exactly or rejects it."""
TargetSettings = dict[str, Any]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# ----------------------------------------------------------------------------- descriptors


class DescriptorUpdate(_Wire):
    """Changes to a custom descriptor (stock descriptors are read-only)."""

    units: tuple[Unit, ...] | None = Field(default=None, min_length=1)
    default_unit: str | None = None
    attributes: dict[str, AttributeValue] | None = None
    description: str | None = None


# ----------------------------------------------------------------------------- pools


class CapacityClassSpec(_Wire):
    name: Name
    capacity: dict[str, QuantityValue | None] = Field(min_length=1)
    """Resource name -> quantity; null means unlimited (still accounted)."""
    rank: StrictInt = 0
    reclaimable: Reclaimable = Reclaimable.NEVER
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    concurrency_limit: NonNegativeStrictInt | None = None
    target_settings: TargetSettings = Field(default_factory=dict)


class PoolCreate(_Wire):
    name: Name
    rank: StrictInt = 0
    classes: tuple[CapacityClassSpec, ...] = Field(min_length=1)
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    concurrency_limit: NonNegativeStrictInt | None = None
    target_settings: TargetSettings = Field(default_factory=dict)
    fair_sharing: bool = False


class PoolUpdate(_Wire):
    """Partial: only fields that were set are applied; ``classes`` replaces all classes."""

    name: Name | None = None
    rank: StrictInt | None = None
    classes: tuple[CapacityClassSpec, ...] | None = Field(default=None, min_length=1)
    attributes: dict[str, AttributeValue] | None = None
    concurrency_limit: NonNegativeStrictInt | None = None
    target_settings: TargetSettings | None = None
    fair_sharing: bool | None = None


# ----------------------------------------------------------------------------- policies


class GrantResourceSpec(_Wire):
    reserved: QuantityValue = 0
    limit: QuantityValue | None = None
    missing_action: MissingAction = MissingAction.OMIT
    default_value: QuantityValue | None = None


class GrantSpec(_Wire):
    class_name: Name = Field(alias="class")
    resources: dict[str, GrantResourceSpec] = Field(default_factory=dict)
    target_settings: TargetSettings = Field(default_factory=dict)


class PolicyCreate(_Wire):
    name: Name
    pool: Key
    """Pool id or name."""
    subject_selector: SubjectSelector
    priority: StrictInt = 0
    priority_lane: bool = False
    preemption_group: Key | None = None
    concurrency_limit: NonNegativeStrictInt | None = None
    grants: tuple[GrantSpec, ...] = ()
    target_settings: TargetSettings = Field(default_factory=dict)
    fair_share_weight: PositiveStrictInt = 1


class PolicyUpdate(_Wire):
    """Partial: only fields that were set are applied; ``grants`` replaces all grants."""

    name: Name | None = None
    subject_selector: SubjectSelector | None = None
    priority: StrictInt | None = None
    priority_lane: bool | None = None
    preemption_group: Key | None = None
    concurrency_limit: NonNegativeStrictInt | None = None
    grants: tuple[GrantSpec, ...] | None = None
    target_settings: TargetSettings | None = None
    fair_share_weight: PositiveStrictInt | None = None


# ----------------------------------------------------------------------------- requests


DemandSpec = ResourceDemand
"""One thing a request needs: the one demand model of :mod:`wharf.core.resources` (its wire
spelling is ``resource`` and ``class``)."""


def _parsed_selectors(demand: ResourceDemand) -> ResourceDemand:
    """``demand`` with its selectors checked and in their canonical form (the selector's own
    dump), so bodies, idempotency fingerprints and errors (422) are what they were when the
    contract parsed selectors itself."""
    if demand.resource_selector is None and demand.class_selector is None:
        return demand
    update: dict[str, Any] = {}
    for name in ("resource_selector", "class_selector"):
        value = getattr(demand, name)
        if value is not None:
            try:
                selector = AttributeSelector.model_validate(value)
            except ValidationError as error:
                raise ValueError(f"{name}: {describe_errors(error.errors())}") from None
            update[name] = selector.model_dump(by_alias=True)
    return demand.model_copy(update=update)


class ResourceRequestCreate(_Wire):
    subjects: tuple[SubjectChain, ...] = Field(min_length=1, max_length=64)
    demands: tuple[ResourceDemand, ...] = Field(min_length=1, max_length=64)
    pool: Key | None = None
    """Pool id or name; restricts the request to that pool."""
    pool_selector: AttributeSelector | None = None
    reclaim_tolerance: ReclaimTolerance = ReclaimTolerance.NONE
    lease_seconds: DurationSeconds | None = None
    """The request lapses unless renewed within this many seconds; None: it never lapses."""
    allocation_wait_timeout_seconds: DurationSeconds | None = None
    metadata: dict[Key, Key] = Field(default_factory=dict, max_length=64)
    preemption_group: SubjectSelector | None = None

    @field_validator("demands", mode="after")
    @classmethod
    def _selectors(cls, demands: tuple[ResourceDemand, ...]) -> tuple[ResourceDemand, ...]:
        return tuple(_parsed_selectors(demand) for demand in demands)


class ResourceRequestRenew(_Wire):
    """Body of a renewal: the new lease duration (from now) and the holder's runtime state."""

    lease_seconds: DurationSeconds
    runtime_state: ResourceRequestRuntimeState | None = None


class ResourceRequestEnd(_Wire):
    """Optional body of a release or cancellation: who ends the request, for its status reason
    (``user 'alice' (project admin)``: a workspace server releasing for one of its users)."""

    by: str | None = Field(default=None, min_length=1, max_length=MAX_BY_LENGTH)
    manual: bool = False
    """An operator's command (``wharf request release``), not its holder ending its own work:
    the caller is named even when it made the request (a workspace server sharing the RM
    administrator's key makes its requests as that administrator)."""


class ResourceRequestInfo(ResourceRequest):
    """A request as the Resource Manager reports it."""

    requester: str
    """Who created it; only they (or an admin) may renew, release or cancel it."""


class RenewalItem(_Wire):
    """One renewal of a bulk call: which request, its new lease (from now), its runtime state."""

    id: UUID
    lease_seconds: DurationSeconds
    runtime_state: ResourceRequestRuntimeState | None = None


class ResourceRequestRenewMany(_Wire):
    """Body of a bulk renewal: at most :data:`MAX_RENEWALS` items, answered in their order."""

    renewals: tuple[RenewalItem, ...] = Field(json_schema_extra={"maxItems": MAX_RENEWALS})

    @field_validator("renewals", mode="before")
    @classmethod
    def _at_most(cls, value: Any) -> Any:
        # Checked before the items are parsed: an oversized batch costs no item validation.
        if isinstance(value, list | tuple) and len(value) > MAX_RENEWALS:
            raise ValueError(
                f"At most {MAX_RENEWALS} renewals per call, got {len(value)}: split them "
                "into several calls."
            )
        return value


class RenewalOutcome(_Wire):
    """One item's answer: the renewed request, or the error a single renewal would have got
    (``status`` its HTTP status, ``error`` the Wharf error class name, ``detail`` the text)."""

    id: UUID
    request: ResourceRequestInfo | None = None
    status: int = 200
    error: str | None = None
    detail: str | None = None


class ResourceRequestRenewals(_Wire):
    """Answer of a bulk renewal: one outcome per item, in the order they were sent."""

    results: tuple[RenewalOutcome, ...]


class RequestFilter(_Wire):
    status: tuple[ResourceRequestStatus, ...] | None = None
    """Any of these statuses."""
    subject_id: Key | None = None
    subject_type: SubjectType | None = None
    pool: Key | None = None
    """Pool id or name: requests admitted to it or asking for it by name."""
    metadata: dict[Key, Key] = Field(default_factory=dict)
    """Every entry must match (``metadata[key]=value``)."""
    requester: Key | None = None
    ids: tuple[UUID, ...] | None = Field(default=None, min_length=1)
    """Any of these request ids (at least one: no query parameter can say "none")."""

    def query_params(self) -> dict[str, str | list[str]]:
        """The filter as query parameters of a list route: repeated ``status`` and ``id``,
        ``metadata[key]=value``; unset filters are left out."""
        params: dict[str, str | list[str]] = {}
        if self.status:
            params["status"] = [status.value for status in self.status]
        for name in ("subject_id", "pool", "requester"):
            value = getattr(self, name)
            if value is not None:
                params[name] = value
        if self.subject_type is not None:
            params["subject_type"] = self.subject_type.value
        if self.ids is not None:
            params["id"] = [str(request_id) for request_id in self.ids]
        for key, value in self.metadata.items():
            params[f"metadata[{key}]"] = value
        return params


class QueueEntry(_Wire):
    position: int
    """1-based position in the pool's queue order in the latest cycle."""
    reason: str
    request: ResourceRequestInfo


class PoolAllocation(Allocation):
    """An allocation held in a pool, with the state of the request that holds it."""

    request_status: ResourceRequestStatus
    requester: str
    metadata: dict[str, str] = Field(default_factory=dict)
    """The request's metadata: ``user`` names the workspace user a workspace server asked
    for (the requester is then the server's own principal)."""
    allocated_at: AwareDatetime | None = None


class QueuePositionInfo(_Wire):
    pool_id: UUID
    pool_name: str
    position: int
    queue_length: int
    reason: str


class ExplanationInfo(_Wire):
    """Why a request is where it is (see :func:`wharf.resource_manager.scheduler.explain`)."""

    request_id: UUID
    status: ResourceRequestStatus
    outcome: Literal["admitted", "waiting", "rejected", "expired", "not_pending"]
    reason: str
    positions: tuple[QueuePositionInfo, ...] = ()
    blocker: str | None = None
    blocking_policy_id: UUID | None = None
    blocking_pool_id: UUID | None = None
    blocking_class: str | None = None
    blocking_resource: str | None = None
    would_have_to_end: tuple[UUID, ...] = ()
    preemptible: tuple[UUID, ...] = ()


# ----------------------------------------------------------------------------- auth


class LoginRequest(_Wire):
    """``POST /v1/auth/login``: an API key, or a username and password (exactly one of the two)."""

    api_key: str | None = Field(default=None, min_length=1, max_length=1024)
    username: str | None = Field(default=None, min_length=1, max_length=KEY_LENGTH)
    password: str | None = Field(default=None, min_length=1, max_length=1024)

    @model_validator(mode="after")
    def _one_credential(self) -> LoginRequest:
        by_key = self.api_key is not None
        by_password = self.username is not None or self.password is not None
        if by_key == by_password or (by_password and not (self.username and self.password)):
            raise ValueError("Give either api_key, or username and password.")
        return self


class AccessToken(_Wire):
    """A signed bearer token; ``expires_in`` lets clients schedule a refresh with their own
    monotonic clock (``expires_at`` is the server's instant, for display)."""

    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_at: AwareDatetime
    expires_in: float
    """Seconds from issue to expiry."""
    principal: str
    admin: bool


__all__ = [
    "MAX_DURATION_SECONDS",
    "MAX_PAGE_SIZE",
    "MAX_RENEWALS",
    "AccessToken",
    "CapacityClassSpec",
    "DemandSpec",
    "DescriptorUpdate",
    "ExplanationInfo",
    "GrantResourceSpec",
    "GrantSpec",
    "LoginRequest",
    "Page",
    "PageRequest",
    "PolicyCreate",
    "PolicyUpdate",
    "PoolAllocation",
    "PoolCreate",
    "PoolUpdate",
    "QuantityValue",
    "QueueEntry",
    "QueuePositionInfo",
    "RenewalItem",
    "RenewalOutcome",
    "RequestFilter",
    "ResourceDemand",
    "ResourceDescriptor",
    "ResourceRequestCreate",
    "ResourceRequestEnd",
    "ResourceRequestInfo",
    "ResourceRequestRenew",
    "ResourceRequestRenewMany",
    "ResourceRequestRenewals",
]
