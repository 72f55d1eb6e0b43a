"""Turning pydantic validation failures into Wharf's ``InputError``.

Owns: :func:`load`, the one way the service and tests build domain models from untrusted data.
Invariant: callers of the domain never see ``pydantic.ValidationError``; they get an
``InputError`` whose text names the model, the field path and the problem, on one line.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from wharf.core.errors import InputError

ModelT = TypeVar("ModelT", bound=BaseModel)


def describe_validation_error(title: str, error: ValidationError) -> str:
    """One line per problem, joined with ``; `` so the CLI can print it as one line."""
    parts: list[str] = []
    for item in error.errors(include_url=False, include_context=False):
        location = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"])
        # pydantic prefixes messages of ValueErrors raised in validators; users need the rest.
        message = message.removeprefix("Value error, ")
        parts.append(f"{location}: {message}" if location else message)
    return f"Invalid {title}: " + "; ".join(parts)


def load(model: type[ModelT], data: Any) -> ModelT:
    """Validate ``data`` into ``model``; raise :class:`InputError` with a readable message."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InputError(describe_validation_error(_title(model), error)) from None


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
    return " ".join(word.lower() for word in words)
