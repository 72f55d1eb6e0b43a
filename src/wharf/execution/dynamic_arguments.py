"""How a dynamic pipeline reads the arguments of a step call.

Owns the rules that tell another step's output (an artifact handle, a future, a map's
futures) from a literal value, which arguments a ``.map`` maps over, and the check of an
upstream artifact's stored class against the input's annotation. Invariant: an input takes one
upstream output; several at once, or a container of them, are refused naming the input.
"""

from __future__ import annotations

from typing import Any

from wharf.artifacts.materializers.registry import load_type
from wharf.core.errors import MaterializationError, StepInterfaceError
from wharf.core.type_checks import check_input_class
from wharf.execution.dynamic_futures import MapResultsFuture, OutputArtifact, StepFuture, Unmapped
from wharf.execution.step_like import StepLike


def artifact_of(value: Any, step_id: str, input_name: str) -> OutputArtifact | None:
    if isinstance(value, StepFuture):
        value = value.result()
    if isinstance(value, OutputArtifact):
        return value
    if isinstance(value, tuple) and value and all(isinstance(v, OutputArtifact) for v in value):
        raise StepInterfaceError(
            f"Input '{input_name}' of step '{step_id}' got several outputs at once; "
            "pass one of them."
        )
    if isinstance(value, MapResultsFuture) or (
        isinstance(value, list | tuple)
        and any(isinstance(v, OutputArtifact | StepFuture | MapResultsFuture) for v in value)
    ):
        raise StepInterfaceError(
            f"Input '{input_name}' of step '{step_id}' got a {type(value).__name__} of step "
            "outputs; an input takes one output: pass each to its own input, or pass their "
            "values (.load())."
        )
    return None


def check_artifact(step: StepLike, step_id: str, input_name: str, artifact: OutputArtifact) -> None:
    """Refuse an upstream artifact whose stored value's class cannot fit the input's annotation
    (:func:`~wharf.core.type_checks.check_input_class`; a class not imported here is not
    checked)."""
    try:
        value_class = load_type(artifact.version.data_type)
    except MaterializationError:
        return
    check_input_class(
        step_id,
        input_name,
        step.interface.inputs[input_name].annotation,
        value_class,
        f"output '{artifact.output_name}' of step '{artifact.step_name}'",
    )


def is_upstream(value: Any) -> bool:
    """Whether a step argument is (or holds) another step's output, not a literal value."""
    upstream = OutputArtifact | StepFuture | MapResultsFuture
    return isinstance(value, upstream) or (
        isinstance(value, list | tuple) and any(isinstance(v, upstream) for v in value)
    )


def is_mappable(value: Any) -> bool:
    return isinstance(value, list | MapResultsFuture) and not isinstance(value, Unmapped)


def as_list(value: Any) -> list[Any]:
    return list(value.futures) if isinstance(value, MapResultsFuture) else list(value)


def map_arguments(
    step: StepLike, step_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[dict[str, Any]]:
    """The arguments of each step of ``step.map(*args, **kwargs)``, bound to the step's inputs:
    each list (or map result) is mapped over, element by element, the other values (and those
    wrapped in ``unmapped``) passed whole; ``after=`` is the map's own."""
    bound = step.interface.bind(step_name, args, {k: v for k, v in kwargs.items() if k != "after"})
    mapped = {k: as_list(v) for k, v in bound.items() if is_mappable(v)}
    if not mapped:
        raise StepInterfaceError(
            f"step.map of '{step_name}' needs at least one list (or map result) to map "
            "over; wrap values passed whole in unmapped(...)."
        )
    lengths = {k: len(v) for k, v in mapped.items()}
    if len(set(lengths.values())) != 1:
        raise StepInterfaceError(
            f"step.map of '{step_name}' got inputs of different lengths: {lengths}."
        )
    count = next(iter(lengths.values()))
    fixed = {
        k: (v.value if isinstance(v, Unmapped) else v) for k, v in bound.items() if k not in mapped
    }
    return [{**fixed, **{k: v[i] for k, v in mapped.items()}} for i in range(count)]


def as_sequence(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


__all__ = [
    "artifact_of",
    "as_list",
    "as_sequence",
    "check_artifact",
    "is_mappable",
    "is_upstream",
    "map_arguments",
]
