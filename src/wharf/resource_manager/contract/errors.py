"""Errors specific to the Resource Manager's interface, all inside Wharf's error tree.

Owns: :class:`PermissionDeniedError` (403, an ``IllegalOperationError``) and
:class:`AuthenticationError` (401, a ``WharfError``). Invariant: everything else the RM raises
is one of :mod:`wharf.core.errors`, so callers of any
:class:`~wharf.resource_manager.contract.ResourceManagerClient` catch the same types whether
the RM runs in-process or behind HTTP.
"""

from __future__ import annotations

from wharf.core.errors import IllegalOperationError, WharfError


class PermissionDeniedError(IllegalOperationError):
    """The caller is not allowed to perform this operation (HTTP 403): someone else's request,
    or an administrative operation without admin rights."""


class AuthenticationError(WharfError):
    """The Resource Manager refused the credentials or the access token (HTTP 401): raised by
    the HTTP API's authentication and, for its answer, by the HTTP client."""
