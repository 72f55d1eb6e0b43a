"""Running pipelines end to end: outputs, context, retries, stop, bad input."""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings
from typing import Annotated, Any

import pytest

from tests.e2e import steps_lib
from tests.e2e.conftest import FakeSleep
from wharf import Client, RetryConfig, RunFailedError, get_step_context, pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import PipelineDefinitionError, StepInterfaceError, WharfError
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, RunFilter, StepRunFilter

ASC = PageRequest(sort="asc")


def test_outputs_are_recorded_and_loadable(workspace: Workspace) -> None:
    @pipeline
    def p() -> None:
        _low, high = steps_lib.two_outputs(steps_lib.produce(value=10))
        steps_lib.double(high)

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    assert run.orchestrator_run_id and run.start_time and run.end_time
    client = Client(workspace.config, workspace.store)
    assert client.load_step_output(run.id, "double") == 22
    assert client.load_step_output(run.id, "two_outputs", "low") == 9
    step_run = client.get_run_step(run.id, "two_outputs")
    version = client.get_artifact_version(step_run.outputs["high"])
    assert version.producer_step_run_id == step_run.id
    assert version.content_hash and version.uri.startswith(str(workspace.config.artifact_root))
    assert version.materializer and version.data_type.endswith("int")
    assert step_run.inputs["x"] == client.get_run_step(run.id, "produce").outputs["output"]
    assert step_run.source_code and "def two_outputs" in step_run.source_code


def test_exactly_one_run_replaces_the_placeholder(workspace: Workspace) -> None:
    run = steps_lib_chain().run_in(workspace)
    runs = workspace.store.runs.list(RunFilter(snapshot_id=run.snapshot_id)).items
    assert [r.id for r in runs] == [run.id]
    assert not run.is_placeholder


def steps_lib_chain():
    @pipeline(name="chain")
    def chain() -> None:
        steps_lib.double(steps_lib.produce())

    return chain


def test_step_context(workspace: Workspace) -> None:
    seen = {}

    @step
    def introspect() -> Annotated[int, "answer"]:
        context = get_step_context()
        seen["run"] = context.pipeline_run.id
        seen["step"] = context.step_run.id
        seen["uris"] = context.output_uris
        return 42

    @pipeline
    def p() -> None:
        introspect()

    run = p.run_in(workspace)
    record = workspace.store.steps.list(StepRunFilter(run_id=run.id)).items[0]
    assert seen["run"] == run.id and seen["step"] == record.id
    version = workspace.store.artifacts.get_version(record.outputs["answer"])
    assert seen["uris"]["answer"] == version.uri
    with pytest.raises(WharfError, match="only be called while a step is running"):
        get_step_context()


def test_retries_with_delay_and_backoff(workspace: Workspace) -> None:
    steps_lib.FLAKY_COUNTS.clear()
    flaky = steps_lib.flaky.with_options(retry=RetryConfig(max_retries=3, delay=2, backoff=3))

    @pipeline
    def p() -> None:
        flaky(key="k", failures=2)

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    attempts = workspace.store.steps.list(StepRunFilter(run_id=run.id), ASC).items
    assert [(s.attempt, s.status) for s in attempts] == [
        (1, ExecutionStatus.RETRYING),
        (2, ExecutionStatus.RETRYING),
        (3, ExecutionStatus.COMPLETED),
    ]
    assert "attempt 1 failed" in (attempts[0].status_reason or "")
    assert isinstance(workspace.sleep, FakeSleep) and workspace.sleep.calls == [2, 6]


def test_a_retry_does_not_start_once_the_run_is_stopping(workspace: Workspace) -> None:
    """The stop arrives while a failed step waits to retry: the store refuses the new
    attempt, the step ends stopped with its one attempt, and so does the run."""
    steps_lib.FLAKY_COUNTS.clear()
    flaky = steps_lib.flaky.with_options(retry=RetryConfig(max_retries=3, delay=1))
    client = Client(workspace.config, workspace.store)

    def stop_during_the_delay(woken: threading.Event, seconds: float) -> None:
        running = workspace.store.runs.list(RunFilter(status=ExecutionStatus.RUNNING)).items
        client.stop_run(running[0].id)

    workspace.wait = stop_during_the_delay

    @pipeline
    def p() -> None:
        steps_lib.double(flaky(key="s", failures=2))

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.STOPPED
    attempts = workspace.store.steps.list(StepRunFilter(run_id=run.id), ASC).items
    assert [(s.name, s.attempt, s.status) for s in attempts] == [
        ("flaky", 1, ExecutionStatus.STOPPED)  # not left retrying: the retry never started
    ]
    assert attempts[0].status_reason == (
        "Stopped on request: its retry never started (attempt 1 failed: "
        "ValueError: attempt 1 failed)."
    )


