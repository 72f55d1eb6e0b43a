"""Who a request is: a user or a service account, possibly restricted to one run or to one
schedule's firings (what such a token may do: ``own_run`` and ``own_schedule``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

PrincipalKind = Literal["user", "service_account"]


@dataclass(frozen=True)
class RunScope:
    """What a run-scoped token is limited to: one run, its snapshot and its project."""

    run_id: UUID
    project_id: UUID
    snapshot_id: UUID


@dataclass(frozen=True)
class ScheduleScope:
    """What a schedule-scoped token is limited to: one schedule, its project and snapshot."""

    schedule_id: UUID
    project_id: UUID
    snapshot_id: UUID


@dataclass(frozen=True)
class Principal:
    kind: PrincipalKind
    id: UUID
    name: str
    is_admin: bool
    """Global admin flag of the account; a run- or schedule-scoped principal never acts as
    admin."""
    run: RunScope | None = None
    key_id: UUID | None = None
    """The API key the request authenticated with (directly or through a run token)."""
    schedule: ScheduleScope | None = None

    @property
    def acts_as_admin(self) -> bool:
        return self.is_admin and self.run is None and self.schedule is None

    @property
    def scoped(self) -> bool:
        """True for a run- or schedule-scoped token: not an account's own credential."""
        return self.run is not None or self.schedule is not None

    def member_ids(self) -> dict[str, UUID]:
        """Keyword arguments naming this principal in ``MembershipRepository`` calls."""
        if self.kind == "user":
            return {"user_id": self.id}
        return {"service_account_id": self.id}
