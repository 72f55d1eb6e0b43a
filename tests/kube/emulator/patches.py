"""PATCH bodies applied to objects: JSON merge patch, strategic merge patch and JSON patch.

``apply_patch(target, patch, content_type, kind)`` returns a new object and never mutates its
arguments. Merge patch follows RFC 7386 (null deletes, objects merge, lists replace). Strategic
merge patch follows kube-apiserver: lists that the Kubernetes types declare with a merge key
(containers, env, volumes, ownerReferences, conditions, …) are merged item by item, keyed by that
field, at the paths ``kind`` gives them (a pod's spec, a job's and a cronjob's pod template);
``finalizers`` merge as a set; ``$patch: replace|delete`` and ``$deleteFromPrimitiveList/…``
directives are honoured, ``$retainKeys`` and ``$setElementOrder/…`` are accepted and dropped.
JSON patch follows RFC 6902. Errors carry the codes a real server answers: 400 for a malformed
patch, 422 for one that does not apply, 415 for another content type.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from tests.kube.emulator.errors import ApiError

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_ACCEPTED = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)


def apply_patch(target: dict[str, Any], patch: Any, content_type: str, kind: str) -> dict[str, Any]:
    """The object ``target`` becomes after ``patch`` (a parsed JSON body) of ``content_type``."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "Invalid JSON Patch")
        return merge_patch(target, patch)
    if media_type == STRATEGIC_MERGE_PATCH:
        if not isinstance(patch, dict):
            raise ApiError(
                400,
                "BadRequest",
                f"json: cannot unmarshal {_json_type(patch)} into Go value of type "
                "map[string]interface {}",
            )
        return strategic_merge_patch(target, patch, kind)
    if media_type == JSON_PATCH:
        return json_patch(target, patch)
    raise ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(_ACCEPTED),
    )


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "object"


# ---------------------------------------------------------------------------------------------
# RFC 7386 JSON merge patch


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result = _merge(target, patch)
    assert isinstance(result, dict)
    return result


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


# ---------------------------------------------------------------------------------------------
# Strategic merge patch: the patch strategies the Kubernetes types declare, by path


@dataclass(frozen=True)
class MergeList:
    """A list merged item by item on ``key``; ``item`` is the schema of its items."""

    key: str
    item: dict[str, Any] = field(default_factory=dict)


class _PrimitiveSet:
    """A list of scalars merged as a set (``patchStrategy: merge`` without a merge key)."""


PRIMITIVE_SET = _PrimitiveSet()

# A schema is a dict: field name -> nested schema dict, MergeList, or PRIMITIVE_SET. Fields not
# named are merged as plain maps (objects) or replaced (lists and scalars).
_METADATA: dict[str, Any] = {"ownerReferences": MergeList("uid"), "finalizers": PRIMITIVE_SET}
_CONTAINER: dict[str, Any] = {
    "env": MergeList("name"),
    "ports": MergeList("containerPort"),
    "volumeMounts": MergeList("mountPath"),
    "volumeDevices": MergeList("devicePath"),
}
_POD_SPEC: dict[str, Any] = {
    "containers": MergeList("name", _CONTAINER),
    "initContainers": MergeList("name", _CONTAINER),
    "ephemeralContainers": MergeList("name", _CONTAINER),
    "volumes": MergeList("name"),
    "imagePullSecrets": MergeList("name"),
    "hostAliases": MergeList("ip"),
    "topologySpreadConstraints": MergeList("topologyKey"),
}
_POD_TEMPLATE: dict[str, Any] = {"metadata": _METADATA, "spec": _POD_SPEC}
_CONDITIONS: dict[str, Any] = {"conditions": MergeList("type")}

SCHEMAS: dict[str, dict[str, Any]] = {
    "Pod": {
        "metadata": _METADATA,
        "spec": _POD_SPEC,
        "status": {**_CONDITIONS, "podIPs": MergeList("ip")},
    },
    "Job": {"metadata": _METADATA, "spec": {"template": _POD_TEMPLATE}, "status": _CONDITIONS},
    "CronJob": {
        "metadata": _METADATA,
        "spec": {"jobTemplate": {"metadata": _METADATA, "spec": {"template": _POD_TEMPLATE}}},
    },
    "Namespace": {"metadata": _METADATA, "status": _CONDITIONS},
    "ServiceAccount": {"metadata": _METADATA, "secrets": MergeList("name")},
}
_DEFAULT_SCHEMA: dict[str, Any] = {"metadata": _METADATA}

