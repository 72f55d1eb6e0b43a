"""Pools and policies named the ways ``wharf pool list`` and ``wharf policy list`` show them:
their name, their id, or a prefix of their id (at least
:data:`~wharf.core.ids.MIN_ID_PREFIX` hex digits), as runs, steps and stacks are named
(:func:`find_pool`, :func:`find_policy`). The Resource Manager itself takes a name or a whole
id; a prefix is matched here, against its list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar
from uuid import UUID

if TYPE_CHECKING:
    from wharf.resource_manager.contract.protocol import ResourceManagerClient
    from wharf.resource_manager.domain import Policy, Pool


class _Named(Protocol):
    @property
    def id(self) -> UUID: ...

    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


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
