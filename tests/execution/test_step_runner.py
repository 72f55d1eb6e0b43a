"""A step's user code that exits (``sys.exit``), raises ``KeyboardInterrupt`` in a step thread
or another ``BaseException`` fails its step like any other error (``wharf.execution.step_runner.StepAbortError``):
the pipeline call returns or raises ``RunFailedError``, nothing is left running, and the
process running the pipeline does not exit."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import pipeline, step
from wharf.artifacts.materializers.base import Materializer
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter


@step(enable_cache=False)
def exits(code: int | str | None = 3) -> int:
    sys.exit(code)


@step(enable_cache=False)
def interrupts() -> int:
    raise KeyboardInterrupt


@step(enable_cache=False)
def thread_name() -> str:
    return threading.current_thread().name


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh Wharf home, in the environment (an isolated step's process reads it there)."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.fixture
def workspace(home: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


def step_reasons(workspace: Workspace, run_id: object) -> dict[str, tuple[str, str | None]]:
    page = PageRequest(sort="asc", size=100)
    listed = workspace.store.steps.list(StepRunFilter(run_id=run_id), page).items  # type: ignore[arg-type]
    return {s.name: (s.status.value, s.status_reason) for s in listed}


def test_an_inline_step_that_calls_sys_exit_fails_and_nothing_is_left_running(
    workspace: Workspace,
) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        exits(code=3)
        exits(code=0, id="exits_zero")
        exits(code="bad config", id="exits_message")

    run = p.run_in(workspace)  # no SystemExit out of the call
    assert run.status is ExecutionStatus.FAILED
    assert step_reasons(workspace, run.id) == {
        "exits": ("failed", "SystemExit: 3"),
        "exits_zero": ("failed", "SystemExit: 0"),
        "exits_message": ("failed", "SystemExit: bad config"),
    }


def test_keyboard_interrupt_raised_by_a_step_in_a_step_thread_fails_the_step(
    workspace: Workspace,
) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        thread_name()
        interrupts()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert step_reasons(workspace, run.id)["interrupts"] == ("failed", "KeyboardInterrupt")
    assert workspace.store.runs.get(run.id).status_reason == "Step(s) failed: interrupts."


def test_a_dynamic_step_in_the_main_thread_that_calls_sys_exit_fails(
    workspace: Workspace,
) -> None:
    @pipeline(dynamic=True, raise_on_failure=False)
    def p() -> None:
        assert thread_name().load() == "MainThread"  # a dynamic body's single step runs here
        exits(code=5)

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert step_reasons(workspace, run.id)["exits"] == ("failed", "SystemExit: 5")


@pytest.fixture
def process_workspace(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.5")
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    yield ws
    ws.close()


def test_an_isolated_step_that_calls_sys_exit_fails_with_its_exit_not_a_lost_heartbeat(
    process_workspace: Workspace,
) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        exits(code=3)

    run = p.run_in(process_workspace)
    assert run.status is ExecutionStatus.FAILED
    assert step_reasons(process_workspace, run.id) == {"exits": ("failed", "SystemExit: 3")}


class Abort(BaseException):
    """An exception that is not an ``Exception`` (as some libraries raise)."""


@step(enable_cache=False)
def aborts() -> int:
    raise Abort("custom base exception")


def test_a_step_that_raises_a_base_exception_fails_and_the_run_ends_with_it(
    workspace: Workspace,
) -> None:
    @pipeline(raise_on_failure=False)
    def p() -> None:
        aborts()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == "Step(s) failed: aborts."
    assert step_reasons(workspace, run.id) == {"aborts": ("failed", "Abort: custom base exception")}


class Exiting:
    """A value whose materializer exits, as user code that ends with ``sys.exit`` does."""


class ExitsOnSave(Materializer):
    ASSOCIATED_TYPES = (Exiting,)

    def save(self, data: Any) -> None:
        self.write_bytes("partial", b"1")
        sys.exit(7)

    def load(self, data_type: type[Any]) -> Any:
        return Exiting()


class ExitsOnLoad(Materializer):
    ASSOCIATED_TYPES = (Exiting,)

    def save(self, data: Any) -> None:
        self.write_bytes("value", b"1")

    def load(self, data_type: type[Any]) -> Any:
        raise Abort("no loading today")


@step(enable_cache=False, output_materializers=ExitsOnSave)
def saved_with_an_exit() -> Exiting:
    return Exiting()


@step(enable_cache=False, output_materializers=ExitsOnLoad)
def loaded_with_an_abort() -> Exiting:
    return Exiting()


@step(enable_cache=False)
def takes(value: Exiting) -> int:
    return 1


def test_a_materializer_that_exits_fails_its_step_not_the_process(workspace: Workspace) -> None:
    # The step's function is user code, and so is a materializer's save or load: one that
    # exits failed "the orchestrator" and ended the process running the pipeline.
    @pipeline(raise_on_failure=False, execution_mode="continue_on_failure")
    def p() -> None:
        saved_with_an_exit()
        takes(loaded_with_an_abort())
        thread_name()

    run = p.run_in(workspace)  # no SystemExit out of the call
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason in (
        "Step(s) failed: saved_with_an_exit, takes.",
        "Step(s) failed: takes, saved_with_an_exit.",
    )
    reasons = step_reasons(workspace, run.id)
    assert reasons["saved_with_an_exit"] == (
        "failed",
        "Output 'output' of step 'saved_with_an_exit': SystemExit: 7",
    )
    assert reasons["takes"] == ("failed", "Input 'value' of step 'takes': Abort: no loading today")
    assert reasons["thread_name"][0] == "completed"


TRAINED: list[str] = []


@step(enable_cache=False)
def trains() -> int:
    TRAINED.append("hours of work")
    return 1


@pytest.mark.parametrize(
    "path",
    [
        "no_such_package.materializers:ModelMaterializer",  # a misspelt module
        f"{__name__}:ModelMaterialiser",  # a misspelt class of an imported module
    ],
)
def test_an_unknown_output_materializer_fails_the_step_before_its_code_runs(
    workspace: Workspace, path: str
) -> None:
    # it failed only when the output was saved: the step's work was done, then thrown away
    TRAINED.clear()
    misspelt = trains.with_options(output_materializers=path)

    @pipeline(raise_on_failure=False)
    def p() -> None:
        misspelt()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    status, reason = step_reasons(workspace, run.id)["trains"]
    assert status == "failed"
    assert reason is not None
    assert reason.startswith(f"Output 'output' of step 'trains': Unknown materializer '{path}'")
    assert TRAINED == []


def test_an_output_materializer_the_steps_code_imports_is_found_when_it_saves(
    workspace: Workspace,
) -> None:
    # its module exists but is imported only by the step's code: not refused before it runs
    module = "tests.execution.body_imported_materializer"
    assert module not in sys.modules

    @step(enable_cache=False, output_materializers=f"{module}:MarkedMaterializer")
    def imports_its_materializer() -> object:
        from tests.execution.body_imported_materializer import Marked

        return Marked()

    @pipeline(raise_on_failure=False)
    def p() -> None:
        imports_its_materializer()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, step_reasons(workspace, run.id)


class TextMaterializer(Materializer):
    """Saves strings: anything else would come back as its ``str()``."""

    ASSOCIATED_TYPES = (str,)

    def save(self, data: Any) -> None:
        self.write_bytes("text", str(data).encode())

    def load(self, data_type: type[Any]) -> Any:
        return self.read_bytes("text").decode()


RECEIVED: list[object] = []


@step(enable_cache=False)
def receives(values: Any) -> None:
    RECEIVED.append(values)


def test_an_output_its_named_materializer_does_not_save_fails_the_step(
    workspace: Workspace,
) -> None:
    """An unannotated output (or a materializer named by path) is checked when it is saved:
    the step fails with one line, rather than its list reaching the next step as a string."""
    RECEIVED.clear()

    @step(enable_cache=False, output_materializers=f"{__name__}:TextMaterializer")
    def lists():  # type: ignore[no-untyped-def]
        return [1, 2]

    @pipeline(raise_on_failure=False)
    def p() -> None:
        receives(lists())

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    status, reason = step_reasons(workspace, run.id)["lists"]
    assert status == "failed"
    assert reason == (
        "Output 'output' of step 'lists': Cannot save a value of type 'builtins:list' with "
        "TextMaterializer: it saves only str (its ASSOCIATED_TYPES); return one of those, name "
        "a materializer for that type, or list the type in TextMaterializer.ASSOCIATED_TYPES "
        "((object,) for any type)."
    )
    assert RECEIVED == []
