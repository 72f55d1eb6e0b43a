"""A dynamic step call's ``after=`` (``wharf.execution.dynamic``): the steps it names (by id, a
list of ids, a future or an output) end before it starts, and are its upstream steps in its
step run's spec (what ``wharf runs show`` draws it under, what a replay compares), inline and
isolated; what it cannot name is refused at the call. Before, an id of a step the run had
called was dropped without a word: the step started at once and recorded no edge. A step
after one that failed or was stopped (or taking its output) does not start, as in a static
pipeline: its call names that step, the run's reason.

Real runs: ``cleanup`` writes its start and end to a log file and, before it ends, waits (up to
:data:`PATIENCE`) for the line of a step that should start only after it ended: a step started
too early is always seen, in the log, to start before ``cleanup`` ended."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import pipeline, step
from wharf.cli.run_view import upstream_steps
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import StepExecutionError, StepInterfaceError
from wharf.execution.run_heartbeat import orchestrator_process
from wharf.execution.run_lifecycle import Resumption, latest_step_runs
from wharf.execution.run_loop import RunJob, run_pipeline
from wharf.execution.runtime import RuntimePolicy
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    PageRequest,
    PipelineRunRecord,
    RunStart,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
)

PATIENCE = 1.5
"""Seconds ``cleanup`` waits for a step started before it ended (an isolated one's process
starts well within it)."""


def _lines(log: str) -> list[str]:
    path = Path(log)
    return path.read_text().splitlines() if path.exists() else []


def _write(log: str, line: str) -> None:
    with open(log, "a") as f:
        f.write(line + "\n")


@step(enable_cache=False)
def cleanup(log: str, tag: str = "cleanup") -> int:
    _write(log, f"{tag} start")
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and "evaluate start" not in _lines(log):
        time.sleep(0.02)  # polls for a step that should not start yet, up to a deadline
    _write(log, f"{tag} end")
    return 1


@step(enable_cache=False)
def evaluate(log: str) -> int:
    _write(log, "evaluate start")
    return 2


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


@pytest.fixture
def process_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace whose active stack's orchestrator (``local_process``) isolates steps."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    yield ws
    ws.close()


def steps_of(workspace: Workspace, run_id: Any) -> dict[str, StepRunRecord]:
    page = workspace.store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=100))
    return {s.name: s for s in page.items}


def assert_ran_after(found: dict[str, StepRunRecord], log: str, first: list[str]) -> None:
    """``evaluate`` started once every step of ``first`` ended, and names them upstream."""
    lines = _lines(log)
    assert lines[-1] == "evaluate start", lines
    assert {f"{name} end" for name in first} <= set(lines), lines
    later = found["evaluate"]
    assert later.spec is not None and set(later.spec.upstream) == set(first)
    assert upstream_steps(list(found.values()), None)["evaluate"] == list(later.spec.upstream)
    for name in first:
        end, start = found[name].end_time, later.start_time
        assert end is not None and start is not None and start >= end


def by_id(log: str) -> None:
    cleanup.submit(log)
    evaluate(log, after="cleanup")


def by_ids(log: str) -> None:
    cleanup.submit(log, "a", id="a")
    cleanup.submit(log, "b", id="b")
    evaluate.submit(log, after=["a", "b"]).result()


def by_future(log: str) -> None:
    evaluate(log, after=cleanup.submit(log))


def by_map_future(log: str) -> None:
    evaluate(log, after=cleanup.map([log], ["cleanup_0"]))


@pytest.mark.parametrize(
    ("body", "first"),
    [
        (by_id, ["cleanup"]),
        (by_ids, ["a", "b"]),
        (by_future, ["cleanup"]),
        (by_map_future, ["cleanup_0"]),
    ],
    ids=["id", "ids", "future", "map-future"],
)
def test_a_call_after_a_submitted_step_starts_once_it_ended_and_names_it_upstream(
    workspace: Workspace, tmp_path: Path, body: Callable[[str], None], first: list[str]
) -> None:
    log = str(tmp_path / "order.log")

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        body(log)

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert_ran_after(steps_of(workspace, run.id), log, first)


def test_isolated_steps_run_after_the_step_an_id_names(
    process_workspace: Workspace, tmp_path: Path
) -> None:
    log = str(tmp_path / "order.log")
    isolated_cleanup = cleanup.with_options(runtime="isolated")
    isolated_evaluate = evaluate.with_options(runtime="isolated")

    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        isolated_cleanup.submit(log)
        isolated_evaluate(log, after="cleanup")

    run = p.run_in(process_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps_of(process_workspace, run.id)
    assert found["cleanup"].pid is not None and found["evaluate"].pid is not None
    assert_ran_after(found, log, ["cleanup"])


def refused_call() -> None:
    with contextlib.suppress(StepInterfaceError):  # a tag of another type
        cleanup("log", id="never", tag=object())  # type: ignore[arg-type]
    evaluate("log", after="never")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            lambda: evaluate("log", after=3),
            "Step 'evaluate' got after=3; after= takes the ids of steps this run called",
        ),
        (
            refused_call,
            "Step 'evaluate' runs after step 'never', which was not started (its call failed).",
        ),
    ],
    ids=["not-a-step", "refused-call"],
)
def test_an_after_naming_no_step_that_ran_is_refused(
    workspace: Workspace, body: Callable[[], None], reason: str
) -> None:
    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        body()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert reason in (run.status_reason or ""), run.status_reason
    assert "evaluate" not in steps_of(workspace, run.id)


def test_a_resumed_run_replays_an_after_as_the_same_call(
    workspace: Workspace, tmp_path: Path
) -> None:
    """The process that ran ``cleanup`` died; the restarted one replays the function: the
    same ``after=`` is the same call (``cleanup`` is gone on from, not run again)."""
    log = str(tmp_path / "order.log")

    @pipeline(dynamic=True, name="replayed")
    def p() -> None:
        by_id(log)

    done = steps_of(workspace, p.run_in(workspace).id)
    Path(log).unlink()
    run = resume(workspace, p, done["cleanup"])
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    found = steps_of(workspace, run.id)
    assert found["cleanup"].status is ExecutionStatus.CACHED
    assert found["evaluate"].status is ExecutionStatus.COMPLETED
    assert found["evaluate"].spec == done["evaluate"].spec
    assert _lines(log) == ["evaluate start"]


def resume(workspace: Workspace, p: Any, *records: StepRunRecord) -> PipelineRunRecord:
    """Record a run of ``p`` whose orchestrating process died after step runs ``records``
    (of an earlier run) finished, and resume it as a restarted orchestrator does."""
    spec = p.compile()
    stack = workspace.active_stack()
    artifact_store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
    services = workspace.run_services(artifact_store)
    start = RunStart(
        name="replayed-resumed",
        status=ExecutionStatus.RUNNING,
        orchestrator_run_id="local-resumed",
        user_id=workspace.user.id,
        orchestrator=orchestrator_process(services.heartbeat_interval),
    )
    _, snapshot, run = workspace.store.runs.record(
        workspace.project.id, p.name, stack.id, spec, start
    )
    for record in records:
        create = StepRunCreate(
            run_id=run.id,
            name=record.name,
            status=ExecutionStatus.RUNNING,
            code_hash=record.code_hash,
            parameters=record.parameters,
            inputs=record.inputs,
            spec=record.spec,
            calls=record.calls,
        )
        workspace.store.steps.create(create.reusing(record))
    job = RunJob(snapshot, run, services, pipeline_function=p.func, spec_factory=p._dynamic_spec)
    resumed = Resumption(latest_step_runs(workspace.store, run.id))
    return run_pipeline(job, RuntimePolicy(), None, "local-resumed", resumed)


@step(enable_cache=False)
def breaks(log: str) -> int:
    _write(log, "breaks start")
    raise ValueError("broken")


@step(enable_cache=False)
def evaluate_input(log: str, x: int) -> int:
    _write(log, "evaluate start")
    return x


def steps_for(isolated: bool) -> tuple[Any, Any, Any]:
    """``breaks``, ``evaluate`` and ``evaluate_input``, isolated or inline."""
    found = (breaks, evaluate, evaluate_input)
    if not isolated:
        return found
    return tuple(s.with_options(runtime="isolated") for s in found)  # type: ignore[return-value]


def submitted_after_a_future(log: str, isolated: bool = False) -> None:
    failing, then, _ = steps_for(isolated)
    then.submit(log, after=failing.submit(log)).result()


def submitted_after_an_id(log: str) -> None:
    breaks.submit(log)
    evaluate.submit(log, after="breaks").result()


def mapped_after_a_future(log: str) -> None:
    evaluate.map([log], after=breaks.submit(log)).result()


def called_after_a_caught_failure(log: str) -> None:
    with contextlib.suppress(StepExecutionError):
        breaks(log)
    evaluate(log, after="breaks")


def submitted_with_its_output(log: str, isolated: bool = False) -> None:
    failing, _, then = steps_for(isolated)
    then.submit(log, failing.submit(log)).result()


AFTER_BREAKS = "was not started: it runs after step 'breaks', which failed."
TAKES_ITS_OUTPUT = (
    "Step 'evaluate_input' was not started: its input 'x' is output 'output' of step 'breaks', "
    "which failed."
)


def assert_not_started(
    ws: Workspace, log: str, body: Callable[[], None], mode: str, expected: str, failed: str
) -> None:
    """``body`` raises ``expected`` (uncaught), its step does not start, and the run fails
    with step ``failed`` as its reason, as a static pipeline's does."""
    got: list[str] = []

    @pipeline(dynamic=True, execution_mode=mode, raise_on_failure=False)
    def p() -> None:
        try:
            body()
        except StepExecutionError as exc:
            got.append(str(exc))
            raise

    run = p.run_in(ws)
    assert got == [expected]
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == f"Step(s) failed: {failed}.", run.status_reason
    assert "evaluate start" not in _lines(log)
    assert not {"evaluate", "evaluate_0", "evaluate_input"} & set(steps_of(ws, run.id))


