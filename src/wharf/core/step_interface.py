"""Parsing a step function's signature into its inputs and named outputs.

Rules:
- every parameter is passed by name; ``*args``/``**kwargs`` are refused;
- no return annotation -> one output named ``output``; ``-> None`` -> no outputs;
- ``Annotated[T, "name"]`` names a single output; ``tuple[A, B]`` gives several outputs named
  ``output_0``, ``output_1`` unless each element is ``Annotated[..., "name"]``;
- a bare ``tuple`` or ``tuple[T, ...]`` is one output;
- each returned output must fit its annotation (``wharf.core.type_checks``), else the step fails;
  so must each value a step call gives a parameter (:meth:`StepInterface.check_parameter`),
  else the call is refused (its default is the step's own: not checked); so must it be a JSON
  value, except the parameter's own default, which is then not recorded (:meth:`records`).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from wharf.core.errors import StepInterfaceError
from wharf.core.exact_values import unstorable
from wharf.core.suggestions import listing, unmatched
from wharf.core.type_checks import check_output_type, check_parameter_type

DEFAULT_OUTPUT = "output"


@dataclass(frozen=True)
class InputParam:
    name: str
    annotation: Any
    default: Any
    has_default: bool


@dataclass(frozen=True)
class OutputParam:
    name: str
    annotation: Any


@dataclass(frozen=True)
class StepInterface:
    inputs: dict[str, InputParam]
    outputs: tuple[OutputParam, ...]

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outputs)

    def bind(
        self,
        step_name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        step_id: str | None = None,
    ) -> dict[str, Any]:
        """Map positional and keyword arguments to input names; defaults are filled in. Errors
        name the step, and the call's ``step_id`` too where it differs (``train_2``)."""
        who = f"Step '{step_name}'"
        if step_id is not None and step_id != step_name:
            who += f" (id '{step_id}')"
        names = list(self.inputs)
        if len(args) > len(names):
            raise StepInterfaceError(
                f"{who} takes {len(names)} arguments but {len(args)} were given"
                + (f" ({listing(names)})." if names else ".")
            )
        bound = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in self.inputs:
                raise StepInterfaceError(
                    f"{who} got an unexpected argument '{key}'"
                    + unmatched(key, names, "parameters", none="it takes none")
                )
            if key in bound:
                raise StepInterfaceError(f"{who} got multiple values for argument '{key}'.")
            bound[key] = value
        for name, param in self.inputs.items():
            if name not in bound:
                if not param.has_default:
                    raise StepInterfaceError(f"{who} is missing a value for argument '{name}'.")
                bound[name] = param.default
        return bound

    def check_parameter(self, step_name: str, name: str, value: Any) -> None:
        """Refuse a value given to input ``name`` that does not fit its annotation
        (:func:`~wharf.core.type_checks.check_parameter_type`); the input's default, the step's
        own choice (``x: int = None``), is not checked."""
        param = self.inputs[name]
        if param.has_default and value is param.default:
            return
        check_parameter_type(step_name, name, param.annotation, value)

    def records(self, step_id: str, name: str, value: Any) -> bool:
        """Whether a step call records ``value`` as its parameter ``name``, once checked: a
        JSON value that fits the annotation (:meth:`check_parameter`) is recorded; the input's
        own default where it is no JSON value (``cfg: Path = Path("a")``) is not, the step's
        function uses it where it runs (its cache key counts it by content:
        ``wharf.execution.held_values``); any other value that is not JSON is refused."""
        problem = unstorable(value)
        if problem is not None:
            param = self.inputs[name]
            if param.has_default and value is param.default:
                return False
            raise StepInterfaceError(
                f"Parameter '{name}' of step '{step_id}' is {problem}; pass JSON values as "
                "parameters and other objects as outputs of a step."
            )
        self.check_parameter(step_id, name, value)
        return True


def _annotated_name(annotation: Any) -> tuple[Any, str | None]:
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
        names = [e for e in extras if isinstance(e, str)]
        return base, (names[0] if names else None)
    return annotation, None


def _parse_outputs(step_name: str, annotation: Any) -> tuple[OutputParam, ...]:
    if annotation is inspect.Signature.empty:
        return (OutputParam(DEFAULT_OUTPUT, Any),)
    if annotation is None or annotation is type(None):
        return ()
    base, name = _annotated_name(annotation)
    if name is not None:
        return (OutputParam(name, base),)
    if get_origin(base) is tuple:
        elements = get_args(base)
        if not elements or (len(elements) == 2 and elements[1] is Ellipsis):
            return (OutputParam(DEFAULT_OUTPUT, base),)
        outputs = []
        for i, element in enumerate(elements):
            element_type, element_name = _annotated_name(element)
            outputs.append(OutputParam(element_name or f"output_{i}", element_type))
        names = [o.name for o in outputs]
        if len(set(names)) != len(names):
            raise StepInterfaceError(f"Step '{step_name}' has duplicate output names: {names}.")
        return tuple(outputs)
    return (OutputParam(DEFAULT_OUTPUT, base),)


def parse_interface(func: Callable[..., Any], step_name: str) -> StepInterface:
    try:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise StepInterfaceError(f"Cannot read the signature of step '{step_name}': {exc}") from exc
    inputs: dict[str, InputParam] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise StepInterfaceError(
                f"Step '{step_name}' cannot take *args or **kwargs ('{param.name}'); "
                "declare each input by name."
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise StepInterfaceError(
                f"Step '{step_name}' cannot have positional-only parameter '{param.name}'."
            )
        inputs[param.name] = InputParam(
            name=param.name,
            annotation=hints.get(param.name, Any),
            default=None if param.default is param.empty else param.default,
            has_default=param.default is not param.empty,
        )
    returns = hints.get("return", inspect.Signature.empty)
    if "return" in hints and hints["return"] is type(None):
        returns = None
    return StepInterface(inputs=inputs, outputs=_parse_outputs(step_name, returns))


def split_outputs(step_name: str, interface: StepInterface, value: Any) -> dict[str, Any]:
    """Map a step function's return value to its named outputs, each checked against its
    annotation (:func:`~wharf.core.type_checks.check_output_type`)."""
    outputs = interface.outputs
    if not outputs:
        if value is not None:  # dropped silently, it would be lost
            raise StepInterfaceError(
                f"Step '{step_name}' is annotated '-> None' but returned "
                f"{type(value).__name__} {value!r:.80}; annotate its return type to keep it."
            )
        return {}
    if len(outputs) == 1:
        values: tuple[Any, ...] = (value,)
    elif not isinstance(value, tuple | list) or len(value) != len(outputs):
        raise StepInterfaceError(
            f"Step '{step_name}' declares {len(outputs)} outputs "
            f"({', '.join(o.name for o in outputs)}) but returned "
            f"{type(value).__name__} {value!r:.80}."
        )
    else:
        values = tuple(value)
    for o, v in zip(outputs, values, strict=True):
        check_output_type(step_name, o.name, o.annotation, v)
    return {o.name: v for o, v in zip(outputs, values, strict=True)}
