"""The workspace server's settings: one documented model, built by the entry point and passed in.

Nothing here reads the environment: ``wharf server serve`` builds a :class:`ServerSettings` from
its options (click maps the ``WHARF_SERVER_*`` variables onto them).

Invariant: a Resource Manager URL always comes with the token the server logs in with.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from wharf.core.login_throttle import LoginLimits

MIN_SECRET_LENGTH = 32


class ServerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str
    """SQLAlchemy URL of the metadata store (sqlite://, postgresql://, mysql:// / mariadb://). On
    PostgreSQL and MySQL/MariaDB its query may set ``connect_timeout``, ``statement_timeout`` and
    ``socket_timeout`` in seconds (defaults 5, 15 and 20; see ``wharf.sql.timeouts``)."""
    secret_key: SecretStr = Field(min_length=MIN_SECRET_LENGTH)
    """HMAC-SHA256 key that signs access and run tokens; every replica must share it."""
    access_token_ttl_seconds: float = Field(default=3600.0, gt=0, le=30 * 86400)
    """Lifetime of a login's access token (default 1 h)."""
    run_token_ttl_seconds: float = Field(default=7 * 86400.0, gt=0, le=365 * 86400)
    """Lifetime of a run-scoped token (default 7 days)."""
    schedule_token_ttl_seconds: float = Field(default=365 * 86400.0, gt=0, le=10 * 365 * 86400)
    """Lifetime of a schedule-scoped token (default 1 year); deleting the schedule, revoking
    the key or logging out the user that issued it ends it sooner."""
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """Largest request body accepted (413 beyond); step source code travels in bodies."""
    max_url_bytes: int = Field(default=8192, ge=256)
    """Longest request target (path + query) accepted (414 beyond)."""
    max_filter_values: int = Field(default=500, ge=1)
    """Most values one ``oneof:[...]`` filter may hold (422 beyond)."""
    auth_cache_seconds: float = Field(default=5.0, ge=0)
    """How long a worker remembers an authenticated credential (0: never). Revocations made
    through another worker or replica take effect within this time."""
    login_limits: LoginLimits = LoginLimits()
    """Failed password logins allowed per account and per client address before 429
    (``wharf.core.login_throttle``; counted per server process)."""
    api_key_touch_interval_seconds: float = Field(default=60.0, ge=0)
    """``last_used`` of an API key is written at most this often."""
    introspection_url: str | None = None
    """RFC 7662-style token introspection endpoint of an external identity provider; enables
    ``POST /api/v1/auth/external``."""
    introspection_authorization: SecretStr | None = None
    """``Authorization`` header the server sends to the introspection endpoint, if any."""
    introspection_timeout_seconds: float = Field(default=5.0, gt=0)
    admin_username: str | None = None
    """Bootstrap: make sure this user exists, is an admin and (if it has none) gets
    ``admin_password``."""
    admin_password: SecretStr | None = None
    create_defaults: bool = True
    """Create the default user and project at start-up (what the embedded store does on first
    use), so that SDK clients of members never need to create them."""
    artifact_root: str | None = None
    """Absolute path of the ``default`` stack's local artifact store (``--artifact-root``): a
    directory every client and step process reaches under this path (a shared file system).
    None: the ``default`` stack has no artifact store; members register one
    (``wharf.server.default_stack``)."""
    resource_manager_url: str | None = None
    """Base URL of the Resource Manager service that steps asking for resources get their
    requests from. None: the server handles no resource requests (such a step fails when it is
    created, saying so)."""
    resource_manager_token: SecretStr | None = None
    """API key the server logs in to the Resource Manager with; the server owns (creates,
    renews, releases) every request of its steps under this principal."""

    @field_validator("artifact_root")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not PurePosixPath(value).is_absolute():
            raise ValueError(f"artifact_root must be an absolute path, not {value!r}")
        return value

    @model_validator(mode="after")
    def _resource_manager_login(self) -> ServerSettings:
        if self.resource_manager_url is not None and self.resource_manager_token is None:
            raise ValueError("resource_manager_url needs resource_manager_token (an RM API key)")
        if self.resource_manager_url is None and self.resource_manager_token is not None:
            raise ValueError("resource_manager_token is given without resource_manager_url")
        return self
