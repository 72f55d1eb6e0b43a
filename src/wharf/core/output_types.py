"""Checking a step's returned output values against their annotations.

A step annotated ``-> int`` that returns a ``str`` fails with one line saying so, instead of the
value being stored silently by whichever materializer its type picks. Rules:

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


def _describe(annotation: Any) -> str:
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__qualname__
    if isinstance(annotation, typing.NewType):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def check_output_type(step_name: str, output: str, annotation: Any, value: Any) -> None:
    """Raise :class:`StepInterfaceError` if ``value`` does not fit ``annotation`` (rules above)."""
    classes = _classes(annotation)
    if classes is None:
        return
    try:
        if isinstance(value, classes):
            return
    except TypeError:  # e.g. a Protocol that is not runtime_checkable: cannot be checked
        return
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    expected = _describe(annotation)
    returned = "None" if value is None else type(value).__qualname__
    if expected == returned:  # two classes of one name: say which modules
        expected = f"{annotation.__module__}.{expected}"
        returned = f"{type(value).__module__}.{returned}"
    raise StepInterfaceError(
        f"Step '{step_name}' output '{output}' is annotated {expected} but returned {returned}."
    )
