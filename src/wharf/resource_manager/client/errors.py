"""Errors specific to the Resource Manager's interface, all inside Wharf's error tree.

Everything else the RM raises is one of :mod:`wharf.core.errors` (``EntityNotFoundError``,
``EntityExistsError``, ``IllegalOperationError``, ``InputError``, ``StoreError`` ...), so callers of
any :class:`~wharf.resource_manager.client.ResourceManagerClient` catch the same types whether
the RM runs in-process or behind HTTP.

    IllegalOperationError (409)
    └── PermissionDeniedError (403): the caller may not do this (someone else's request, or
        an administrative operation without admin rights)
"""

from __future__ import annotations

from wharf.core.errors import IllegalOperationError


class PermissionDeniedError(IllegalOperationError):
    """The caller is not allowed to perform this operation."""
