"""Label selectors and field selectors, parsed and matched as a kube-apiserver does.

Label selectors follow apimachinery's grammar: comma-separated requirements ``k=v``, ``k==v``,
``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does not exist) and the
integer comparisons ``k>1`` / ``k<1``; keys and values are validated as label keys and values.
Field selectors are ``field=value`` / ``==`` / ``!=`` terms over the fields each kind lets a client
select on; any other field is a 400 with the real server's message. Parse errors raise
``ApiError(400, "BadRequest", …)``. Parsed selectors are immutable and safe to share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.names import label_value_errors, qualified_name_errors

# ---------------------------------------------------------------------------------------------
# Label selectors


@dataclass(frozen=True)
class Requirement:
    """One requirement: ``key``, an operator name and its (sorted, de-duplicated) values."""

    key: str
    operator: str  # "in" | "notin" | "=" | "==" | "!=" | "exists" | "!" | "gt" | "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.operator:
            case "in" | "=" | "==":
                return present and value in self.values
            case "notin" | "!=":
                return not present or value not in self.values
            case "exists":
                return present
            case "!":
                return not present
            case "gt" | "lt":
                if not present:
                    return False
                try:
                    actual = int(value)
                except ValueError:
                    return False
                bound = int(self.values[0])
                return actual > bound if self.operator == "gt" else actual < bound
        raise AssertionError(self.operator)


@dataclass(frozen=True)
class LabelSelector:
    """All requirements must match; no requirements matches every object."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


EVERYTHING = LabelSelector()

_SPECIAL = "=!(),<>"
_WHITESPACE = " \t\r\n"
_OPERATOR_TOKENS = ("!=", "==", "=", "!", "(", ")", ",", ">", "<")
_KEYWORDS = ("in", "notin")


def _bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def _tokenize(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal); kind is "id", "in", "notin", an operator literal, or "end"."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch in _SPECIAL:
            for op in _OPERATOR_TOKENS:  # longest first: "!=" before "!", "==" before "="
                if text.startswith(op, i):
                    tokens.append((op, op))
                    i += len(op)
                    break
        else:
            start = i
            while i < len(text) and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
                i += 1
            word = text[start:i]
            tokens.append((word if word in _KEYWORDS else "id", word))
    tokens.append(("end", ""))
    return tokens


