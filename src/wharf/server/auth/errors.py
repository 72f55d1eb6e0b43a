"""The server's authentication and authorization errors (HTTP 401, 403 and 429).

Resources a principal may not see are reported as missing (``EntityNotFoundError``, 404) so that
their existence does not leak; these two are for who-are-you and not-allowed-to-do-that.
"""

from __future__ import annotations

from wharf.core.errors import WharfError


class AuthenticationError(WharfError):
    """No credentials, or invalid, expired or revoked ones (401)."""


class PermissionDeniedError(WharfError):
    """The principal is known but its role does not allow the action (403)."""


class LoginThrottledError(AuthenticationError):
    """Too many failed logins for the account or from the address (429 with ``Retry-After``);
    the credentials were not checked."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
