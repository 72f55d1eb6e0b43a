"""``wharf resource-manager serve --bootstrap-pool NAME=RESOURCE[:CLASS]=QTY[,...]``: what a
fresh Resource Manager needs before users can run steps that ask for resources
(:func:`bootstrap`).

Invariant: idempotent. A pool or policy that exists is left exactly as it is (an administrator
may have changed it since), and a concurrent creator (another replica starting) wins quietly,
so restarts and replicas may all pass the same options.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

EVERYONE_SUFFIX = "-everyone"


@dataclass(frozen=True)
class PoolSpec:
    name: str
    capacities: tuple[str, ...]
    """``RESOURCE[:CLASS]=QTY`` entries, as ``wharf pool create --capacity`` takes them."""


def parse_pool(text: str) -> PoolSpec:
    """``team=cpu=16,memory=64GiB`` -> PoolSpec('team', ('cpu=16', 'memory=64GiB'))."""
    from wharf.core.errors import InputError

    name, equals, rest = text.partition("=")
    entries = tuple(entry.strip() for entry in rest.split(",") if entry.strip())
    if not equals or not name.strip() or not entries:
        raise InputError(
            f"--bootstrap-pool expects NAME=RESOURCE[:CLASS]=QTY[,...] (e.g. "
            f"team=cpu=16,memory=64GiB,gpu=2), got '{text}'."
        )
    return PoolSpec(name.strip(), entries)


def policy_name(pool: str) -> str:
    return f"{pool}{EVERYONE_SUFFIX}"


def bootstrap(database_url: str, pools: Sequence[PoolSpec]) -> list[str]:
    """Make the missing pools and policies; one line per pool saying what was done.

    For each pool given: the pool (capacities read like ``wharf pool create --capacity``) and a
    policy ``NAME-everyone`` that lets every account use it (selector: subject type
    ``account``; every request of a workspace server's step carries its user's account). Both
    are made before the server starts, in the RM database, as its administrator.
    """
    from wharf.cli.pools import apply_classes
    from wharf.cli.resource_manager import resources
    from wharf.core.errors import EntityExistsError, EntityNotFoundError
    from wharf.resource_manager.contract.models import PolicyCreate, PoolCreate
    from wharf.resource_manager.domain import SubjectSelector, SubjectType, load
    from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
    from wharf.resource_manager.service.principal import Principal

    lines = []
    client = InProcessResourceManager.open(database_url, Principal(name="admin", admin=True))
    try:
        res = resources(client)
        for spec in pools:
            classes: dict[str, dict[str, object]] = {}
            apply_classes(res, classes, spec.capacities, (), ())
            made = []
            try:
                client.pools.get(spec.name)
            except EntityNotFoundError:
                body = {"name": spec.name, "classes": list(classes.values())}
                with contextlib.suppress(EntityExistsError):
                    client.pools.create(load(PoolCreate, body))
                    made.append(f"pool '{spec.name}'")
            policy = policy_name(spec.name)
            try:
                client.policies.get(policy)
            except EntityNotFoundError:
                selector = SubjectSelector(subject_type=SubjectType.ACCOUNT)
                with contextlib.suppress(EntityExistsError):
                    client.policies.create(
                        PolicyCreate(name=policy, pool=spec.name, subject_selector=selector)
                    )
                    made.append(f"policy '{policy}' (every account)")
            done = (
                f"made {' and '.join(made)}" if made else "pool and policy exist, left as they are"
            )
            lines.append(f"Bootstrap pool '{spec.name}': {done}.")
    finally:
        client.close()
    return lines
