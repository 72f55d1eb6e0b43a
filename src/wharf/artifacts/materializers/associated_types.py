"""Whether a materializer a step names for an output saves that output's type.

The registry offers a materializer only values of the types in its ``ASSOCIATED_TYPES``; one a
step names (``@step(output_materializers=...)``) skips the registry, so the same rule is checked
for it: when the step is defined, against the output's annotation (:func:`annotation_problem`),
and when the output is saved, against the value's type (:func:`value_problem`). A materializer
whose ``ASSOCIATED_TYPES`` is ``(object,)`` saves any type; one that lists none saves nothing.
Each problem is one line; None: no problem.

At definition an annotation is refused only when no value of it can be one the materializer
saves: neither class is a subclass of the other and no class of this process is a subclass of
both (``-> float`` with ``NumpyMaterializer`` is accepted: ``numpy.float64`` is a ``float`` and
a ``numpy.generic``, and passes the output's check; a plain ``float`` is refused when saved).
"""

from __future__ import annotations

from typing import Any

from wharf.artifacts.materializers.base import Materializer

ANY_TYPE = "((object,) for any type)"


def annotation_problem(
    output: str, materializer: type[Materializer], classes: tuple[type, ...], annotation: str
) -> str | None:
    """Why ``materializer`` cannot save ``output`` (e.g. "Output 'x' of step 's'"), annotated
    ``annotation`` and whose values are instances of ``classes``: none of them is related to a
    type it lists (a value of a superclass of one, e.g. ``Sequence`` for ``list``, may still be
    one it saves)."""
    associated = materializer.ASSOCIATED_TYPES
    if not associated:
        return f"{output}: {_lists_none(materializer)}"
    for given in classes:
        for saved in associated:
            try:
                if _related(given, saved):
                    return None
            except TypeError:  # a class issubclass cannot check: not refused
                return None
    return (
        f"{output} is annotated {annotation}, which {materializer.__name__} does not save (its "
        f"ASSOCIATED_TYPES: {_names(associated)}); annotate it with one of those, "
        f"{_remedy(materializer)}"
    )


def _related(given: type, saved: type) -> bool:
    """Whether a value may be an instance of both: one class is a subclass of the other, or a
    class defined in this process (``numpy.float64`` for ``float`` and ``numpy.generic``) is a
    subclass of both (``issubclass`` also sees ABC registrations: ``numbers.Real``)."""
    if issubclass(given, saved) or issubclass(saved, given):
        return True
    seen: set[type] = set()
    pending = [saved]
    while pending:
        cls = pending.pop()
        for sub in type.__subclasses__(cls):
            if sub not in seen:
                if issubclass(sub, given):
                    return True
                seen.add(sub)
                pending.append(sub)
    return False


def value_problem(materializer: type[Materializer], value: Any) -> str | None:
    """Why ``materializer`` cannot save ``value``: its type is not among the types it lists."""
    associated = getattr(materializer, "ASSOCIATED_TYPES", (object,))
    if not associated:
        return _lists_none(materializer)
    if isinstance(value, associated):
        return None
    return (
        f"it saves only {_names(associated)} (its ASSOCIATED_TYPES); return one of those, "
        f"{_remedy(materializer)}"
    )


def _remedy(materializer: type[Materializer]) -> str:
    if materializer.__module__.partition(".")[0] == "wharf":  # not the user's to change
        return (
            "name a materializer for that type, or none (Wharf then picks one by the value's type)."
        )
    return (
        "name a materializer for that type, or list the type in "
        f"{materializer.__name__}.ASSOCIATED_TYPES {ANY_TYPE}."
    )


def _lists_none(materializer: type[Materializer]) -> str:
    return (
        f"{materializer.__name__} lists no type in its ASSOCIATED_TYPES: list the types it "
        f"saves {ANY_TYPE}."
    )


def _names(types: tuple[type, ...]) -> str:
    return ", ".join(
        t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
        for t in types
    )