def test_retries_exhausted(workspace: Workspace) -> None:
    steps_lib.FLAKY_COUNTS.clear()

    @pipeline(retry={"max_retries": 1})
    def p() -> None:
        steps_lib.flaky(key="x", failures=5)

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    run = failed.value.run
    attempts = workspace.store.steps.list(StepRunFilter(run_id=run.id), ASC).items
    assert [s.status for s in attempts] == [ExecutionStatus.RETRYING, ExecutionStatus.FAILED]
    assert run.status is ExecutionStatus.FAILED


def test_stop_from_another_process(workspace: Workspace, wharf_home) -> None:
    """`wharf runs stop` in another process of this machine stops the run at once, not at its
    next heartbeat: the running step is interrupted and ends stopped, nothing new starts."""
    steps_lib.RELEASE.clear()
    cli: dict[str, subprocess.Popen[str]] = {}
    waited_out: list[bool] = []

    @step(enable_cache=False)
    def stop_my_run() -> int:
        run_id = str(get_step_context().pipeline_run.id)
        cli["stop"] = subprocess.Popen(
            [sys.executable, "-m", "wharf.cli.main", "runs", "stop", run_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        cli["stop"].wait()
        steps_lib.RELEASE.wait(timeout=60)  # never set: only the stop ends this wait early
        waited_out.append(True)
        return 1

    @pipeline
    def p() -> None:
        first = stop_my_run()
        steps_lib.double(first)

    run = p.run_in(workspace)
    out, err = cli["stop"].communicate(timeout=60)
    assert cli["stop"].returncode == 0, err
    assert "stopping" in out
    assert not waited_out  # interrupted, not at a heartbeat after its wait
    assert run.status is ExecutionStatus.STOPPED
    found = {
        s.name: s.status for s in workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    }
    assert found == {"stop_my_run": ExecutionStatus.STOPPED}


def test_cycle_is_a_clear_error(workspace: Workspace) -> None:
    @pipeline
    def p() -> None:
        a = steps_lib.produce(id="a", after="b")
        steps_lib.double(a, id="b")

    with pytest.raises(PipelineDefinitionError, match="cycle"):
        p.run_in(workspace)
    assert workspace.store.runs.list().total == 0


def test_invalid_step_signatures() -> None:
    with pytest.raises(StepInterfaceError, match=r"\*args"):

        @step
        def bad(*values: int) -> int:
            return 1

    with pytest.raises(StepInterfaceError, match="coroutine"):

        @step
        async def coro() -> int:
            return 1


def test_non_json_parameter_is_rejected(workspace: Workspace) -> None:
    @pipeline
    def p() -> None:
        steps_lib.produce(value=threading.Lock())  # type: ignore[arg-type]

    with pytest.raises(StepInterfaceError, match="is a lock that JSON cannot write"):
        p.run_in(workspace)


def test_a_parameter_that_does_not_fit_its_annotation_is_refused_before_the_run(
    workspace: Workspace,
) -> None:
    @pipeline
    def p(epochs: Any = 3) -> None:
        steps_lib.double(steps_lib.produce())
        steps_lib.produce(value=epochs)

    with pytest.raises(StepInterfaceError) as refused:
        p.run_in(workspace, epochs="ten")
    assert str(refused.value) == (
        "Step 'produce_2' parameter 'value' is annotated int but was given str."
    )
    assert workspace.store.runs.list(RunFilter()).items == []  # no run, no step started
    run = p.run_in(workspace, epochs=4)
    client = Client(workspace.config, workspace.store)
    assert client.load_step_output(run.id, "produce_2") == 4


def test_parameters_that_fit_by_the_rules_of_outputs_run(workspace: Workspace) -> None:
    @step
    def scale(factor: float, offset: int = None) -> float:  # noqa: RUF013 (its own default)
        return factor + (offset or 0)

    @pipeline
    def p() -> None:
        scale(factor=2)  # an int is a float (the numeric tower)
        scale(factor=True, offset=False)  # a bool is an int

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    assert Client(workspace.config, workspace.store).load_step_output(run.id, "scale") == 2


def test_an_upstream_output_annotated_so_that_no_value_fits_is_refused(
    workspace: Workspace,
) -> None:
    @step
    def label() -> str:
        return "ten"

    @step
    def unknown():  # no annotation: its value's type is unknown until it runs
        return 3

    @pipeline
    def p() -> None:
        steps_lib.double(unknown())
        steps_lib.double(label())

    with pytest.raises(StepInterfaceError) as refused:
        p.run_in(workspace)
    assert str(refused.value) == (
        "Step 'double_2' parameter 'x' is annotated int but was given str "
        "(output 'output' of step 'label')."
    )


def test_unserialisable_output_fails_the_step_cleanly(workspace: Workspace) -> None:
    @step
    def leaky() -> tuple[Annotated[int, "fine"], Annotated[object, "lock"]]:
        return 1, threading.Lock()

    @pipeline
    def p() -> None:
        leaky()

    with warnings.catch_warnings(record=True) as caught, pytest.raises(RunFailedError) as failed:
        warnings.simplefilter("always")
        p.run_in(workspace)
    assert caught == []  # no "pickled with cloudpickle" warning on top of the failure
    run = failed.value.run
    assert run.status is ExecutionStatus.FAILED
    record = workspace.store.steps.list(StepRunFilter(run_id=run.id)).items[0]
    assert record.status is ExecutionStatus.FAILED
    assert (record.status_reason or "").startswith(
        "Output 'lock' of step 'leaky': Cannot save a value of type '_thread:lock' with "
        "CloudpickleMaterializer: TypeError: cannot pickle '_thread.lock' object"
    )
    assert "\n" not in (record.status_reason or "")
    assert record.outputs == {}
    assert workspace.store.artifacts.list_versions().total == 0


class Opaque:
    """A type only the warning test saves (the registry warns once per type)."""


def test_a_pickled_outputs_warning_points_at_the_step(workspace: Workspace) -> None:
    @step(enable_cache=False)
    def opaque() -> Opaque:
        return Opaque()

    @pipeline
    def p() -> None:
        opaque()

    with pytest.warns(UserWarning, match="Opaque' has no dedicated materializer") as caught:
        p.run_in(workspace)
    [warning] = caught.list
    code = opaque.func.__code__
    assert (warning.filename, warning.lineno) == (code.co_filename, code.co_firstlineno)


def test_wrong_number_of_outputs(workspace: Workspace) -> None:
    @step
    def short() -> tuple[int, int]:
        return 1  # type: ignore[return-value]

    @pipeline
    def p() -> None:
        short()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    run = failed.value.run
    record = workspace.store.steps.list(StepRunFilter(run_id=run.id)).items[0]
    assert "declares 2 outputs" in (record.status_reason or "")


def test_an_output_of_the_wrong_type_fails_the_step(workspace: Workspace) -> None:
    @step
    def train() -> int:
        return "7"  # type: ignore[return-value]

    @pipeline
    def p() -> None:
        train()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    [record] = workspace.store.steps.list(StepRunFilter(run_id=failed.value.run.id)).items
    assert record.status is ExecutionStatus.FAILED and not record.outputs
    reason = "Step 'train' output 'output' is annotated int but returned str."
    assert reason in (record.status_reason or "")


def test_unknown_step_input_wiring(workspace: Workspace) -> None:
    @pipeline
    def p() -> None:
        steps_lib.double()  # missing required input

    with pytest.raises(StepInterfaceError, match="missing a value for argument 'x'"):
        p.run_in(workspace)


def test_schedule_is_recorded(workspace: Workspace) -> None:
    from wharf import Schedule

    @pipeline(schedule=Schedule(cron_expression="0 * * * *", name="hourly"))
    def p() -> None:
        steps_lib.produce()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    schedules = workspace.store.schedules.list().items
    assert [s.name for s in schedules] == ["hourly"]
