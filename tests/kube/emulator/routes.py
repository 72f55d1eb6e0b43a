"""Request parsing for the emulator's HTTP layer: which resource a path names, and which verb.

``parse_api_path`` maps a URL path under ``/api/v1`` or ``/apis/<group>/<version>`` onto an
``ApiPath`` (resource type, namespace, name, subresource), or raises a 404 ``ApiError`` as a real
server does for a path it does not serve. ``verb_of`` names the API verb of a request (the verbs
of RBAC and of ``Faults``). ``Query`` reads the query parameters the emulator honours. Pure
functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

from tests.kube.emulator.discovery import SUBRESOURCE_VERBS
from tests.kube.emulator.errors import ApiError, bad_request
from tests.kube.emulator.resources import NAMESPACES, ResourceType, resource_for

# `POST /api/v1/namespaces/{ns}/bindings`: the older way to bind a pod (`create_namespaced_binding`).
BINDINGS = "bindings"
NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class ApiPath:
    """What an API path names. ``rtype`` is None only for the ``bindings`` collection."""

    rtype: ResourceType | None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    @property
    def is_collection(self) -> bool:
        return self.name is None

    @property
    def resource(self) -> str:
        """``pods``, ``pods/status``, ``jobs``… (the resource key ``Faults`` matches on)."""
        plural = self.rtype.plural if self.rtype else BINDINGS
        return f"{plural}/{self.subresource}" if self.subresource else plural


def not_found_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed() -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


def split_group_version(path: str) -> tuple[str, str, list[str]] | None:
    """``/api/v1/x/y`` -> ("", "v1", ["x", "y"]); ``/apis/batch/v1/x`` -> ("batch", "v1", ["x"])."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        return "", parts[1], parts[2:]
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


def parse_api_path(group: str, version: str, rest: list[str]) -> ApiPath:
    """The ``ApiPath`` for the segments after the group/version prefix (404 if none)."""
    if not rest:
        raise not_found_path()
    if rest[0] == NAMESPACES.plural:
        if len(rest) >= 3 and (rest[2] == BINDINGS or resource_for(group, version, rest[2])):
            return _parse_namespaced(group, version, rest[1], rest[2:])
        if (group, version) == (NAMESPACES.group, NAMESPACES.version):
            return _parse_namespace_object(rest[1:])
        raise not_found_path()
    rtype = resource_for(group, version, rest[0])
    if rtype is None or len(rest) > 1:
        # A namespaced resource is only addressed by name under /namespaces/{ns}/.
        raise not_found_path()
    return ApiPath(rtype)


def _parse_namespace_object(rest: list[str]) -> ApiPath:
    if not rest:
        return ApiPath(NAMESPACES)
    if len(rest) == 1:
        return ApiPath(NAMESPACES, name=rest[0])
    if len(rest) == 2 and rest[1] in NAMESPACE_SUBRESOURCES:
        return ApiPath(NAMESPACES, name=rest[0], subresource=rest[1])
    raise not_found_path()


def _parse_namespaced(group: str, version: str, namespace: str, rest: list[str]) -> ApiPath:
    if rest[0] == BINDINGS:
        if len(rest) > 1 or group:
            raise not_found_path()
        return ApiPath(None, namespace=namespace)
    rtype = resource_for(group, version, rest[0])
    if rtype is None or not rtype.namespaced or len(rest) > 3:
        raise not_found_path()
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if subresource is not None and subresource not in rtype.subresources:
        raise not_found_path()
    return ApiPath(rtype, namespace=namespace, name=name, subresource=subresource)


def verb_of(method: str, path: ApiPath, watch: bool) -> str:
    """The API verb: get, list, watch, create, update, patch, delete or deletecollection
    (405 when the resource or subresource does not allow it)."""
    verb = _verb(method, path, watch)
    if path.subresource is not None and verb not in SUBRESOURCE_VERBS[path.subresource]:
        raise method_not_allowed()
    if verb == "deletecollection" and path.rtype == NAMESPACES:
        raise method_not_allowed()
    if path.rtype is None and verb != "create":  # the bindings collection only takes POST
        raise method_not_allowed()
    return verb


def _verb(method: str, path: ApiPath, watch: bool) -> str:
    collection = path.is_collection
    if method == "GET":
        return ("watch" if watch else "list") if collection else "get"
    if method == "POST" and (collection or path.subresource is not None):
        return "create"
    if method in ("PUT", "PATCH") and not collection:
        return "update" if method == "PUT" else "patch"
    if method == "DELETE" and not collection:
        return "delete"
    if method == "DELETE" and path.rtype is not None:
        return "deletecollection"
    raise method_not_allowed()


class Query:
    """The query parameters of one request (first value of each)."""

    def __init__(self, raw: str) -> None:
        self._values = parse_qs(raw, keep_blank_values=True)

    def get(self, key: str) -> str | None:
        values = self._values.get(key)
        return values[0] if values else None

    def all(self, key: str) -> list[str]:
        return self._values.get(key, [])

    def flag(self, key: str) -> bool:
        return (self.get(key) or "").lower() in ("true", "1")

    def integer(self, key: str) -> int | None:
        value = self.get(key)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except ValueError:
            raise bad_request(f"invalid value for {key}: {value!r}") from None

    def dry_run(self) -> bool:
        return dry_run_of(self.all("dryRun"))


def dry_run_of(values: list[str]) -> bool:
    """``dryRun=All`` -> True; no value -> False; anything else is a 400 as on a real server."""
    values = [v for v in values if v != ""]
    for value in values:
        if value != "All":
            raise bad_request(f"Invalid dryRun value: {value!r}; only 'All' is supported")
    return bool(values)
