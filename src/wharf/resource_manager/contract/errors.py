"""Errors specific to the Resource Manager's interface, all inside Wharf's error tree.

Everything else the RM raises is one of :mod:`wharf.core.errors` (``EntityNotFoundError``,
``EntityExistsError``, ``IllegalOperationError``, ``InputError``, ``StoreError`` ...), so callers of
any :class:`~wharf.resource_manager.contract.ResourceManagerClient` catch the same types whether
the RM runs in-process or behind HTTP.

    IllegalOperationError (409)
    └── PermissionDeniedError (403): the caller may not do this (someone else's request, or
        an administrative operation without admin rights)
    WharfError
    └── AuthenticationError (401): the RM refused the credentials or the access token (raised
        by the HTTP API's authentication and, for its answer, by the HTTP client)
"""

from __future__ import annotations

from wharf.core.errors import IllegalOperationError, WharfError


class PermissionDeniedError(IllegalOperationError):
    """The caller is not allowed to perform this operation."""


class AuthenticationError(WharfError):
    """The Resource Manager refused the credentials or the access token (HTTP 401)."""