_DELETE = object()  # a map patched with "$patch: delete"
_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"


def strategic_merge_patch(
    target: dict[str, Any], patch: dict[str, Any], kind: str
) -> dict[str, Any]:
    result = _merge_map(target, patch, SCHEMAS.get(kind, _DEFAULT_SCHEMA))
    if result is _DELETE:
        raise ApiError(400, "BadRequest", "the patch deletes the whole object")
    assert isinstance(result, dict)
    return result


def _bad_patch(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def _merge_map(original: Any, patch: dict[str, Any], schema: dict[str, Any]) -> Any:
    directive = patch.get(_PATCH)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip(patch)
    if directive is not None:
        raise _bad_patch(f"Unknown patch type: {directive} in map: {_go_map(patch)}")
    result: dict[str, Any] = copy.deepcopy(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM):
            name = key[len(_DELETE_FROM) :]
            if not isinstance(value, list):
                raise _bad_patch("invalid patch format of primitive list")
            if isinstance(result.get(name), list):
                result[name] = [item for item in result[name] if item not in value]
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN_KEYS) or key.startswith((_SET_ORDER, _DELETE_FROM)):
            continue
        child = schema.get(key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value, child if isinstance(child, dict) else {})
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and isinstance(child, MergeList):
            result[key] = _merge_keyed_list(result.get(key), value, child, key)
        elif isinstance(value, list) and child is PRIMITIVE_SET:
            current = result.get(key) if isinstance(result.get(key), list) else []
            result[key] = list(current) + [v for v in value if v not in current]
            result[key] = _unique(result[key])
        else:
            result[key] = _strip(value)
    return result


def _unique(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _merge_keyed_list(original: Any, patch: list[Any], spec: MergeList, name: str) -> list[Any]:
    if any(isinstance(item, dict) and item.get(_PATCH) == "replace" for item in patch):
        return [
            _strip(item)
            for item in patch
            if not (isinstance(item, dict) and item.get(_PATCH) == "replace")
        ]
    result: list[Any] = copy.deepcopy(original) if isinstance(original, list) else []
    for item in patch:
        if not isinstance(item, dict):
            raise _bad_patch(f"unable to merge a list item that is not a map into {name}")
        directive = item.get(_PATCH)
        if spec.key not in item:
            if directive == "delete":
                raise _bad_patch("delete patch type with no merge key defined")
            raise ApiError(
                500,
                "",
                f"map: {_go_map(item)} does not contain declared merge key: {spec.key}",
            )
        key_value = item[spec.key]
        index = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, dict) and existing.get(spec.key) == key_value
            ),
            None,
        )
        if directive == "delete":
            result = [
                existing
                for existing in result
                if not (isinstance(existing, dict) and existing.get(spec.key) == key_value)
            ]
            continue
        merged = _merge_map(result[index] if index is not None else {}, item, spec.item)
        if merged is _DELETE:
            continue
        if index is None:
            result.append(merged)
        else:
            result[index] = merged
    return result


def _strip(value: Any) -> Any:
    """A deep copy of ``value`` without patch directives."""
    if isinstance(value, dict):
        return {
            key: _strip(item)
            for key, item in value.items()
            if key not in (_PATCH, _RETAIN_KEYS) and not key.startswith((_SET_ORDER, _DELETE_FROM))
        }
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


def _go_map(value: dict[str, Any]) -> str:
    """A map printed roughly as Go's ``%v`` prints it (``map[a:1 b:x]``)."""
    return "map[" + " ".join(f"{k}:{value[k]}" for k in sorted(value)) + "]"


# ---------------------------------------------------------------------------------------------
# RFC 6902 JSON patch


