"""The workspace server's account ports: principals (users' credentials, service accounts and
their API keys) and project memberships, bundled as :class:`AccountStore`.

Not part of :class:`~wharf.store.ports.Store` (the embedded store needs no login). The shared
rules of ``wharf.store.ports`` hold: unknown ids raise EntityNotFoundError, duplicate names
EntityExistsError, every write is atomic.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol
from uuid import UUID

from wharf.store.account_models import (
    ApiKeyAuthRecord,
    ApiKeyRecord,
    MembershipRecord,
    ProjectRole,
    ServiceAccountRecord,
    UserCredentialRecord,
)
from wharf.store.models import Page, PageRequest, UserRecord


class CredentialRepository(Protocol):
    """Users' login data (one row per user who can log in) and their admin flag."""

    def get(self, user_id: UUID) -> UserCredentialRecord: ...
    def get_by_external_id(self, external_id: str) -> UserCredentialRecord: ...
    def set_password(self, user_id: UUID, password_hash: str | None) -> UserCredentialRecord:
        """Create the user's credential row if missing (active); the user must exist."""
        ...

    def link_external(self, user_id: UUID, external_id: str) -> UserCredentialRecord:
        """Raises EntityExistsError if another user is linked to ``external_id``."""
        ...

    def set_active(self, user_id: UUID, active: bool) -> UserCredentialRecord: ...
    def deactivated(self, user_ids: Collection[UUID]) -> set[UUID]:
        """Those of ``user_ids`` that are deactivated (one read)."""
        ...

    def revoke_tokens(self, user_id: UUID) -> UserCredentialRecord:
        """Refuse every token issued to the user so far (increments ``token_generation``)."""
        ...

    def set_admin(self, user_id: UUID, is_admin: bool) -> UserRecord: ...


class ServiceAccountRepository(Protocol):
    def create(
        self, name: str, *, description: str | None = None, is_admin: bool = False
    ) -> ServiceAccountRecord: ...
    def get(self, account_id: UUID) -> ServiceAccountRecord: ...
    def get_by_name(self, name: str) -> ServiceAccountRecord: ...
    def list(self, page: PageRequest = ...) -> Page[ServiceAccountRecord]: ...
    def set_active(self, account_id: UUID, active: bool) -> ServiceAccountRecord: ...


class ApiKeyRepository(Protocol):
    def create(self, service_account_id: UUID, name: str, key_hash: str) -> ApiKeyRecord:
        """Key names are unique per service account."""
        ...

    def get(self, key_id: UUID) -> ApiKeyRecord: ...
    def get_for_auth(self, key_id: UUID) -> ApiKeyAuthRecord:
        """The key, its hash and its account in one read."""
        ...

    def list(self, service_account_id: UUID, page: PageRequest = ...) -> Page[ApiKeyRecord]: ...
    def revoke(self, key_id: UUID) -> ApiKeyRecord:
        """Idempotent: a revoked key keeps its first revocation time."""
        ...

    def touch(self, key_id: UUID, min_interval_seconds: float) -> None:
        """Set ``last_used = now`` unless it is already within ``min_interval_seconds``."""
        ...


class MembershipRepository(Protocol):
    """Project roles of users and service accounts: pass exactly one of ``user_id`` and
    ``service_account_id`` (otherwise InputError)."""

    def set_role(
        self,
        project_id: UUID,
        role: ProjectRole,
        *,
        user_id: UUID | None = None,
        service_account_id: UUID | None = None,
    ) -> MembershipRecord:
        """Add the member, or change the role of an existing one."""
        ...

    def remove(
        self,
        project_id: UUID,
        *,
        user_id: UUID | None = None,
        service_account_id: UUID | None = None,
    ) -> None: ...
    def role_of(
        self,
        project_id: UUID,
        *,
        user_id: UUID | None = None,
        service_account_id: UUID | None = None,
    ) -> ProjectRole | None: ...
    def roles_of(
        self, *, user_id: UUID | None = None, service_account_id: UUID | None = None
    ) -> dict[UUID, ProjectRole]:
        """Project id -> role, for every project the principal belongs to."""
        ...

    def list(self, project_id: UUID, page: PageRequest = ...) -> Page[MembershipRecord]: ...


class AccountStore(Protocol):
    """The server's account repositories, on the same database as its :class:`Store`."""

    credentials: CredentialRepository
    service_accounts: ServiceAccountRepository
    api_keys: ApiKeyRepository
    memberships: MembershipRepository
