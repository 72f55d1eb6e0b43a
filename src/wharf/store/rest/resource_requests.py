"""Resource requests over REST (``/api/v1/resource_requests``): the workspace's surface of its
steps' Resource Manager requests -- get, list, renew, release -- as the embedded mode's requests
client offers it, so the team adapter of the step-resources port
(:mod:`wharf.execution.resources.team`) and ``wharf request`` use either unchanged.

Requests are created by the server itself (when a queued step asking for resources is created),
never through this client. Answers are the RM's own wire models. A filter the workspace does not
offer is refused (``InputError``) rather than dropped, so a list never silently matches more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import InputError
from wharf.store.rest.http import HttpSession

if TYPE_CHECKING:  # the RM's models load only when requests are actually used
    from wharf.resource_manager.contract.models import (
        Page,
        PageRequest,
        RequestFilter,
        ResourceRequestInfo,
    )

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
    if query.status:
        params["status"] = [status.value for status in query.status]
    params.update(subject_id=query.subject_id, pool=query.pool, requester=query.requester)
    if query.subject_type is not None:
        params["subject_type"] = query.subject_type.value
    if query.ids is not None:
        params["id"] = [str(request_id) for request_id in query.ids]
    for key, value in query.metadata.items():
        params[f"metadata[{key}]"] = value
    return params


class RestResourceRequests:
    """``ResourceRequestRepository`` over HTTP."""

    def __init__(self, http: HttpSession) -> None:
        self._http = http

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
        """``project_id``: the project to list (members of several projects must name one)."""
        from wharf.resource_manager.contract.models import Page, ResourceRequestInfo

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
