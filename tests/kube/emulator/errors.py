"""API errors shaped like a real kube-apiserver's ``Status`` failures.

``ApiError`` carries the HTTP code, the machine-readable ``reason`` and the human ``message``;
``status()`` renders the exact body a real server sends. The helper constructors below build the
messages a real server uses for the common cases, so callers never spell them by hand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.kube.emulator.resources import ResourceType


class ApiError(Exception):
    """A failed API call: ``code`` (HTTP status), ``reason`` (e.g. "NotFound"), ``message``."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The ``Status`` body a real server returns for this failure."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # an unexpected server error has none (omitted, as on a real server)
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(rtype: ResourceType, name: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    details.update(extra)
    return details


def not_found(rtype: ResourceType, name: str) -> ApiError:
    """404 NotFound, e.g. ``pods "x" not found`` / ``jobs.batch "x" not found``."""
    return ApiError(
        404, "NotFound", f'{rtype.qualified_plural} "{name}" not found', _details(rtype, name)
    )


def already_exists(rtype: ResourceType, name: str) -> ApiError:
    """409 AlreadyExists, e.g. ``pods "x" already exists``."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{rtype.qualified_plural} "{name}" already exists',
        _details(rtype, name),
    )


def conflict(rtype: ResourceType, name: str, why: str) -> ApiError:
    """409 Conflict, e.g. a PUT with a stale resourceVersion."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rtype.qualified_plural} "{name}": {why}',
        _details(rtype, name),
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(rtype: ResourceType, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid with ``details.causes`` (each: reason, message, field)."""
    summary = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    return ApiError(
        422,
        "Invalid",
        f'{rtype.kind} "{name}" is invalid: {summary}',
        {"name": name, "group": rtype.group, "kind": rtype.kind, "causes": causes}
        if rtype.group
        else {"name": name, "kind": rtype.kind, "causes": causes},
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def expired(requested: int, oldest: int) -> ApiError:
    """410 Expired, as a watch or continue from a compacted resourceVersion gets."""
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def namespace_terminating(rtype: ResourceType, name: str, namespace: str) -> ApiError:
    """403 Forbidden for a create in a namespace that is being deleted."""
    message = (
        f'{rtype.qualified_plural} "{name}" is forbidden: unable to create new content in '
        f"namespace {namespace} because it is being terminated"
    )
    cause = {
        "reason": "NamespaceTerminating",
        "message": f"namespace {namespace} is being terminated",
        "field": "metadata.namespace",
    }
    return ApiError(403, "Forbidden", message, _details(rtype, name, causes=[cause]))
