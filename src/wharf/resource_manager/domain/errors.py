"""Turning pydantic validation failures into Wharf's ``InputError``.

Owns: :func:`load`, the one way the service and tests build domain models from untrusted data.
Invariant: callers of the domain never see ``pydantic.ValidationError``; they get an
``InputError`` whose text names the model, each bad field and the problem in plain words, on
one line.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from wharf.core.errors import InputError
from wharf.core.validation import describe_validation_error as describe

ModelT = TypeVar("ModelT", bound=BaseModel)


def load(model: type[ModelT], data: Any) -> ModelT:
    """Validate ``data`` into ``model``; raise :class:`InputError` with a readable message."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InputError(describe(error, title=_title(model), model=model)) from None


def _title(model: type[BaseModel]) -> str:
    name = model.__name__
    words: list[str] = []
    current = ""
    for char in name:
        if char.isupper() and current:
            words.append(current)
            current = char
        else:
            current += char
    words.append(current)
    if len(words) > 1 and words[-1] in {"Create", "Update", "Spec"}:
        words.pop()  # PoolCreate is what the user calls a pool
    return " ".join(word.lower() for word in words)