@pytest.mark.parametrize("mode", ["stop_on_failure", "continue_on_failure"])
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (submitted_after_a_future, f"Step 'evaluate' {AFTER_BREAKS}"),
        (submitted_after_an_id, f"Step 'evaluate' {AFTER_BREAKS}"),
        (mapped_after_a_future, f"Step 'evaluate_0' {AFTER_BREAKS}"),
        (called_after_a_caught_failure, f"Step 'evaluate' {AFTER_BREAKS}"),
        (submitted_with_its_output, TAKES_ITS_OUTPUT),
    ],
    ids=["submitted-future", "submitted-id", "map", "called-id", "input"],
)
def test_a_step_after_a_failed_step_does_not_start_and_its_call_names_it(
    workspace: Workspace,
    tmp_path: Path,
    body: Callable[[str], None],
    expected: str,
    mode: str,
) -> None:
    """Before, it started all the same, whatever the execution mode (submitted, as the submit
    waited until the failure; or called): a static pipeline never starts such a step."""
    log = str(tmp_path / "order.log")
    assert_not_started(workspace, log, lambda: body(log), mode, expected, "breaks")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (submitted_after_a_future, f"Step 'evaluate' {AFTER_BREAKS}"),
        (submitted_with_its_output, TAKES_ITS_OUTPUT),
    ],
    ids=["after", "input"],
)
def test_an_isolated_step_after_a_failed_one_does_not_start(
    process_workspace: Workspace, tmp_path: Path, body: Callable[..., None], expected: str
) -> None:
    log = str(tmp_path / "order.log")
    run = lambda: body(log, isolated=True)  # noqa: E731
    assert_not_started(process_workspace, log, run, "continue_on_failure", expected, "breaks")


BOUND = 20.0
"""Seconds ``runs_until_stopped`` runs at most when nothing stops it (the test then fails)."""


@step(enable_cache=False)
def runs_until_stopped(log: str) -> int:
    _write(log, "long start")
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        time.sleep(0.01)  # until fail_fast interrupts it
    return 1


@step(enable_cache=False)
def breaks_once_long_runs(log: str) -> int:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline and "long start" not in _lines(log):
        time.sleep(0.01)  # polls for the other step's start, up to a deadline
    raise ValueError("broken")


def test_a_step_after_a_step_stopped_by_fail_fast_does_not_start(
    workspace: Workspace, tmp_path: Path
) -> None:
    log = str(tmp_path / "order.log")

    def body() -> None:
        stopped = runs_until_stopped.submit(log)
        breaks_once_long_runs.submit(log)
        evaluate.submit(log, after=stopped).result()

    expected = "Step 'evaluate' was not started: it runs after step 'runs_until_stopped', which "
    expected += "was stopped."
    assert_not_started(workspace, log, body, "fail_fast", expected, "breaks_once_long_runs")
