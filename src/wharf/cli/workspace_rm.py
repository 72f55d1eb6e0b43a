"""The team's Resource Manager as a logged-in user reaches it: through the workspace server
(:class:`WorkspaceResourceManager`), with the caller's workspace credential and rights; no RM
credential is needed.

Invariant: read-only for configuration. Creating, changing or deleting descriptors, pools or
policies is refused here with one line saying where it is done (on the RM, ``--rm-url``), and
nothing is sent.
"""

from __future__ import annotations

import builtins
import re
from typing import TYPE_CHECKING, Any, NoReturn
from uuid import UUID

from wharf.core.errors import EntityNotFoundError, InputError
from wharf.core.resources import NAME_PATTERN
from wharf.core.url_credentials import mask_credentials
from wharf.execution.resources.team import PATH, WorkspaceRequests
from wharf.store.rest.http import HttpSession

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import (
        ExplanationInfo,
        PoolAllocation,
        QueueEntry,
        ResourceRequestInfo,
    )
    from wharf.resource_manager.contract.values import Policy, Pool, ResourceDescriptor

API = "/api/v1"


def _managed_on_the_rm(url: str) -> NoReturn:
    shown = mask_credentials(url)
    raise InputError(
        f"Logged in to the workspace server {shown}, you can see the team's pools and policies "
        "but not change them: an RM administrator does that on the Resource Manager itself "
        "(--rm-url URL --api-key KEY, or WHARF_RM_URL and WHARF_RM_API_KEY)."
    )


def _ref(value: str | UUID, what: str) -> str:
    """``value`` (a ``what``'s name or id) as a path segment; a value no name or id can be (a
    slash, a ``?``, a control character) is not found, as on the Resource Manager itself."""
    text = str(value)
    if isinstance(value, UUID) or re.fullmatch(NAME_PATTERN, text) is not None:
        return text  # the pattern leaves nothing to escape
    raise EntityNotFoundError(f"Resource {what} '{text}' not found.")


def _pool_path(pool: str | UUID) -> str:
    return f"{API}/resource_pools/{_ref(pool, 'pool')}"


def _policy_path(policy: str | UUID) -> str:
    return f"{API}/resource_policies/{_ref(policy, 'policy')}"


class _Descriptors:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def list(self) -> list[ResourceDescriptor]:
        from wharf.resource_manager.contract.values import ResourceDescriptor

        data = self._http.send("GET", f"{API}/resource_descriptors")
        return [ResourceDescriptor.model_validate(item) for item in data]

    def get(self, name: str) -> ResourceDescriptor:
        from wharf.core.errors import EntityNotFoundError

        for descriptor in self.list():
            if descriptor.name == name:
                return descriptor
        raise EntityNotFoundError(f"No resource descriptor named '{name}'.")

    def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        _managed_on_the_rm(self._http.url)

    update = delete = create


class _Pools:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def list(self) -> list[Pool]:
        from wharf.resource_manager.contract.values import Pool

        return [Pool.model_validate(p) for p in self._http.send("GET", f"{API}/resource_pools")]

    def get(self, pool: str | UUID) -> Pool:
        from wharf.resource_manager.contract.values import Pool

        return Pool.model_validate(self._http.send("GET", _pool_path(pool)))

    def queue(self, pool: str | UUID) -> builtins.list[QueueEntry]:
        from wharf.resource_manager.contract.models import QueueEntry

        data = self._http.send("GET", f"{_pool_path(pool)}/queue")
        return [QueueEntry.model_validate(item) for item in data]

    def allocations(self, pool: str | UUID) -> builtins.list[PoolAllocation]:
        from wharf.resource_manager.contract.models import PoolAllocation

        data = self._http.send("GET", f"{_pool_path(pool)}/allocations")
        return [PoolAllocation.model_validate(item) for item in data]

    def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        _managed_on_the_rm(self._http.url)

    update = delete = create


class _Policies:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def list(self, pool: str | UUID | None = None) -> list[Policy]:
        from wharf.resource_manager.contract.values import Policy

        params = {"pool": None if pool is None else str(pool)}
        data = self._http.send("GET", f"{API}/resource_policies", params=params)
        return [Policy.model_validate(item) for item in data]

    def get(self, policy: str | UUID) -> Policy:
        from wharf.resource_manager.contract.values import Policy

        data = self._http.send("GET", _policy_path(policy))
        return Policy.model_validate(data)

    def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        _managed_on_the_rm(self._http.url)

    update = delete = create


class _Requests(WorkspaceRequests):
    """The caller's requests: the workspace's request routes, with cancel and explain."""

    def cancel(
        self, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        body = {"idempotency_key": idempotency_key}
        return self._info(self._http.send("POST", f"{PATH}/{request_id}/cancel", body=body))

    def explain(self, request_id: UUID) -> ExplanationInfo:
        from wharf.resource_manager.contract.models import ExplanationInfo

        data = self._http.send("GET", f"{PATH}/{request_id}/explain")
        return ExplanationInfo.model_validate(data)


class WorkspaceResourceManager:
    """What ``wharf pool``, ``wharf policy`` and ``wharf request`` read (descriptors, pools
    with their queues and allocations, policies, and the caller's own requests: get, list,
    explain, release, cancel) over the server's routes (``/api/v1/resource_pools`` ...);
    ``close()`` closes its HTTP session."""

    def __init__(self, url: str, credential: str | None) -> None:
        self._http = HttpSession(url, credential)
        self.url = self._http.url
        self.descriptors = _Descriptors(self._http)
        self.pools = _Pools(self._http)
        self.policies = _Policies(self._http)
        self.requests = _Requests(self._http)

    def close(self) -> None:
        self._http.close()


def refuse_changes_here(rm: object) -> None:
    """Refuse a change of pools or policies (one line, nothing sent) when ``rm`` is the
    workspace server's view: call it before looking anything up, so the refusal, not a lookup's
    not-found, is what the user reads."""
    if isinstance(rm, WorkspaceResourceManager):
        _managed_on_the_rm(rm.url)


def pool_names(http: HttpSession, *, policies: bool = False) -> dict[UUID, str]:
    """Pool (and policy) names by id, for showing allocations (empty if the server cannot
    say)."""
    from wharf.core.errors import WharfError

    try:
        names = {p.id: p.name for p in _Pools(http).list()}
        if policies:
            names.update((p.id, p.name) for p in _Policies(http).list())
    except WharfError:
        return {}
    return names
