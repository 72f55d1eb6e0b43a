"""``environment=`` on ``@pipeline`` and ``@step``: a step sees the variables in ``os.environ``
while it runs (the step's own override the pipeline's), inline and in its own process; inline
steps whose values conflict never run together; the process environment comes back after."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import Client, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

NAMES = ("WT_PIPELINE_ONLY", "WT_OVERRIDDEN", "WT_STEP_ONLY")
PIPELINE_VARIABLES = {"WT_PIPELINE_ONLY": "from-pipeline", "WT_OVERRIDDEN": "from-pipeline"}


@step(enable_cache=False, environment={"WT_OVERRIDDEN": "from-step", "WT_STEP_ONLY": "step"})
def read_variables() -> str:
    """The variables this step sees, and the process it ran in (JSON)."""
    return json.dumps({"pid": os.getpid(), **{n: os.environ.get(n) for n in NAMES}})


plain = read_variables.with_options(environment=None)


@pipeline(environment=PIPELINE_VARIABLES)
def with_variables() -> None:
    read_variables()
    plain(id="plain")


@step(enable_cache=False)
def watch_variable(name: str, start: str, finish: str, seconds: float = 0.3) -> str:
    """Every value of ``name`` seen during about ``seconds``; touch ``start`` first, and wait
    for ``finish`` to exist (if not empty) before returning."""
    Path(start).touch()
    seen = {os.environ.get(name)}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or (finish and not Path(finish).exists()):
        seen.add(os.environ.get(name))
        assert time.monotonic() < deadline + 30, "the other step never came"
        time.sleep(0.005)
    return ",".join(sorted(str(v) for v in seen))


def _seen(workspace: Workspace, run_id, step_name: str) -> dict[str, str | None]:
    value = Client(workspace.config, workspace.store).load_step_output(run_id, step_name)
    return json.loads(value)  # type: ignore[no-any-return]


def _check(workspace: Workspace, run_id) -> tuple[int, int]:
    own = _seen(workspace, run_id, "read_variables")
    assert {n: own[n] for n in NAMES} == {
        "WT_PIPELINE_ONLY": "from-pipeline",
        "WT_OVERRIDDEN": "from-step",
        "WT_STEP_ONLY": "step",
    }
    other = _seen(workspace, run_id, "plain")
    assert {n: other[n] for n in NAMES} == {
        "WT_PIPELINE_ONLY": "from-pipeline",
        "WT_OVERRIDDEN": "from-pipeline",
        "WT_STEP_ONLY": None,
    }
    return int(own["pid"]), int(other["pid"])  # type: ignore[arg-type]


def test_inline_steps_see_their_variables_and_the_process_gets_its_own_back(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("WT_OVERRIDDEN", "before")
    monkeypatch.delenv("WT_PIPELINE_ONLY", raising=False)
    monkeypatch.delenv("WT_STEP_ONLY", raising=False)
    run = with_variables.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert _check(workspace, run.id) == (os.getpid(), os.getpid())
    assert os.environ["WT_OVERRIDDEN"] == "before"
    assert "WT_PIPELINE_ONLY" not in os.environ and "WT_STEP_ONLY" not in os.environ


@pytest.fixture
def process_workspace(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    ws = Workspace.open(load_config())
    make_stack(ws, "procs", "local_process")
    yield ws
    ws.close()


def test_isolated_steps_see_their_variables_in_their_own_process(
    process_workspace: Workspace,
):
    run = with_variables.run_in(process_workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    pids = _check(process_workspace, run.id)
    assert os.getpid() not in pids
    assert not any(n in os.environ for n in NAMES)


def test_inline_steps_with_conflicting_values_never_run_together(
    workspace: Workspace, tmp_path: Path
):
    """Two inline steps setting WT_SHARED to different values each see only their own value
    throughout; a step whose variables do not overlap runs beside them (``one`` and ``other``
    each wait for the other to start)."""
    one = watch_variable.with_options(environment={"WT_SHARED": "one"})
    two = watch_variable.with_options(environment={"WT_SHARED": "two"})
    other = watch_variable.with_options(environment={"WT_OTHER": "x"})
    marks = {n: str(tmp_path / n) for n in ("one", "two", "other")}

    @pipeline(dynamic=True)
    def p() -> None:
        futures = [
            one.submit("WT_SHARED", marks["one"], marks["other"], id="one"),
            two.submit("WT_SHARED", marks["two"], "", id="two"),
            other.submit("WT_OTHER", marks["other"], marks["one"], id="other", seconds=0),
        ]
        for f in futures:
            f.wait()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    client = Client(workspace.config, workspace.store)
    assert client.load_step_output(run.id, "one") == "one"
    assert client.load_step_output(run.id, "two") == "two"
    assert client.load_step_output(run.id, "other") == "x"
    assert "WT_SHARED" not in os.environ and "WT_OTHER" not in os.environ
