"""Who is calling the service: the identity every operation is checked against.

Owns: :class:`Principal`, :func:`require_admin`, :func:`require_owner`.

The service never authenticates anybody. The layer in front of it does (the HTTP API from an
access token, the in-process client from the local user) and passes the resulting principal.

Invariants:
- a request belongs to the principal that created it (``requester`` = ``Principal.name``);
  only that principal or an admin may renew, release or cancel it;
- descriptors, pools and policies are changed by admins only; everybody may read them;
- violations raise :class:`~wharf.resource_manager.contract.errors.PermissionDeniedError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from wharf.resource_manager.contract.errors import PermissionDeniedError

MAX_NAME_LENGTH = 255


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    """Stable identity of the caller (user or service account name); the request owner key."""
    admin: bool = False

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > MAX_NAME_LENGTH:
            raise ValueError(f"A principal name must have 1 to {MAX_NAME_LENGTH} characters.")


def require_admin(principal: Principal, action: str) -> None:
    if not principal.admin:
        raise PermissionDeniedError(f"Only an administrator may {action}.")


def require_owner(principal: Principal, requester: str, request_id: UUID) -> None:
    if not principal.admin and principal.name != requester:
        raise PermissionDeniedError(
            f"Resource request {request_id} belongs to another requester; only its requester "
            "or an administrator may change it."
        )
