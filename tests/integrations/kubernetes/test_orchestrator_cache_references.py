"""What a step reaches of its own script (a helper, a class, a constant: the cache key's module
references) gives the same key in the orchestrator pod, which loads the script as
``__wharf_script__``, as on the submitter's machine, where it is ``__main__``: a step a local
run made is cached in the pod."""

from __future__ import annotations

from tests.integrations.kubernetes.testbed import (
    IMAGE,
    REMOTE_STORE,
    Bed,
    BedFactory,
    register_kubernetes_stack,
    steps_of,
    submit_script,
    wait_for_run_end,
)
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk import stacks

SCRIPT = """
import json
import sys

from wharf import pipeline, step

FACTOR = 10
NAMES = {"a": (1, 2.5), "b": None}


class Scaler:
    def scale(self, value):
        return helper(value) * len(NAMES)


def helper(value):
    return value * FACTOR


@step
def scaled(value: int) -> int:
    return Scaler().scale(value)


@pipeline
def only_scaled(value: int) -> None:
    scaled(value)


if __name__ == "__main__":
    run = globals()[sys.argv[1]](**json.loads(sys.argv[2]))
    print("RUN", run.id, run.status.value)
"""


def test_script_references_give_the_pod_the_local_key(make_bed: BedFactory) -> None:
    bed: Bed = make_bed({"run.py": SCRIPT}, active_stack="k8s-async")
    ws = bed.workspace
    register_kubernetes_stack(
        ws, "k8s-async", {"image": IMAGE, "synchronous": False, "job_monitoring_interval": 0.5}
    )
    stacks.register_component(ws, "here", ComponentType.ORCHESTRATOR, "local", {})
    stacks.register_stack(ws, "local-remote", orchestrator="here", artifact_store=REMOTE_STORE)

    local, _ = submit_script(bed, "only_scaled", stack="local-remote", value=7)
    assert local.status is ExecutionStatus.COMPLETED, local.status_reason
    original = steps_of(bed, local)["scaled"]

    run, _ = submit_script(bed, "only_scaled", stack="k8s-async", value=7)
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    scaled = steps_of(bed, ended)["scaled"]
    assert scaled.status is ExecutionStatus.CACHED
    assert scaled.original_step_run_id == original.id
