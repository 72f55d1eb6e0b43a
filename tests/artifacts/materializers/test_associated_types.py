"""A materializer named for an output must save the output's type
(``wharf.artifacts.materializers.associated_types``): refused when the step is defined only
if no value of the annotation can be one it saves, checked again on the value when saved."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from wharf import Client, pipeline, step
from wharf.artifacts.materializers.numpy_materializer import NumpyMaterializer
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StepInterfaceError
from wharf.sdk.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


def test_a_float_output_saved_by_numpy_is_accepted_and_a_numpy_float_round_trips(
    workspace: Workspace,
) -> None:
    """``np.float64`` is a ``float`` (and ``np.float32`` a ``numbers.Real``): a step annotated
    ``-> float`` may return one, which NumpyMaterializer saves; it was refused at definition."""

    @step(enable_cache=False, output_materializers=NumpyMaterializer)
    def mean() -> float:
        return np.float64(1.5)

    @step(enable_cache=False, output_materializers=NumpyMaterializer)
    def half() -> float:
        return np.float32(0.5)

    @step(enable_cache=False)
    def total(a: float, b: float) -> float:
        return float(a + b)

    @pipeline
    def numbers() -> None:
        total(mean(), half())

    run = numbers.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    with Client() as client:
        loaded = client.load_step_output(run.id, "mean")
        assert type(loaded) is np.float64
        assert loaded == 1.5
        assert type(client.load_step_output(run.id, "half")) is np.float32
        assert client.load_step_output(run.id, "total") == 2.0


def test_a_plain_float_for_numpy_fails_when_saved_saying_what_to_return(
    workspace: Workspace,
) -> None:
    @step(enable_cache=False, output_materializers=NumpyMaterializer)
    def mean() -> float:
        return 1.5

    @pipeline(raise_on_failure=False)
    def plain() -> None:
        mean()

    run = plain.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    with Client() as client:
        reason = client.get_run_step(run.id, "mean").status_reason
    assert reason == (
        "Output 'output' of step 'mean': Cannot save a value of type 'builtins:float' with "
        "NumpyMaterializer: it saves only numpy.ndarray, numpy.generic (its ASSOCIATED_TYPES); "
        "return one of those, name a materializer for that type, or none (Wharf then picks one "
        "by the value's type)."
    )


def test_an_annotation_numpy_saves_no_value_of_is_refused_saying_what_to_annotate() -> None:
    def flag() -> bool:  # np.bool_ is no bool, so no bool is a numpy value
        return True

    def listed() -> list[float]:
        return [1.0]

    for func, named in ((flag, "bool"), (listed, "list[float]")):
        with pytest.raises(StepInterfaceError) as info:
            step(output_materializers=NumpyMaterializer)(func)
        assert str(info.value) == (
            f"Output 'output' of step '{func.__name__}' is annotated {named}, which "
            "NumpyMaterializer does not save (its ASSOCIATED_TYPES: numpy.ndarray, "
            "numpy.generic); annotate it with one of those, name a materializer for that type, "
            "or none (Wharf then picks one by the value's type)."
        )


@pytest.mark.parametrize("annotation", [int, complex, str, np.floating, np.ndarray])
def test_annotations_a_numpy_value_can_fit_are_accepted(annotation: type) -> None:
    def func() -> None:
        return None

    func.__annotations__["return"] = annotation
    assert step(output_materializers=NumpyMaterializer)(func).output_materializers
