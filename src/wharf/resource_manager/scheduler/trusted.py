"""Building pydantic models from values that are already valid, at the cost of a dict.

Owns: :func:`trusted_model` (as pydantic's own ``BaseModel.__copy__`` does, it sets the
instance's state directly, skipping ``model_construct``'s per-field walk).

Invariant: the caller passes a value for *every* field, by field name, each one the model's
validation would have produced; the result equals, field for field and in
``model_fields_set``, what ``model_construct`` (or ``model_copy``) builds. Tests compare them.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

ModelT = TypeVar("ModelT", bound=BaseModel)

_set = object.__setattr__  # the models are frozen: their own __setattr__ refuses


def trusted_model(
    model: type[ModelT], values: dict[str, Any], fields_set: set[str] | None = None
) -> ModelT:
    """An instance of ``model`` holding ``values`` (every field, valid; the dict is adopted);
    ``fields_set``: its ``model_fields_set`` (default: every field, as given explicitly)."""
    instance = model.__new__(model)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", set(values) if fields_set is None else fields_set)
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance
