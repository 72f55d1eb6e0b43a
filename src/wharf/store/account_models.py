"""Account records of the workspace server: credentials, service accounts, API keys and
project memberships (the embedded store has no login).

Secrets never appear here in clear: passwords as argon2 hashes, API keys as SHA-256 digests of
their random secret part. Like every store record, immutable snapshots of rows with
timezone-aware UTC times.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from uuid import UUID

from wharf.store.models import _Frozen


class ProjectRole(StrEnum):
    """A principal's role in one project: viewers read, members also write, admins also manage
    the project's memberships."""

    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"

    @property
    def can_write(self) -> bool:
        return self is not ProjectRole.VIEWER


class UserCredentialRecord(_Frozen):
    """How a user logs in. A user without a credential row cannot log in at all."""

    user_id: UUID
    password_hash: str | None
    """argon2 hash; None for users who only log in through the external identity provider."""
    external_id: str | None
    """The user's id at the external identity provider (unique), if linked."""
    active: bool
    """An inactive user cannot log in and every token issued to them is refused."""
    token_generation: int
    """Tokens carry the generation they were issued in; ``revoke_tokens`` increments it, so
    every earlier token is refused (logout). A counter, not a time: replicas' clocks may differ."""
    updated: datetime


class ServiceAccountRecord(_Frozen):
    """A non-human principal (CI, orchestrators) that authenticates with API keys."""

    id: UUID
    name: str
    description: str | None
    is_admin: bool
    active: bool
    created: datetime


class ApiKeyRecord(_Frozen):
    """An API key of a service account, without its secret (shown once, at creation)."""

    id: UUID
    service_account_id: UUID
    name: str
    created: datetime
    last_used: datetime | None
    """Updated at most once per ``touch`` interval (about a minute), not on every request."""
    revoked_at: datetime | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class ApiKeyAuthRecord(_Frozen):
    """What authenticating one API key needs, read in one query."""

    key: ApiKeyRecord
    key_hash: str
    account: ServiceAccountRecord


class MembershipRecord(_Frozen):
    """A user's or a service account's role in a project (exactly one of the two ids is set)."""

    id: UUID
    project_id: UUID
    user_id: UUID | None
    service_account_id: UUID | None
    role: ProjectRole
    created: datetime
