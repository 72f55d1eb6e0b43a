"""Builders for Resource Manager service tests: principals, pool/policy/request specs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from wharf.combining import Combiner
from wharf.resource_manager.contract.models import (
    CapacityClassSpec,
    PolicyCreate,
    PoolCreate,
    ResourceRequestCreate,
)
from wharf.resource_manager.service import Principal, ResourceManagerService
from wharf.resource_manager.service import tables as t

ADMIN = Principal("admin", admin=True)
# Trusted to assert subjects, as a workspace server is: they name projects and steps.
ALICE = Principal("alice", asserts_subjects=True)
BOB = Principal("bob", asserts_subjects=True)


def pool_spec(name: str = "gpus", *classes: CapacityClassSpec, **kwargs: Any) -> PoolCreate:
    return PoolCreate(
        name=name,
        classes=classes or (klass("h100", GPU=4, CPU="64", memory="512GiB"),),
        **kwargs,
    )


def klass(
    name: str, *, reclaimable: str = "never", rank: int = 0, **capacity: int | str | None
) -> CapacityClassSpec:
    return CapacityClassSpec.model_validate(
        {"name": name, "capacity": capacity, "reclaimable": reclaimable, "rank": rank}
    )


def policy_spec(
    name: str = "team",
    pool: str = "gpus",
    *,
    project: str | None = None,
    priority: int = 0,
    grants: list[dict[str, Any]] | None = None,
    **kwargs: Any,
) -> PolicyCreate:
    return PolicyCreate.model_validate(
        {
            "name": name,
            "pool": pool,
            "subject_selector": {"subject_type": "project", "subject_id": project or name},
            "priority": priority,
            "grants": grants or [],
            **kwargs,
        }
    )


def request_spec(
    *demands: dict[str, Any],
    project: str = "team",
    step: str = "s1",
    lease: int | None = 60,
    **kwargs: Any,
) -> ResourceRequestCreate:
    return ResourceRequestCreate.model_validate(
        {
            "subjects": [
                {
                    "nodes": [
                        {"subject_type": "project", "subject_id": project},
                        {"subject_type": "step_run", "subject_id": step},
                    ]
                }
            ],
            "demands": list(demands) or [{"resource": "GPU", "quantity": 1}],
            "lease_seconds": lease,
            **kwargs,
        }
    )


def gpus(quantity: int, **kwargs: Any) -> dict[str, Any]:
    return {"resource": "GPU", "quantity": quantity, **kwargs}


def setup_pool(
    rm: ResourceManagerService, gpus_total: int = 4, reclaimable: str = "never", **policy: Any
) -> None:
    """Pool ``gpus`` (class ``h100``) with ``gpus_total`` GPUs and policy ``team``."""
    rm.pools.create(
        ADMIN, pool_spec("gpus", klass("h100", GPU=gpus_total, reclaimable=reclaimable))
    )
    rm.policies.create(ADMIN, policy_spec("team", **policy))


def row_count(rm: ResourceManagerService, table: sa.Table) -> int:
    with rm._db.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def allocation_count(rm: ResourceManagerService) -> int:
    """Allocations recorded in every request row (held or not)."""
    with rm._db.engine.connect() as conn:
        return sum(len(entries) for (entries,) in conn.execute(sa.select(t.requests.c.allocations)))


def request_count(rm: ResourceManagerService) -> int:
    return row_count(rm, t.requests)


@dataclass(frozen=True)
class Answer:
    """One operation's outcome from :func:`one_batch`."""

    outcome: Any

    def result(self) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def one_batch(runner: Combiner[Any], operations: Sequence[Any]) -> list[Answer]:
    """Run ``operations`` as *one* batch, as concurrent callers would make it."""
    return [Answer(outcome) for outcome in runner.run_batch(list(operations))]
