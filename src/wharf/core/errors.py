"""Wharf's error hierarchy, rooted at :class:`WharfError`.

Invariants: every adapter (SQL, HTTP, Kubernetes) converts its library's exceptions into these
at its boundary, so callers never catch ``sqlalchemy`` or ``httpx`` errors; the CLI prints
``str(error)`` of any ``WharfError`` as one line. The HTTP status of each (not found 404,
exists and illegal operation 409, input 400) is ``wharf.server.errors``'s table.
"""

from __future__ import annotations


class WharfError(Exception):
    """Base of every error Wharf raises on purpose."""


class EntityNotFoundError(WharfError, KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "Entity not found."


class EntityExistsError(WharfError):
    pass


class IllegalOperationError(WharfError):
    pass


class IllegalTransitionError(IllegalOperationError):
    pass


class RunStoppingError(IllegalOperationError):
    """A step run cannot be created: its run is stopping or stopped (no new step starts)."""


class InputError(WharfError, ValueError):
    pass


class AmbiguousIdError(InputError):
    """A short id prefix matches several ids; the message lists them."""


class StepInterfaceError(InputError):
    """A step's signature, inputs or outputs are invalid."""


class PipelineDefinitionError(InputError):
    """A pipeline cannot be compiled (cycle, unknown step output, ...)."""


class MaterializationError(InputError):
    """An artifact could not be saved or loaded."""


class StoreError(WharfError):
    pass


class CredentialsRefusedError(WharfError):
    """The store (a workspace server) refused the caller's credential: it is no longer valid
    (401: missing, expired or revoked) or no longer allows the call (403). Permanent: the same
    call with the same credential cannot succeed, so it is never retried as an outage is.
    ``status``: the HTTP status; ``detail``: the server's own words."""

    status: int = 401

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = message if detail is None else detail


class PermissionDeniedError(CredentialsRefusedError):
    """The store (a workspace server: 403) refused the request to the caller's credential."""

    status = 403


class StoreUnavailableError(StoreError):
    """The metadata store cannot be reached."""


class SchemaVersionError(StoreError):
    """The database schema is newer (or unknown) compared with this code."""


class StepExecutionError(WharfError):
    """A step failed; the original exception is chained."""


class RunStoppedError(WharfError):
    """Raised inside a step whose run or step was asked to stop."""
