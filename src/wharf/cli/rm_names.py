"""Pools and policies named the ways ``wharf pool list`` and ``wharf policy list`` show them:
their name, their id, or a prefix of their id (at least
:data:`~wharf.core.ids.MIN_ID_PREFIX` hex digits), as runs, steps and stacks are named
(:func:`find_pool`, :func:`find_policy`); resource requests by id or id prefix
(:func:`find_request`). The Resource Manager itself takes a name or a whole id; a prefix is
matched here, against its list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar
from uuid import UUID

if TYPE_CHECKING:
    from wharf.core.paging import Page, PageRequest
    from wharf.resource_manager.contract.models import RequestFilter, ResourceRequestInfo
    from wharf.resource_manager.contract.protocol import ResourceManagerClient
    from wharf.resource_manager.domain import Policy, Pool


class _Named(Protocol):
    @property
    def id(self) -> UUID: ...

    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


class _Requests(Protocol):
    """The RM's requests client, or a workspace server's request routes (both have these)."""

    def get(self, request_id: UUID) -> ResourceRequestInfo: ...

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]: ...


REQUEST_SCAN_PAGE = 1000
"""Requests read per call while matching an id prefix (the RM filters by whole ids only)."""


def find_pool(rm: ResourceManagerClient, text: str) -> Pool:
    """The pool ``text`` names (name, id or id prefix); an unknown one raises the Resource
    Manager's not-found error, a prefix of several ids ``AmbiguousIdError``."""
    return _resolve("pool", text, rm.pools.get, rm.pools.list)


def find_policy(rm: ResourceManagerClient, text: str) -> Policy:
    """The policy ``text`` names (name, id or id prefix); an unknown one raises the Resource
    Manager's not-found error, a prefix of several ids ``AmbiguousIdError``."""
    return _resolve("policy", text, rm.policies.get, rm.policies.list)


def _resolve(
    kind: str, text: str, get: Callable[[str], N], list_all: Callable[[], Sequence[N]]
) -> N:
    from wharf.core.errors import EntityNotFoundError
    from wharf.core.ids import only_match, parse_id_prefix

    try:
        return get(text)
    except EntityNotFoundError:
        prefix = parse_id_prefix(text)
        if prefix is None:
            raise
        found = only_match(kind, text, [r for r in list_all() if r.id.hex.startswith(prefix)])
        if found is None:
            raise
        return found


def find_request(requests: _Requests, text: str) -> ResourceRequestInfo:
    """The request ``text`` names (its id, or a prefix of at least
    :data:`~wharf.core.ids.MIN_ID_PREFIX` hex digits, matched against the requests listed,
    newest first); InputError for text that is neither, the server's not-found error for an
    unknown id, ``AmbiguousIdError`` for a prefix of several."""
    from wharf.core.errors import EntityNotFoundError, InputError
    from wharf.core.ids import MAX_ID_CANDIDATES, only_match, parse_id_prefix, parse_uuid
    from wharf.core.paging import PageRequest

    whole = parse_uuid(text)
    if whole is not None:
        return requests.get(whole)
    prefix = parse_id_prefix(text)
    if prefix is None:
        raise InputError(f"'{text}' is not a resource request id or id prefix.")
    matches: list[ResourceRequestInfo] = []
    index = 1
    while len(matches) <= MAX_ID_CANDIDATES:
        page = requests.list(None, PageRequest(index=index, size=REQUEST_SCAN_PAGE))
        matches += [info for info in page if info.id.hex.startswith(prefix)]
        if index * REQUEST_SCAN_PAGE >= page.total or not page.items:
            break
        index += 1
    found = only_match("resource request", text, matches)
    if found is None:
        raise EntityNotFoundError(f"No resource request with an id starting with '{text}'.")
    return found
