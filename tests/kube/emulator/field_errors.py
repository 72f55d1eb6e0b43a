"""Field errors as a real kube-apiserver words them, collected into one 422 (or a decode 400).

A ``FieldErrors`` collects causes (``reason``, ``message``, ``field``) in the order validation
finds them; ``raise_if_any`` raises the 422 ``Invalid`` a real server answers, its message listing
``field: message`` for every cause. Each cause message is apimachinery's ``ErrorBody`` wording
(``Invalid value: "x": detail``, ``Required value``, ``Unsupported value: …``). A value that a real
server cannot even decode (a bad quantity, non-base64 secret data, a wrong JSON type) is a 400
``BadRequest`` instead, raised at once by ``decode_error``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tests.kube.emulator import errors
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import ResourceType


def go_value(value: Any) -> str:
    """A value as ``field.Invalid`` prints it: strings quoted, numbers and booleans bare."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class FieldErrors:
    """Causes found so far for one object."""

    def __init__(self) -> None:
        self.causes: list[dict[str, str]] = []

    def __bool__(self) -> bool:
        return bool(self.causes)

    def _add(self, reason: str, field: str, message: str) -> None:
        self.causes.append({"reason": reason, "message": message, "field": field})

    def invalid(self, field: str, value: Any, detail: str) -> None:
        self._add("FieldValueInvalid", field, f"Invalid value: {go_value(value)}: {detail}")

    def invalid_detail(self, field: str, detail: str) -> None:
        """An invalid value the message does not repeat (apimachinery's ``OmitValueType``)."""
        self._add("FieldValueInvalid", field, f"Invalid value: {detail}")

    def invalid_each(self, field: str, value: Any, details: Iterable[str]) -> None:
        for detail in details:
            self.invalid(field, value, detail)

    def required(self, field: str, detail: str = "") -> None:
        self._add("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))

    def not_supported(self, field: str, value: Any, supported: Iterable[str]) -> None:
        listed = ", ".join(json.dumps(v) for v in supported)
        self._add(
            "FieldValueNotSupported",
            field,
            f"Unsupported value: {go_value(value)}: supported values: {listed}",
        )

    def forbidden(self, field: str, detail: str) -> None:
        self._add("FieldValueForbidden", field, f"Forbidden: {detail}")

    def duplicate(self, field: str, value: Any) -> None:
        self._add("FieldValueDuplicate", field, f"Duplicate value: {go_value(value)}")

    def not_found(self, field: str, value: Any) -> None:
        self._add("FieldValueNotFound", field, f"Not found: {go_value(value)}")

    def too_long(self, field: str, limit: int) -> None:
        self._add("FieldValueTooLong", field, f"Too long: must have at most {limit} bytes")

    def too_many(self, field: str, actual: int, limit: int) -> None:
        self._add(
            "FieldValueTooMany", field, f"Too many: {actual}: must have at most {limit} items"
        )

    def nonnegative(self, field: str, value: Any) -> None:
        if isinstance(value, int) and value < 0:
            self.invalid(field, value, "must be greater than or equal to 0")

    def immutable(self, field: str, new: Any, old: Any) -> None:
        if new != old:
            self.invalid(field, new, "field is immutable")

    def raise_if_any(self, rtype: ResourceType, name: str) -> None:
        if self.causes:
            raise errors.invalid(rtype, name, _unique(self.causes))


def _unique(causes: list[dict[str, str]]) -> list[dict[str, str]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for cause in causes:
        key = (cause["field"], cause["message"])
        if key not in seen:
            seen.add(key)
            out.append(cause)
    return out


def decode_error(rtype: ResourceType, detail: str) -> ApiError:
    """The 400 a real server answers for a body it cannot decode into the kind's Go type."""
    return ApiError(
        400,
        "BadRequest",
        f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: {detail}',
    )


def expect(
    rtype: ResourceType, value: Any, kind: type | tuple[type, ...], path: str, go_type: str
) -> Any:
    """``value`` if it has the JSON type the field needs (``None`` passes); else a decode 400."""
    if value is None or (isinstance(value, kind) and not _bool_for_number(value, kind)):
        return value
    raise decode_error(
        rtype,
        f"json: cannot unmarshal {_json_type(value)} into Go struct field {path} of type {go_type}",
    )


def _bool_for_number(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return isinstance(value, bool) and bool not in kinds


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
