"""A dynamic step call whose id, or an output artifact named after it
(``PIPELINE::STEP::OUTPUT``), would be longer than a stored name (255 characters) is refused at
the call, before anything is written (``wharf.execution.dynamic_ids``), as a static pipeline
refuses it when compiled; before, the step ran and failed storing its outputs. An ``after=``
naming no step of the run is refused with the ids it may have meant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wharf import pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

PIPELINE = "p" * 200
STEP = "s" * 44
"""``PIPELINE::STEP::output`` is 254 characters: ``STEP_2`` or ``STEP_0`` is one too many."""


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace.open(load_config({}, home=tmp_path / "home"))
    yield ws
    ws.close()


def step_names(workspace: Workspace, run_id: Any) -> set[str]:
    page = workspace.store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=100))
    return {s.name for s in page.items}


@step(name=STEP, enable_cache=False)
def long_named(x: int) -> int:
    return x


@pytest.mark.parametrize(
    ("call", "refused"),
    [
        (lambda: long_named(1, id="i" * 60), "i" * 60),
        (lambda: long_named(2), f"{STEP}_2"),
        (lambda: long_named.submit(3), f"{STEP}_2"),
        (lambda: long_named.map([4, 5]), f"{STEP}_1"),
    ],
    ids=["explicit-id", "second-call", "submitted", "mapped"],
)
def test_a_step_whose_artifact_name_is_too_long_is_refused_at_the_call(
    workspace: Workspace, call: Any, refused: str
) -> None:
    got: dict[str, Any] = {}

    @pipeline(name=PIPELINE, dynamic=True, raise_on_failure=False)
    def p() -> None:
        got["first"] = long_named(0).load()  # 254 characters: it fits
        call()

    run = p.run_in(workspace)
    assert got["first"] == 0
    assert run.status is ExecutionStatus.FAILED
    reason = run.status_reason or ""
    assert reason.startswith("The pipeline function raised: Output 'output' of step"), reason
    assert "more than the 255 a name may have" in reason, reason
    assert refused[-10:] in reason, reason
    assert step_names(workspace, run.id) == {STEP}  # nothing of the refused call was written


def test_a_step_id_longer_than_a_name_is_refused_saying_so(workspace: Workspace) -> None:
    @pipeline(dynamic=True, raise_on_failure=False)
    def short() -> None:
        long_named(1, id="x" * 300)

    run = short.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert "A step id must have at most 255 characters, got 300" in (run.status_reason or "")
    assert step_names(workspace, run.id) == set()


def test_a_misspelt_after_name_is_refused_with_the_id_it_may_have_meant(
    workspace: Workspace,
) -> None:
    """Before, an ``after=`` string naming no step was dropped without a word."""

    @pipeline(name="ordered", dynamic=True, raise_on_failure=False)
    def ordered() -> None:
        long_named(1, id="train")
        long_named(2, id="evaluate", after="trian")

    run = ordered.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    assert (
        "Step 'evaluate' runs after step 'trian', which this run has not called; "
        "did you mean 'train'? Its steps: train." in (run.status_reason or "")
    ), run.status_reason
    assert step_names(workspace, run.id) == {"train"}
