"""JSON bodies for API tests: a GPU pool, policies by project, requests by project."""

from __future__ import annotations

from typing import Any


def pool_body(name: str = "gpus", gpus: int = 2, reclaimable: str = "never") -> dict[str, Any]:
    return {
        "name": name,
        "classes": [
            {"name": "h100", "capacity": {"GPU": gpus}, "reclaimable": reclaimable},
            {"name": "cpu", "capacity": {"CPU": "64", "memory": "256GiB"}},
        ],
    }


def policy_body(
    name: str = "team", pool: str = "gpus", project: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "pool": pool,
        "subject_selector": {"subject_type": "project", "subject_id": project or name},
        **extra,
    }


def request_body(
    project: str = "team",
    gpus: int = 1,
    *,
    lease: int | None = 60,
    tolerance: str = "none",
    **metadata: str,
) -> dict[str, Any]:
    return {
        "subjects": [
            {
                "nodes": [
                    {"subject_type": "project", "subject_id": project},
                    {"subject_type": "step_run", "subject_id": f"{project}-step"},
                ]
            }
        ],
        "demands": [{"resource": "GPU", "quantity": gpus, "class": "h100"}],
        "lease_seconds": lease,
        "reclaim_tolerance": tolerance,
        "metadata": metadata,
    }
