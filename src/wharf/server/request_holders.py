"""Who may end a resource request through the workspace server, and who it says ended it.

Owns :func:`holder_of` and :func:`releaser`. The server makes every request under its own RM
principal, so the RM cannot tell its callers apart: the server decides. A request's holder is
the account it was made for (its ``account`` subject, which the server writes for the user its
run records; else its ``user`` metadata). Rules, on top of the project's write access (members
and project admins; a run token only for its own run's requests):

- a global admin, a project admin of the request's project and a run token of the request's
  own run may release or cancel it;
- any other member only if they are the holder (a user of that name): a teammate's running or
  queued step is not theirs to end (403 naming the holder);
- a service account that is not an admin never holds a request (requests are made for the user
  a run records, not for the account that started it), so it needs a project admin's role.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from wharf.server.auth.errors import PermissionDeniedError

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import ResourceRequestInfo
    from wharf.server.deps import Ctx
    from wharf.server.resource_manager import ServerRequests


def holder_of(info: ResourceRequestInfo) -> str | None:
    """The account ``info`` was made for: its account subject, else its ``user`` metadata."""
    from wharf.resource_manager.domain import SubjectType

    for chain in info.subjects:
        leaf = chain.nodes[-1]
        if len(chain.nodes) == 1 and leaf.subject_type is SubjectType.ACCOUNT:
            return leaf.subject_id
    return info.metadata.get("user")


def _who(ctx: Ctx) -> str:
    principal = ctx.principal
    kind = "user" if principal.kind == "user" else "service account"
    return f"{kind} '{principal.name}'"


def releaser(
    ctx: Ctx, link: ServerRequests, request_id: UUID, info: ResourceRequestInfo | None, *, verb: str
) -> str | None:
    """Who ends request ``request_id`` (``verb``: release or cancel), as its reason will say
    (``user 'alice' (project admin)``); None for a run token of its own run (the run holds it).
    Raises PermissionDeniedError (403) for a member who is not its holder. Call it after the
    project access check of the write (``info``: the request if that check read it)."""
    principal = ctx.principal
    if principal.scoped:
        return None  # the access check let only the request's own run through
    if principal.acts_as_admin:
        return f"{_who(ctx)} (admin)"
    if info is None:
        info = link.requests.get(request_id)
    project_id = link.remember(info).project_id
    if project_id is not None and ctx.access.can_manage_project(project_id):
        return f"{_who(ctx)} (project admin)"
    holder = holder_of(info)
    if principal.kind == "user" and holder is not None and holder == principal.name:
        return f"{_who(ctx)} (its holder)"
    if holder is None:
        refusal = f"Request {request_id} names no user holding it; only a project admin can"
    else:
        refusal = (
            f"Request {request_id} is held by user '{holder}'; only they or a project admin can"
        )
    raise PermissionDeniedError(f"{refusal} {verb} it.")
