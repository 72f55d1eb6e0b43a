"""Wharf quick-start: a small pipeline, run twice, then steps sharing a scarce resource.

1. The first run executes every step and records it in the SQLite store in your user data
   directory; the second run reuses every result from the cache.
2. A dynamic pipeline fans out four evaluations that each need one of two licences: the
   in-process Resource Manager admits two at a time; the others queue until a licence frees.

Nothing to configure.

    python examples/quickstart.py
"""

from __future__ import annotations

import time
from typing import Annotated

from wharf import Client, ResourceSettings, get_step_context, pipeline, step


@step
def load_numbers(count: int = 10) -> list[int]:
    """Produce the training data."""
    return list(range(1, count + 1))


@step
def split(numbers: list[int]) -> tuple[Annotated[list[int], "train"], Annotated[list[int], "test"]]:
    """Every fifth number goes to the test set."""
    return [n for n in numbers if n % 5], [n for n in numbers if not n % 5]


@step
def fit(train: list[int]) -> float:
    """A one-parameter 'model': the mean."""
    context = get_step_context()
    print(f"fitting in step run {context.step_run.id} of run {context.pipeline_run.name}")
    return sum(train) / len(train)


@step
def evaluate(model: float, test: list[int]) -> dict[str, float]:
    """Mean absolute error of the model on the test set."""
    return {"mae": sum(abs(t - model) for t in test) / len(test)}


@pipeline
def quickstart(count: int = 10) -> None:
    numbers = load_numbers(count=count)
    train, test = split(numbers)
    model = fit(train)
    evaluate(model, test)


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def licensed_eval(seed: int) -> str:
    """Needs one licence of a solver that is only licensed twice."""
    started = time.monotonic()
    time.sleep(0.5)
    return f"seed {seed}: held a licence for {time.monotonic() - started:.1f} s"


@pipeline(dynamic=True)
def licensed_sweep(seeds: int = 4) -> None:
    results = licensed_eval.map(list(range(seeds)))
    for line in results.load():
        print(" ", line)


def main() -> None:
    first = quickstart(count=20)
    print(f"run {first.name}: {first.status.value}")
    second = quickstart(count=20)
    with Client() as client:
        statuses = {s.name: s.status.value for s in client.list_run_steps(second.id).items}
        metrics = client.load_step_output(second.id, "evaluate")
    print(f"run {second.name}: {second.status.value}; steps {statuses}")
    print(f"evaluation: {metrics}")

    with Client() as client:
        client.ensure_resource_pool("licenses", {"license": 2})
    started = time.monotonic()
    sweep = licensed_sweep(seeds=4)
    print(
        f"run {sweep.name}: {sweep.status.value} in {time.monotonic() - started:.1f} s "
        "(4 steps, 2 licences: they ran two at a time)"
    )
    print(
        "Next: `wharf runs list`, `wharf runs show <RUN>`, `wharf steps list --run <RUN>`, "
        "`wharf pool show local`."
    )


if __name__ == "__main__":
    main()
