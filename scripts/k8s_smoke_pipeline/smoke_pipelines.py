"""The pipelines ``scripts/k8s-smoke`` runs on a cluster, one per stage.

The script copies this module and ``smoke_run.py`` into a temporary directory and writes
``smoke_names.py`` beside them (the names of this smoke run's step operator and schedule); a
stage runs ``smoke_run.py`` from there, so the directory is the pipeline's source and reaches
the pods only through the run's code archive. Every pipeline takes the smoke id as ``seed``, so
no earlier smoke run's cache answers for this one.
"""

from __future__ import annotations

import os

from smoke_names import SCHEDULE_CRON, SCHEDULE_NAME, STEP_OPERATOR

from wharf import Schedule, pipeline, step


@step
def measure(seed: str) -> int:
    print(f"measuring {seed}", flush=True)
    return len(seed)


@step
def repeat(seed: str) -> str:
    return seed * 2


@step
def combine(size: int, text: str) -> str:
    return f"{size}:{text}"


@pipeline(name="k8s_smoke_static")
def static_pipeline(seed: str) -> None:
    """Three steps, two of them in parallel: each one a pod of its own."""
    combine(measure(seed), repeat(seed))


@step(enable_cache=False)
def exit_with(code: int) -> None:
    print(f"exiting with code {code}", flush=True)
    os._exit(code)  # the container's exit code, as a crashing program would leave it


@pipeline(name="k8s_smoke_failing", enable_cache=False, raise_on_failure=False)
def failing_pipeline(seed: str, code: int) -> None:
    exit_with(code)


@step(step_operator=STEP_OPERATOR, enable_cache=False)
def where_am_i(seed: str) -> str:
    """The name of the pod this step ran in (Kubernetes sets HOSTNAME to it)."""
    return os.environ.get("HOSTNAME", "")


@pipeline(name="k8s_smoke_operator", dynamic=True, enable_cache=False)
def operator_pipeline(seed: str) -> None:
    """A local dynamic pipeline whose one step runs on the Kubernetes step operator."""
    where_am_i(seed)


@pipeline(
    name="k8s_smoke_scheduled",
    schedule=Schedule(name=SCHEDULE_NAME, cron_expression=SCHEDULE_CRON),
)
def scheduled_pipeline(seed: str) -> None:
    """The static pipeline's steps on a cron schedule (a run fired now is fully cached)."""
    combine(measure(seed), repeat(seed))