class _RequirementError(Exception):
    """A problem inside one requirement (reported with "unable to parse requirement: ")."""


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self, *, values: bool = True) -> tuple[str, str]:
        kind, literal = self.tokens[self.pos]
        if values and kind in _KEYWORDS:
            kind = "id"  # "in"/"notin" are plain identifiers where a value is expected
        return kind, literal

    def take(self, *, values: bool = True) -> tuple[str, str]:
        token = self.peek(values=values)
        self.pos += 1
        return token

    def parse(self) -> LabelSelector:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self.peek()
            if kind == "end":
                break
            if kind not in ("id", "!"):
                raise _bad_request(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self.requirement())
            except _RequirementError as exc:
                raise _bad_request(f"unable to parse requirement: {exc}") from None
            kind, literal = self.take()
            if kind == "end":
                break
            if kind != ",":
                raise _bad_request(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self.peek()
            if kind not in ("id", "!"):
                raise _bad_request(f"found '{literal}', expected: identifier after ','")
        return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))

    def requirement(self) -> Requirement:
        kind, key = self.take()
        negated = kind == "!"
        if negated:
            kind, key = self.take()
        if kind != "id":
            raise _RequirementError(f"found '{key}', expected: identifier")
        _check_key(key)
        if negated:  # "!k=v" stops at "!k"; the caller then reports the "=" it finds
            return Requirement(key, "!")
        if self.peek()[0] in ("end", ","):
            return Requirement(key, "exists")
        kind, literal = self.take(values=False)
        operator = {
            "in": "in",
            "notin": "notin",
            "=": "=",
            "==": "==",
            "!=": "!=",
            ">": "gt",
            "<": "lt",
        }.get(kind)
        if operator is None:
            raise _RequirementError(f"found '{literal}', expected: '=', '!=', '==', 'in', notin'")
        values = self.set_values() if operator in ("in", "notin") else self.exact_value()
        return _requirement(key, operator, values)

    def set_values(self) -> list[str]:
        kind, literal = self.take()
        if kind != "(":
            raise _RequirementError(f"found '{literal}' expected: '('")
        kind, literal = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in ("id", ","):
            raise _RequirementError(f"found '{literal}', expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            kind, literal = self.take()
            if kind == "id":
                values.append(literal)
                next_kind, next_literal = self.peek()
                if next_kind == ")":
                    self.take()
                    return values
                if next_kind != ",":
                    raise _RequirementError(f"found '{next_literal}', expected: ',' or ')'")
            elif kind == ",":
                next_kind, _ = self.peek()
                if not values or next_kind in (")", ","):
                    values.append("")  # "(,a)", "(a,)" and "(a,,b)" hold an empty value
                if next_kind == ")":
                    self.take()
                    return values
                if next_kind == ",":
                    self.take()
            else:
                raise _RequirementError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        kind, literal = self.peek()
        if kind in ("end", ","):
            return [""]
        self.take()
        if kind != "id":
            raise _RequirementError(f"found '{literal}', expected: identifier")
        return [literal]


def _check_key(key: str) -> None:
    errors = qualified_name_errors(key)
    if errors:
        raise _RequirementError(f'invalid label key "{key}": ' + "; ".join(errors))


def _requirement(key: str, operator: str, values: list[str]) -> Requirement:
    """A validated requirement; problems raise ``_RequirementError`` with the real wording."""
    _check_key(key)
    if operator in ("in", "notin") and not values:
        raise _RequirementError("for 'in', 'notin' operators, values set can't be empty")
    if operator in ("=", "==", "!=") and len(values) != 1:
        raise _RequirementError("exact-match compatibility requires one single value")
    if operator in ("exists", "!") and values:
        raise _RequirementError("values set must be empty for exists and does not exist")
    if operator in ("gt", "lt"):
        if len(values) != 1:
            raise _RequirementError("for 'Gt', 'Lt' operators, exactly one value is required")
        try:
            int(values[0])
        except ValueError:
            raise _RequirementError(
                "for 'Gt', 'Lt' operators, the value must be an integer"
            ) from None
    for value in values:
        errors = label_value_errors(value)
        if errors:
            raise _RequirementError(
                f'invalid label value: "{value}": at key: "{key}": ' + "; ".join(errors)
            )
    return Requirement(key, operator, tuple(sorted(set(values))))


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a ``labelSelector`` query parameter; ``None`` or blank selects everything."""
    if not text:
        return EVERYTHING
    return _LabelParser(text).parse()


_EXPRESSION_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def selector_from_label_selector_object(obj: Mapping[str, Any] | None) -> LabelSelector:
    """The selector a ``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``) means.

    An empty object selects everything (as ``LabelSelectorAsSelector`` does).
    """
    if not obj:
        return EVERYTHING
    requirements: list[Requirement] = []
    try:
        for key, value in (obj.get("matchLabels") or {}).items():
            requirements.append(_requirement(key, "=", [value]))
        for expression in obj.get("matchExpressions") or []:
            name = expression.get("operator", "")
            operator = _EXPRESSION_OPERATORS.get(name)
            if operator is None:
                raise _RequirementError(f'"{name}" is not a valid pod selector operator')
            values = list(expression.get("values") or [])
            requirements.append(_requirement(expression.get("key", ""), operator, values))
    except _RequirementError as exc:
        raise _bad_request(str(exc)) from None
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


# ---------------------------------------------------------------------------------------------
# Field selectors


def _path(*keys: str) -> Callable[[Mapping[str, Any]], str]:
    def read(obj: Mapping[str, Any]) -> str:
        current: Any = obj
        for key in keys:
            if not isinstance(current, Mapping):
                return ""
            current = current.get(key)
        if current is None:
            return ""
        if isinstance(current, bool):
            return "true" if current else "false"
        return str(current)

    return read


def _first_pod_ip(obj: Mapping[str, Any]) -> str:
    status = obj.get("status") or {}
    if status.get("podIP"):
        return str(status["podIP"])
    ips = status.get("podIPs") or []
    return str(ips[0].get("ip", "")) if ips else ""


def _job_succeeded(obj: Mapping[str, Any]) -> str:
    return str(int((obj.get("status") or {}).get("succeeded") or 0))


_METADATA_FIELDS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}

# Kinds with a field-label conversion of their own; the rest only allow the two metadata fields.
_KIND_FIELDS: dict[str, dict[str, Callable[[Mapping[str, Any]], str]]] = {
    "Pod": {
        **_METADATA_FIELDS,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.host": _path("spec", "nodeName"),  # old clients' name for spec.nodeName
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda obj: (
            "true" if (obj.get("spec") or {}).get("hostNetwork") else "false"
        ),
        "status.phase": _path("status", "phase"),
        "status.podIP": _first_pod_ip,
        "status.podIPs": _first_pod_ip,
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "Event": {
        **_METADATA_FIELDS,
        **{
            f"involvedObject.{name}": _path("involvedObject", name)
            for name in (
                "kind",
                "namespace",
                "name",
                "uid",
                "apiVersion",
                "resourceVersion",
                "fieldPath",
            )
        },
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    # A real server lets namespaces be selected by name and phase only (not metadata.namespace).
    "Namespace": {
        "metadata.name": _path("metadata", "name"),
        "status.phase": _path("status", "phase"),
    },
    "Secret": {**_METADATA_FIELDS, "type": _path("type")},
    "Job": {**_METADATA_FIELDS, "status.successful": _job_succeeded},
}


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    negated: bool
    read: Callable[[Mapping[str, Any]], str]

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (self.read(obj) == self.value) != self.negated


@dataclass(frozen=True)
class FieldSelector:
    """All terms must match; no terms matches every object."""

    terms: tuple[FieldTerm, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(term.matches(obj) for term in self.terms)

    @property
    def empty(self) -> bool:
        return not self.terms


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _split_term(term: str) -> tuple[str, str, str] | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
        i += 1
    return None


def _unescape(value: str) -> str:
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise _bad_request(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise _bad_request(f"invalid field selector: unescaped character in value: {ch}")
        else:
            out.append(ch)
    if escaped:
        raise _bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _field_reader(field: str, kind: str) -> Callable[[Mapping[str, Any]], str]:
    fields = _KIND_FIELDS.get(kind)
    if fields is None:
        if field in _METADATA_FIELDS:
            return _METADATA_FIELDS[field]
        raise _bad_request(
            f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )
    if field not in fields:
        raise _bad_request(f"field label not supported: {field}")
    return fields[field]


def parse_field_selector(text: str | None, kind: str) -> FieldSelector:
    """Parse a ``fieldSelector`` for objects of ``kind``; ``None`` or blank selects everything."""
    if not text:
        return FieldSelector()
    parsed: list[tuple[str, str, bool]] = []
    for part in sorted(_split_unescaped(text, ",")):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise _bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, raw_value = split
        parsed.append((field, _unescape(raw_value), op == "!="))
    # The server parses the whole selector first, then maps each field for the kind.
    terms = [
        FieldTerm(field, value, negated, _field_reader(field, kind))
        for field, value, negated in parsed
    ]
    return FieldSelector(tuple(terms))
