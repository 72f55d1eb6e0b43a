"""A worker process for the concurrency test: random create/renew/release/cancel on one DB.

Module-level and import-light so ``multiprocessing`` children can import it.
"""

from __future__ import annotations

import random
import time
from datetime import timedelta
from typing import Any
from uuid import UUID

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import IllegalOperationError, WharfError
from wharf.resource_manager.contract.errors import PermissionDeniedError
from wharf.resource_manager.service import Principal, ResourceManagerService, ServiceOptions

SHARED = Principal("shared", asserts_subjects=True)  # names projects
SHARED_KEYS = 3


def request(rng: random.Random, step: str) -> dict[str, Any]:
    project = rng.choice(["low", "high"])
    if rng.random() < 0.5:
        demands: list[dict[str, Any]] = [
            {"resource": "GPU", "quantity": rng.randint(1, 2), "class": "gpu"}
        ]
        tolerance = rng.choice(["coordinated", "any"])
    else:
        demands = [
            {"kind": "cpu", "quantity": rng.randint(1, 3), "unit": "CPU"},
            {"kind": "memory", "quantity": rng.randint(1, 4), "unit": "GiB"},
        ]
        tolerance = "none"
    return {
        "subjects": [
            {
                "nodes": [
                    {"subject_type": "project", "subject_id": project},
                    {"subject_type": "step_run", "subject_id": step},
                ]
            }
        ],
        "demands": demands,
        "reclaim_tolerance": tolerance,
        "lease_seconds": rng.choice([1, 1, 2]),
    }


def shared_request(index: int) -> dict[str, Any]:
    return {
        "subjects": [{"nodes": [{"subject_type": "project", "subject_id": "low"}]}],
        "demands": [{"kind": "cpu", "quantity": 1, "unit": "mCPU"}],
        "lease_seconds": 1,
        "metadata": {"shared": str(index)},
    }


def run(url: str, seed: int, ops: int, seconds: float) -> dict[str, Any]:
    """Drive the RM at ``url``; returns created ids, shared-key ids and unexpected errors."""
    deadline = time.monotonic() + seconds
    rng = random.Random(seed)
    me = Principal(f"worker-{seed}", asserts_subjects=True)
    options = ServiceOptions(lazy_sweep_interval=timedelta(milliseconds=100))
    created: list[str] = []
    shared: dict[int, str] = {}
    unexpected: list[str] = []
    live: list[UUID] = []
    counts = {"create": 0, "renew": 0, "release": 0, "cancel": 0, "sweep": 0}
    with ResourceManagerService.open(url, options=options) as rm:
        for index in range(SHARED_KEYS):
            got = rm.requests.create(SHARED, shared_request(index), idempotency_key=f"k{index}")
            shared[index] = str(got.id)
        for step in range(ops):
            if time.monotonic() > deadline:
                break
            time.sleep(rng.uniform(0, 0.02))  # let leases lapse during the run
            roll = rng.random()
            try:
                if roll < 0.4 or not live:
                    info = rm.requests.create(me, request(rng, f"{seed}-{step}"))
                    created.append(str(info.id))
                    live.append(info.id)
                    counts["create"] += 1
                elif roll < 0.65:
                    state = rng.choice(list(ResourceRequestRuntimeState))
                    rm.requests.renew(me, rng.choice(live), rng.choice([1, 2]), state)
                    counts["renew"] += 1
                elif roll < 0.85:
                    rm.requests.release(me, live.pop(rng.randrange(len(live))))
                    counts["release"] += 1
                elif roll < 0.95:
                    try:
                        rm.requests.cancel(me, rng.choice(live))
                    except IllegalOperationError as error:
                        if isinstance(error, PermissionDeniedError):
                            raise
                    counts["cancel"] += 1
                else:
                    rm.sweep()
                    counts["sweep"] += 1
            except WharfError as error:
                unexpected.append(f"{type(error).__name__}: {error}")
            except Exception as error:  # anything else is a bug too
                unexpected.append(f"{type(error).__name__}: {error}")
    return {"created": created, "shared": shared, "unexpected": unexpected, "counts": counts}
