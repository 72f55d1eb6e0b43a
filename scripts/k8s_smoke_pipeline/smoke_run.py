"""Run one smoke pipeline on the active stack and print what happened as one JSON line.

Usage (from the temporary directory ``scripts/k8s-smoke`` prepared):
``python smoke_run.py PIPELINE 'JSON_PARAMETERS'`` with ``WHARF_ACTIVE_STACK`` naming the stack.
The last line of its output is ``SMOKE-RESULT {...}``: for a run its id, status, reason and
steps (status and reason each), plus the output of the step operator's step; for a scheduled
pipeline the recorded schedule (id, name, snapshot id). Anything else is an error the caller
reports (non-zero exit, the error on standard error).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import smoke_pipelines

from wharf import Client

RESULT_PREFIX = "SMOKE-RESULT "


def describe_run(client: Client, run: Any) -> dict[str, Any]:
    steps = client.list_run_steps(run.id, size=100).items
    result: dict[str, Any] = {
        "run_id": str(run.id),
        "run_name": run.name,
        "status": run.status.value,
        "reason": run.status_reason or "",
        "steps": {
            s.name: {"status": s.status.value, "reason": s.status_reason or ""} for s in steps
        },
    }
    if run.status.value == "completed" and "where_am_i" in result["steps"]:
        result["pod"] = client.load_step_output(run.id, "where_am_i")
    return result


def main(argv: list[str]) -> int:
    name, parameters = argv[0], json.loads(argv[1])
    outcome = getattr(smoke_pipelines, name)(**parameters)
    schedule = getattr(outcome, "schedule", None)
    if schedule is not None:  # scheduled on the cluster: no run now
        result: dict[str, Any] = {
            "schedule_id": str(schedule.id),
            "schedule_name": schedule.name,
            "snapshot_id": str(schedule.snapshot_id),
        }
    else:
        with Client() as client:
            result = describe_run(client, client.get_pipeline_run(outcome.id))
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
