"""Every graph shape x every execution mode, with and without a failing step."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e import steps_lib
from tests.e2e.steps_lib import merge
from wharf import RunFailedError, pipeline
from wharf.core.enums import ExecutionMode, ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter


def linear(fail_at: str | None) -> None:
    a = merge(label="a", fail=fail_at == "a")
    b = merge(a=a, label="b", fail=fail_at == "b")
    merge(a=b, label="c", fail=fail_at == "c")


def fan_out_in(fail_at: str | None) -> None:
    root = merge(label="a", fail=fail_at == "a")
    mids = [merge(a=root, label=f"m{i}", fail=fail_at == f"m{i}") for i in range(3)]
    merge(a=mids[0], b=mids[1], c=mids[2], label="z", fail=fail_at == "z")


def diamond(fail_at: str | None) -> None:
    a = merge(label="a", fail=fail_at == "a")
    b = merge(a=a, label="b", fail=fail_at == "b")
    c = merge(a=a, label="c", fail=fail_at == "c")
    merge(a=b, b=c, label="d", fail=fail_at == "d")


def wide(fail_at: str | None) -> None:
    for i in range(8):
        merge(label=f"w{i}", fail=fail_at == f"w{i}")


# shape -> (definition, step ids in topological order, failing step, its descendants)
SHAPES: dict[str, tuple[Callable[[str | None], None], list[str], str, set[str]]] = {
    "linear": (linear, ["merge", "merge_2", "merge_3"], "b", {"merge_3"}),
    "fan_out_in": (
        fan_out_in,
        ["merge", "merge_2", "merge_3", "merge_4", "merge_5"],
        "m1",
        {"merge_5"},
    ),
    "diamond": (diamond, ["merge", "merge_2", "merge_3", "merge_4"], "b", {"merge_4"}),
    "wide": (wide, [f"merge{'_' + str(i + 1) if i else ''}" for i in range(8)], "w3", set()),
}
LABEL_OF_FAILING = {
    "linear": "merge_2",
    "fan_out_in": "merge_3",
    "diamond": "merge_2",
    "wide": "merge_4",
}


def build(shape: str, mode: ExecutionMode, fail_at: str | None):
    definition = SHAPES[shape][0]

    @pipeline(name=f"{shape}_{mode.value}", execution_mode=mode, max_parallelism=1)
    def shaped() -> None:
        definition(fail_at)

    return shaped


def statuses(workspace: Workspace, run_id) -> dict[str, ExecutionStatus]:
    steps = workspace.store.steps.list(StepRunFilter(run_id=run_id)).items
    return {s.name: s.status for s in steps}


@pytest.mark.parametrize("mode", list(ExecutionMode))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_succeeds(workspace: Workspace, shape: str, mode: ExecutionMode) -> None:
    run = build(shape, mode, None).run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    found = statuses(workspace, run.id)
    assert set(found) == set(SHAPES[shape][1])
    assert set(found.values()) == {ExecutionStatus.COMPLETED}


@pytest.mark.parametrize("mode", list(ExecutionMode))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_with_failure(workspace: Workspace, shape: str, mode: ExecutionMode) -> None:
    _, order, fail_label, descendants = SHAPES[shape]
    failing = LABEL_OF_FAILING[shape]
    with pytest.raises(RunFailedError) as failed:
        build(shape, mode, fail_label).run_in(workspace)
    run = failed.value.run
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason and failing in run.status_reason
    found = statuses(workspace, run.id)
    assert found[failing] is ExecutionStatus.FAILED
    assert not descendants & set(found), "descendants of a failed step never start"
    after_failure = order[order.index(failing) + 1 :]
    if mode is ExecutionMode.CONTINUE_ON_FAILURE:
        expected = set(order) - descendants
        assert set(found) == expected
        assert all(found[n] is ExecutionStatus.COMPLETED for n in expected - {failing})
    else:
        # max_parallelism=1: nothing after the failure starts
        assert not set(after_failure) & set(found)


def test_fail_fast_interrupts_running_steps(workspace: Workspace) -> None:
    steps_lib.EVENTS.clear()
    steps_lib.RELEASE.clear()
    steps_lib.SLOW_STARTED.clear()

    @pipeline(execution_mode="fail_fast", max_parallelism=2)
    def racing() -> None:
        steps_lib.wait_for_release(label="slow")
        steps_lib.fail_once_slow_started()

    with pytest.raises(RunFailedError) as failed:
        racing.run_in(workspace)
    run = failed.value.run
    found = statuses(workspace, run.id)
    assert run.status is ExecutionStatus.FAILED
    assert found["fail_once_slow_started"] is ExecutionStatus.FAILED
    assert found["wait_for_release"] is ExecutionStatus.STOPPED
    assert "cleanup:slow" in steps_lib.EVENTS  # finally blocks ran
    step = workspace.store.steps.list(StepRunFilter(run_id=run.id, names=("wait_for_release",)))
    assert "fail-fast" in (step.items[0].status_reason or "")


def test_stop_on_failure_lets_running_steps_finish(workspace: Workspace) -> None:
    @pipeline(execution_mode="stop_on_failure", max_parallelism=2)
    def racing() -> None:
        slow = steps_lib.wait_for_a_failure()
        merge(label="fails", fail=True)
        merge(a=slow, label="never")

    with pytest.raises(RunFailedError) as failed:
        racing.run_in(workspace)
    run = failed.value.run
    found = statuses(workspace, run.id)
    assert run.status is ExecutionStatus.FAILED
    assert found["merge"] is ExecutionStatus.FAILED
    assert found["wait_for_a_failure"] is ExecutionStatus.COMPLETED  # it ran to its end
    assert "merge_2" not in found  # nothing new started after the failure
