"""The handles a dynamic pipeline's function gets back from its step calls."""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import pytest

from wharf.execution.dynamic_futures import (
    MapResultsFuture,
    OutputArtifact,
    StepFuture,
    StepOutputs,
)
from wharf.store.models import ArtifactVersionRecord


def version() -> ArtifactVersionRecord:
    return ArtifactVersionRecord(
        id=uuid.uuid4(),
        artifact_id=uuid.uuid4(),
        project_id=uuid.uuid4(),
        name="p::score::output",
        version=1,
        uri="/a/score",
        data_type="builtins:float",
        materializer="m",
        content_hash=None,
        producer_step_run_id=None,
        artifact_store_id=None,
        created=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_an_output_handle_cannot_decide_a_condition() -> None:
    output = OutputArtifact("score", "output", version(), lambda _: 0.0)
    with pytest.raises(TypeError, match=r"Output 'output' of step 'score' .*\.load\(\)"):
        bool(output)
    assert output.load() == 0.0  # the value, false here, is what a condition should read


def test_a_submitted_step_cannot_decide_a_condition() -> None:
    """``if score.submit(...):`` was always true, whatever the step returns."""
    done: Future[StepOutputs] = Future()
    done.set_result(OutputArtifact("score", "output", version(), lambda _: 0.0))
    submitted = StepFuture("score", done)
    with pytest.raises(TypeError, match=r"Step 'score' was submitted: .*\.load\(\)"):
        bool(submitted)
    assert submitted.load() == 0.0


@pytest.mark.parametrize("compare", [lambda h: h == 0.0, lambda h: h != 0.0, lambda h: h > 0.5])
def test_a_handle_compared_with_a_value_raises_naming_load(compare: Any) -> None:
    """``score(...) == 0.0`` was silently False (``!=`` True) whatever the step returned."""
    output = OutputArtifact("score", "output", version(), lambda _: 0.0)
    done: Future[StepOutputs] = Future()
    done.set_result(output)
    submitted = StepFuture("score", done)
    mapped = MapResultsFuture([submitted])
    with pytest.raises(TypeError, match=r"Output 'output' of step 'score' .*compare its \.load"):
        compare(output)
    with pytest.raises(TypeError, match=r"Step 'score' was submitted: .*compare its \.load"):
        compare(submitted)
    with pytest.raises(TypeError, match=r"step\.map\(\.\.\.\) \(steps score\.\.\.\) .*\.load"):
        compare(mapped)
    assert compare(output.load()) == compare(0.0)  # the value is what a comparison reads


def test_handles_still_equal_only_themselves_and_hash() -> None:
    first = OutputArtifact("score", "output", version(), lambda _: 0.0)
    second = OutputArtifact("score", "output", version(), lambda _: 0.0)
    assert first == first and first != second
    assert len({first, second, first}) == 2
    assert first in [second, first]
    mapped = MapResultsFuture([])
    assert mapped == mapped and len(mapped) == 0
