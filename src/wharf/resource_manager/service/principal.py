"""Who is calling the service: the identity every operation is checked against.

Owns :class:`Principal`, :func:`require_admin`, :func:`require_owner`, :func:`may_see`,
:func:`own_subjects`. The service never authenticates anybody: the layer in front of it does
(the HTTP API from an access token, the in-process client from the local user).

Invariants:
- a request belongs to the principal that created it (``requester`` = ``Principal.name``); only
  it or an admin may renew, release, cancel or read it (to anybody else a read answers as for
  an unknown id, and lists leave it out);
- only admins and principals trusted to assert subjects name any subjects (:func:`own_subjects`);
- descriptors, pools and policies are changed by admins only; everybody may read them;
- violations raise :class:`~wharf.resource_manager.contract.errors.PermissionDeniedError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from wharf.resource_manager.contract.errors import PermissionDeniedError
from wharf.resource_manager.domain import SubjectChain, SubjectNode, SubjectType

MAX_NAME_LENGTH = 255


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    """Stable identity of the caller (user or service account name); the request owner key."""
    admin: bool = False
    asserts_subjects: bool = False
    """Trusted to name any subjects in its requests, other accounts included (the workspace
    server's principal); admins are trusted anyway."""

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


def may_see(principal: Principal | None, requester: str) -> bool:
    """Whether ``principal`` may read a request of ``requester`` (None: an in-process caller
    that reads everything)."""
    return principal is None or principal.admin or principal.name == requester


def own_subjects(
    principal: Principal, subjects: tuple[SubjectChain, ...]
) -> tuple[SubjectChain, ...]:
    """The subjects a request of ``principal`` is made for.

    As given for an admin or a principal trusted to assert subjects. Anybody else names only its
    own identity: the request's one subject is the principal's account, derived from its name
    (an ``account`` subject naming the principal may be sent, its claimed attributes are not
    kept); any other subject, another account or a project alike, is refused
    (PermissionDeniedError)."""
    if principal.admin or principal.asserts_subjects:
        return subjects
    for chain in subjects:
        leaf = chain.leaf
        if len(chain.nodes) > 1 or leaf.subject_type is not SubjectType.ACCOUNT:
            node = next(n for n in chain.nodes if n.subject_type is not SubjectType.ACCOUNT)
            named = f"{node.subject_type.value} '{node.subject_id}'"
        elif leaf.subject_id != principal.name:
            named = f"account '{leaf.subject_id}'"
        else:
            continue
        raise PermissionDeniedError(
            f"A request of '{principal.name}' cannot name {named}: it is made for its own "
            f"account ('{principal.name}') only. Only an administrator or a principal trusted "
            "to assert subjects (a workspace server's) may name other subjects."
        )
    own = SubjectNode(
        subject_type=SubjectType.ACCOUNT,
        subject_id=principal.name,
        attributes={"name": principal.name},
    )
    return (SubjectChain(nodes=(own,)),)
