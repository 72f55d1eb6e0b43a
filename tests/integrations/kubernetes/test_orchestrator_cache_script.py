"""A cache policy naming the script's own objects (``__main__:helper``, a ``__main__`` cache
function, the ``__main__`` module) gives the same key in the orchestrator pod, whose
``__main__`` is Wharf's own, as on the submitter's machine: a step a local run made is cached
in the pod (it failed there: ``module '__main__' has no attribute 'helper'``)."""

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

from wharf import CachePolicy, pipeline, step


def helper(value):
    return value * 10


def data_version():
    return "v1"


@step(
    cache_policy=CachePolicy(
        source_dependencies=[helper, "__main__"], cache_func=data_version
    )
)
def scaled(value: int) -> int:
    return helper(value)


@pipeline
def only_scaled(value: int) -> None:
    scaled(value)


if __name__ == "__main__":
    run = globals()[sys.argv[1]](**json.loads(sys.argv[2]))
    print("RUN", run.id, run.status.value)
"""


def test_script_dependencies_give_the_pod_the_local_key(make_bed: BedFactory) -> None:
    assert_cached_in_the_pod(make_bed({"run.py": SCRIPT}, active_stack="k8s-async"))


def assert_cached_in_the_pod(bed: Bed) -> None:
    """Run ``only_scaled`` of the bed's ``run.py`` locally, then on the orchestrator pod (with
    the same artifact store): its step ``scaled`` must be cached there, from the local run."""
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