class _NotApplicable(Exception):
    """An operation that does not apply to the document (answered with 422)."""


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    if not isinstance(operations, list):
        raise _bad_patch(
            f"json: cannot unmarshal {_json_type(operations)} into Go value of type jsonpatch.Patch"
        )
    if not all(isinstance(op, dict) for op in operations):
        raise _bad_patch("json: cannot unmarshal array into Go value of type jsonpatch.Operation")
    document: Any = copy.deepcopy(target)
    try:
        for operation in operations:
            document = _apply_operation(document, operation)
    except _NotApplicable as exc:
        raise ApiError(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
            {"causes": [{"reason": "UnexpectedServerResponse", "message": str(exc)}]},
        ) from None
    if not isinstance(document, dict):
        raise _bad_patch("the patched document is not an object")
    return document


def _pointer(path: Any, op: str, what: str = "path") -> list[str]:
    if not isinstance(path, str):
        raise _NotApplicable(f"{op} operation does not apply: doc is missing {what}: {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise _NotApplicable(f"{op} operation does not apply: doc is missing {what}: {path}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _is_index(token: str) -> bool:
    return token.isascii() and token.isdigit()


def _index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not _is_index(token) or (len(token) > 1 and token.startswith("0")):
        raise _NotApplicable(f"Unable to access invalid index: {token}: invalid index referenced")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise _NotApplicable(f"Unable to access invalid index: {index}: invalid index referenced")
    return index


def _parent(document: Any, tokens: list[str], op: str, path: str) -> Any:
    current = document
    for token in tokens[:-1]:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list) and _is_index(token) and int(token) < len(current):
            current = current[int(token)]
        else:
            raise _NotApplicable(f'{op} operation does not apply: doc is missing path: "{path}"')
    if not isinstance(current, dict | list):
        raise _NotApplicable(f'{op} operation does not apply: doc is missing path: "{path}"')
    return current


def _get(document: Any, path: str, op: str, what: str = "path") -> Any:
    tokens = _pointer(path, op, what)
    if not tokens:
        return document
    parent = _parent(document, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _NotApplicable(f"{op} operation does not apply: doc is missing {what}: {path}")
        return parent[last]
    try:
        return parent[_index(parent, last, path, allow_end=False)]
    except _NotApplicable:
        raise _NotApplicable(
            f"{op} operation does not apply: doc is missing {what}: {path}"
        ) from None


def _add(document: Any, path: str, value: Any, op: str = "add") -> Any:
    tokens = _pointer(path, op)
    if not tokens:
        return copy.deepcopy(value)
    parent = _parent(document, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    else:
        parent.insert(_index(parent, last, path, allow_end=True), copy.deepcopy(value))
    return document


def _remove(document: Any, path: str, op: str = "remove") -> Any:
    tokens = _pointer(path, op)
    if not tokens:
        raise _NotApplicable(f"{op} operation does not apply: doc is missing path: {path}")
    parent = _parent(document, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _NotApplicable(f"Unable to remove nonexistent key: {last}: missing value")
        del parent[last]
    else:
        del parent[_index(parent, last, path, allow_end=False)]
    return document


def _json_equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) or (
        _numeric(a) and _numeric(b) and float(a) == float(b)
    )


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _apply_operation(document: Any, operation: dict[str, Any]) -> Any:
    op = operation.get("op")
    path = operation.get("path")
    if op == "add":
        return _add(document, path, _value(operation), op)
    if op == "remove":
        return _remove(document, path)
    if op == "replace":
        _get(document, path, op, "key")
        if path == "":
            return copy.deepcopy(_value(operation))
        return _add(_remove(document, path, op), path, _value(operation), op)
    if op in ("move", "copy"):
        source = operation.get("from")
        value = copy.deepcopy(_get(document, source, op, "from path"))
        if op == "move":
            if isinstance(path, str) and isinstance(source, str) and path.startswith(source + "/"):
                raise _NotApplicable(f"{op} operation does not apply: path is a child of from")
            document = _remove(document, source, op)
        return _add(document, path, value, op)
    if op == "test":
        actual = _get(document, path, op)
        if not _json_equal(actual, _value(operation)):
            raise _NotApplicable(f"testing value {path} failed: test failed")
        return document
    raise _NotApplicable(f"Unexpected kind: {op}")


def _value(operation: dict[str, Any]) -> Any:
    """The operation's value; a missing one counts as null, as on a real server."""
    return operation.get("value")
