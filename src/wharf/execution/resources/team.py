"""The team adapter of the step-resources port: a workspace server's request routes.

Owns :class:`WorkspaceRequests` (``/api/v1/resource_requests`` over the REST store's HTTP
session; the workspace's requests link in team mode) and :class:`TeamStepResources` (the port
over it). Invariants: the server makes, renews and releases a step's request
(:mod:`wharf.server.step_resources`), this process only polls and marks started; a filter the
workspace does not offer is refused (``InputError``) rather than dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import InputError
from wharf.execution.resources.port import StepResources
from wharf.execution.resources.wait_room import WaitRoom, left_queue_of
from wharf.execution.resources.waiting import RoomedResources

if TYPE_CHECKING:
    from wharf.core.paging import Page, PageRequest
    from wharf.resource_manager.contract.models import RequestFilter, ResourceRequestInfo
    from wharf.resource_manager.contract.protocol import RequestsLink
    from wharf.store.rest.http import HttpSession

PATH = "/api/v1/resource_requests"
FILTERS = frozenset(
    {"status", "subject_id", "subject_type", "pool", "requester", "metadata", "ids"}
)


def list_params(
    query: RequestFilter | None, page: PageRequest | None, project_id: UUID | None
) -> dict[str, Any]:
    """The route's query parameters: repeated ``status``, ``metadata[KEY]=VALUE``, paging."""
    params: dict[str, Any] = {"project_id": None if project_id is None else str(project_id)}
    if page is not None:
        params.update(index=page.index, size=page.size, sort=page.sort)
    if query is None:
        return params
    unsupported = sorted(
        name for name in query.model_fields_set - FILTERS if getattr(query, name) is not None
    )
    if unsupported:
        raise InputError(
            f"Resource request lists through the workspace cannot filter by "
            f"{', '.join(unsupported)}."
        )
    params.update(query.query_params())
    return params


class WorkspaceRequests:
    """A workspace server's steps' requests over ``http``: get, list, renew, release (also
    what ``wharf request`` and ``Client`` use); answers are the RM's own wire models.
    ``project_id``: the project a list names when its caller names none (a pipeline's
    process lists its own project's requests; a member of several projects must name one)."""

    def __init__(self, http: HttpSession, project_id: UUID | None = None) -> None:
        self._http = http
        self._project_id = project_id

    def _info(self, data: Any) -> ResourceRequestInfo:
        from wharf.resource_manager.contract.models import ResourceRequestInfo

        return ResourceRequestInfo.model_validate(data)

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        return self._info(self._http.send("GET", f"{PATH}/{request_id}"))

    def list(
        self,
        query: RequestFilter | None = None,
        page: PageRequest | None = None,
        *,
        project_id: UUID | None = None,
    ) -> Page[ResourceRequestInfo]:
        """``project_id``: the project to list (members of several projects must name one);
        None: this link's own project, if it has one."""
        from wharf.core.paging import Page
        from wharf.resource_manager.contract.models import ResourceRequestInfo

        project_id = self._project_id if project_id is None else project_id
        data = self._http.send("GET", PATH, params=list_params(query, page, project_id))
        return Page[ResourceRequestInfo].model_validate(data)

    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        body = {
            "lease_seconds": lease_seconds,
            "runtime_state": None if runtime_state is None else runtime_state.value,
            "idempotency_key": idempotency_key,
        }
        return self._info(self._http.send("POST", f"{PATH}/{request_id}/renew", body=body))

    def release(
        self, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        body = {"idempotency_key": idempotency_key}
        return self._info(self._http.send("POST", f"{PATH}/{request_id}/release", body=body))


class TeamStepResources(RoomedResources):
    """The port over a workspace server's ``requests``: polls and marks started through the
    renew route, and keeps its own wait room, checked with one list call whenever a step of
    this process that held resources ended (the release happened on the server)."""

    def __init__(self, requests: RequestsLink) -> None:
        super().__init__(
            lambda: requests, WaitRoom(left_queue_of(requests.list)), releases_seen_here=False
        )
        self.requests = requests


def _links(requests: WorkspaceRequests) -> RequestsLink:
    return requests  # mypy proves that the server's routes offer the requests link


def _conforms(resources: TeamStepResources) -> StepResources:
    return resources  # mypy proves that the team adapter implements the port
