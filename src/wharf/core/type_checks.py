"""Checking step values against their annotations: returned outputs, and the arguments of a
step call (literal parameters, and upstream artifacts whose type is known).

A step annotated ``-> int`` that returns a ``str`` fails with one line saying so, instead of the
value being stored silently by whichever materializer its type picks; a step ``train(epochs:
int)`` called with ``epochs="ten"`` is refused at the call (when the pipeline is defined, or,
in a dynamic pipeline, when it calls the step). Rules, the same for both:

- only concrete annotations are checked: no annotation, ``Any``, ``object``, a ``TypeVar``, a
  ``Literal`` or anything else that is not a class at runtime is accepted as is;
- generics are checked by their origin only (``list[int]`` -> ``list``, ``dict[str, X]`` ->
  ``dict``); unions (``Optional[int]``, ``int | None``) accept any member's origin, and a union
  with an unchecked member (``int | Any``) is not checked; ``Annotated[T, ...]`` is ``T``;
  a ``NewType`` is its supertype; a ``TypedDict`` is ``dict``;
- the numeric tower of PEP 484: an int is a ``float``, an int or float is a ``complex`` (a bool is
  an int already). Numbers are checked against the ``numbers`` ABCs (``Integral`` for ``int``,
  ``Real`` for ``float``, ``Complex`` for ``complex``), so NumPy's scalars (``np.int64``,
  ``np.float32``), which register with them, pass too: the materializer is chosen by the value's
  own type, so such a value is saved and loaded faithfully;
- a class ``isinstance`` cannot check (a Protocol that is not ``runtime_checkable``) is
  accepted.

An upstream artifact passed to a step is checked by its type where that is known: the class of
its stored value (:func:`check_input_class`), or, before it exists, the annotation of the output
it will be (:func:`check_input_annotation`), refused only when no value of that annotation can
fit: both sides builtin classes (``str``, ``int``, ``list``, ``None``...) of which neither is a
subclass of the other (a user's classes may have a common subclass).
"""

from __future__ import annotations

import numbers
import types
import typing
from typing import Annotated, Any, TypeVar, get_args, get_origin

from wharf.core.errors import StepInterfaceError

# The numeric tower: what a value of the key annotation may be an instance of.
_NUMERIC: dict[type, tuple[type, ...]] = {
    int: (int, numbers.Integral),
    float: (float, numbers.Real),
    complex: (complex, numbers.Complex),
}
_NUMBER_ABCS = frozenset({numbers.Integral, numbers.Real, numbers.Complex})


def _classes(annotation: Any) -> tuple[type, ...] | None:
    """The classes a value annotated ``annotation`` must be an instance of; None: not checked."""
    if annotation is None:
        return (type(None),)
    if annotation is Any or annotation is object or isinstance(annotation, TypeVar):
        return None
    origin = get_origin(annotation)
    if origin is Annotated:
        return _classes(get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        accepted: list[type] = []
        for member in get_args(annotation):
            classes = _classes(member)
            if classes is None:
                return None
            accepted.extend(classes)
        return tuple(accepted)
    if isinstance(annotation, typing.NewType):
        return _classes(annotation.__supertype__)
    if origin is not None:
        annotation = origin
    if typing.is_typeddict(annotation):
        return (dict,)
    if not isinstance(annotation, type) or annotation is object:
        return None
    return _NUMERIC.get(annotation, (annotation,))


def annotation_classes(annotation: Any) -> tuple[type, ...] | None:
    """The classes a value annotated ``annotation`` must be an instance of, by the rules above
    (the numeric tower's ABCs included); None: the annotation is not checked."""
    return _classes(annotation)


def describe_annotation(annotation: Any) -> str:
    """``annotation`` as a message names it (``list[int]``, ``Model``, ``None``)."""
    return _describe(_unannotated(annotation))


def _unannotated(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _describe(annotation: Any) -> str:
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__qualname__
    if isinstance(annotation, typing.NewType):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _expected_and_given(annotation: Any, given: Any) -> tuple[str, str]:
    """How a mismatch names the annotation and the given type (by module if named alike)."""
    annotation, given = _unannotated(annotation), _unannotated(given)
    expected, got = _describe(annotation), _describe(given)
    if expected == got:  # two classes of one name: say which modules
        expected = f"{getattr(annotation, '__module__', '?')}.{expected}"
        got = f"{getattr(given, '__module__', '?')}.{got}"
    return expected, got


def _fits(classes: tuple[type, ...], value: Any) -> bool:
    try:
        return isinstance(value, classes)
    except TypeError:  # e.g. a Protocol that is not runtime_checkable: cannot be checked
        return True


def check_output_type(step_name: str, output: str, annotation: Any, value: Any) -> None:
    """Raise :class:`StepInterfaceError` if ``value`` does not fit ``annotation`` (rules above)."""
    classes = _classes(annotation)
    if classes is None or _fits(classes, value):
        return
    expected, returned = _expected_and_given(annotation, type(value))
    raise StepInterfaceError(
        f"Step '{step_name}' output '{output}' is annotated {expected} but returned {returned}."
    )


def check_parameter_type(step_name: str, parameter: str, annotation: Any, value: Any) -> None:
    """Raise :class:`StepInterfaceError` if the value given to a step's parameter does not fit
    its annotation (rules above)."""
    classes = _classes(annotation)
    if classes is None or _fits(classes, value):
        return
    expected, given = _expected_and_given(annotation, type(value))
    raise StepInterfaceError(
        f"Step '{step_name}' parameter '{parameter}' is annotated {expected} but was given {given}."
    )


def check_input_class(
    step_name: str, parameter: str, annotation: Any, value_class: type, source: str
) -> None:
    """Raise :class:`StepInterfaceError` if an upstream artifact whose stored value is a
    ``value_class`` (``source`` says which artifact) cannot fit the parameter's annotation."""
    classes = _classes(annotation)
    if classes is None:
        return
    try:
        if issubclass(value_class, classes):
            return
    except TypeError:  # a class issubclass cannot check
        return
    _refuse_input(step_name, parameter, annotation, value_class, source)


def check_input_annotation(
    step_name: str, parameter: str, annotation: Any, output_annotation: Any, source: str
) -> None:
    """Raise :class:`StepInterfaceError` if no value of the upstream output's annotation can fit
    the parameter's: both builtin classes, neither a subclass of the other (see above)."""
    classes, given = _classes(annotation), _classes(output_annotation)
    if classes is None or given is None or _may_fit(given, classes):
        return
    _refuse_input(step_name, parameter, annotation, output_annotation, source)


def _may_fit(given: tuple[type, ...], classes: tuple[type, ...]) -> bool:
    if not all(_builtin(c) for c in given + classes if c not in _NUMBER_ABCS):
        return True  # a user's class may share a subclass with the other side's
    try:
        return any(issubclass(g, c) or issubclass(c, g) for g in given for c in classes)
    except TypeError:
        return True


def _builtin(cls: type) -> bool:
    return cls.__module__ == "builtins"


def _refuse_input(step_name: str, parameter: str, annotation: Any, given: Any, source: str) -> None:
    expected, got = _expected_and_given(annotation, given)
    raise StepInterfaceError(
        f"Step '{step_name}' parameter '{parameter}' is annotated {expected} but was given "
        f"{got} ({source})."
    )
