"""The authorization rules, applied by every route through one :class:`Access` per request (the
rules themselves are listed on :class:`Access`).

Invariants: a principal without a role in a project gets the same 404 as for a missing id
(existence does not leak); a run token or schedule token never reaches outside its project and
is refused every account's action; memberships are read at most once per request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from wharf.core.errors import EntityNotFoundError, InputError, WharfError
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.auth.principal import Principal
from wharf.server.state import ServerState
from wharf.store.account_models import ProjectRole

Missing = Callable[[], WharfError]


def missing_project(project_id: UUID) -> Missing:
    return lambda: EntityNotFoundError(f"No project with id {project_id}.")


@dataclass(frozen=True)
class ListScope:
    """The project a list is restricted to (None: all), or ``empty`` when nothing is visible."""

    project_id: UUID | None
    empty: bool = False


class Access:
    """The authorization of one request's principal.

    Rules:
    1. A global admin (user or service account with ``is_admin``) may do everything, unless the
       request uses a run token.
    2. Project-scoped data (pipelines, snapshots, runs, steps, artifacts, metadata, schedules):
       viewers read, members and project admins also write. A principal without a role in the
       project gets the same 404 as for a missing id.
    3. Global data: users are readable by any account; stacks and components by any principal,
       registered (and stacks deleted) by admins and by principals that may write in some
       project; components are reconfigured and deleted by admins only. Users, projects,
       service accounts and API keys are managed by admins only; a project's memberships also
       by the project's admins.
    4. A run token reads its run and its snapshot and reads and writes its run's steps
       (including heartbeats); it starts, beats for and ends its run, nothing else of it (the
       routes ask with ``run_id``; what exactly: ``wharf.server.auth.own_run``);
       ``project_wide`` routes (artifact versions, the cache lookup, metadata of the project)
       are open to it within its project. Anything else is refused (403), anything in another
       project is missing (404).
    5. A schedule token reaches only the routes ``wharf.server.auth.own_schedule`` lists (the
       request's context refuses every other route before it runs); here it is pinned to its
       project (anything elsewhere is missing) and refused every write and every account's
       action.

    Memberships are read once per request, and only when rule 2 or 3 needs them.
    """

    def __init__(self, state: ServerState, principal: Principal) -> None:
        self.state = state
        self.principal = principal
        self._roles: dict[UUID, ProjectRole] | None = None

    def roles(self) -> dict[UUID, ProjectRole]:
        if self._roles is None:
            if self.principal.scoped:
                self._roles = {}
            else:
                self._roles = self.state.accounts.memberships.roles_of(
                    **self.principal.member_ids()
                )
        return self._roles

    # ----------------------------------------------------------------- global

    def require_admin(self, action: str) -> None:
        if not self.principal.acts_as_admin:
            raise PermissionDeniedError(f"Only admins may {action}.")

    def require_account(self, action: str) -> None:
        """Any principal except a run or schedule token."""
        if self.principal.run is not None:
            raise PermissionDeniedError(f"A run-scoped token may not {action}.")
        if self.principal.schedule is not None:
            raise PermissionDeniedError(f"A schedule-scoped token may not {action}.")

    def require_global_write(self, action: str) -> None:
        self.require_account(action)
        if self.principal.acts_as_admin:
            return
        if not any(role.can_write for role in self.roles().values()):
            raise PermissionDeniedError(f"Only admins and project members may {action}.")

    def can_manage_project(self, project_id: UUID) -> bool:
        if self.principal.acts_as_admin:
            return True
        return self.roles().get(project_id) is ProjectRole.ADMIN

    # ----------------------------------------------------------------- project-scoped

    def check(
        self,
        project_id: UUID,
        *,
        write: bool,
        action: str,
        missing: Missing,
        run_id: UUID | None = None,
        snapshot_id: UUID | None = None,
        project_wide: bool = False,
    ) -> None:
        """Allow the action on something of ``project_id`` or raise ``missing()`` / 403.

        ``run_id`` / ``snapshot_id``: the run or snapshot the thing belongs to, which a run
        token of that run may use; ``project_wide``: a run token may use it anywhere in its
        project.
        """
        principal = self.principal
        scope = principal.run
        if scope is not None:
            if project_id != scope.project_id:
                raise missing()
            if run_id is not None and run_id == scope.run_id:
                return
            if snapshot_id is not None and snapshot_id == scope.snapshot_id and not write:
                return
            if project_wide:
                return
            raise PermissionDeniedError(f"A run-scoped token may not {action} outside its run.")
        schedule = principal.schedule
        if schedule is not None:
            if project_id != schedule.project_id:
                raise missing()
            if write:
                raise PermissionDeniedError(f"A schedule-scoped token may not {action}.")
            return  # a read the request's route allowed (``own_schedule.check_route``)
        if principal.is_admin:
            return
        role = self.roles().get(project_id)
        if role is None:
            raise missing()
        if write and not role.can_write:
            raise PermissionDeniedError(
                f"The {role.value} role in project {self._project_name(project_id)} does not "
                f"allow to {action}."
            )

    def _project_name(self, project_id: UUID) -> str:
        """``'NAME'`` of a project the principal has a role in (read only to word a refusal)."""
        try:
            return f"'{self.state.store.projects.get(project_id).name}'"
        except EntityNotFoundError:  # deleted meanwhile
            return str(project_id)

    def list_scope(self, project_id: UUID | None) -> ListScope:
        """The project a list must be restricted to for this principal."""
        scope = self.principal.run
        if scope is not None:
            if project_id is not None and project_id != scope.project_id:
                raise missing_project(project_id)()
            return ListScope(scope.project_id)
        if self.principal.schedule is not None:
            raise PermissionDeniedError("A schedule-scoped token may not list anything.")
        if self.principal.is_admin:
            return ListScope(project_id)
        roles = self.roles()
        if project_id is not None:
            if project_id not in roles:
                raise missing_project(project_id)()
            return ListScope(project_id)
        if not roles:
            return ListScope(None, empty=True)
        if len(roles) == 1:
            return ListScope(next(iter(roles)))
        raise InputError("You belong to several projects: pass project_id.")
