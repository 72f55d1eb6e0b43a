"""The server's authentication and authorization errors (HTTP 401 and 403).

Resources a principal may not see are reported as missing (``EntityNotFoundError``, 404) so that
their existence does not leak; these two are for who-are-you and not-allowed-to-do-that.
"""

from __future__ import annotations

from wharf.core.errors import WharfError


class AuthenticationError(WharfError):
    """No credentials, or invalid, expired or revoked ones (401)."""


class PermissionDeniedError(WharfError):
    """The principal is known but its role does not allow the action (403)."""
