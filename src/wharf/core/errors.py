"""Wharf's error hierarchy.

Every adapter (SQL, HTTP, Kubernetes) converts its library's exceptions into these at its
boundary, so callers never catch ``sqlalchemy`` or ``httpx`` errors. The CLI prints
``str(error)`` of any ``WharfError`` as one line.

    WharfError
    ├── EntityNotFoundError        (HTTP 404)
    ├── EntityExistsError          (HTTP 409)
    ├── IllegalOperationError      (HTTP 409)
    │   ├── IllegalTransitionError
    │   └── RunStoppingError
    ├── InputError                 (HTTP 400/422; also ValueError)
    │   ├── AmbiguousIdError
    │   ├── StepInterfaceError
    │   ├── PipelineDefinitionError
    │   └── MaterializationError
    ├── StoreError
    │   ├── StoreUnavailableError
    │   └── SchemaVersionError
    └── StepExecutionError
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


class StoreUnavailableError(StoreError):
    """The metadata store cannot be reached."""


class SchemaVersionError(StoreError):
    """The database schema is newer (or unknown) compared with this code."""


class StepExecutionError(WharfError):
    """A step failed; the original exception is chained."""


class RunStoppedError(WharfError):
    """Raised inside a step whose run or step was asked to stop."""
