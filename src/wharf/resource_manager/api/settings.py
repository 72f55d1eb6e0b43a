"""Settings of the Resource Manager's HTTP API: one documented model, built by the entry point.

Owns: :class:`ApiSettings`, :class:`Credential`, :func:`load_credentials_file`.

Nothing here reads the environment: ``wharf resource-manager serve`` builds the settings from its
options (click maps the ``WHARF_RM_*`` variables onto them) and passes them to
:func:`~wharf.resource_manager.api.app.create_app`. Invariants: credential names are unique;
every hash is an argon2 hash; the token key has at least 32 characters and is shared by every
worker and replica (tokens are verified statelessly).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from wharf.core.errors import InputError
from wharf.core.login_throttle import LoginLimits
from wharf.yaml_files import yaml_problem

MIN_SECRET_LENGTH = 32
MIN_ADMIN_KEY_LENGTH = 16
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_MAX_LEASE_SECONDS = 86400
ARGON2_PREFIX = "$argon2"


class Credential(BaseModel):
    """One principal that may log in: an entry of the credentials file (YAML or JSON) the
    operator lists principals in and the server reads at start-up.

    An entry holds the argon2 hash of the principal's API key and/or password; plain secrets
    are never stored (``wharf resource-manager credential NAME`` makes a key and prints the
    entry). API keys have the form ``wrm.<name>.<secret>``, so the server finds the one entry
    to verify without trying every hash. A bootstrap ``admin_api_key`` (principal ``admin``)
    can be given instead, for a first start or tests. Changing the file needs a restart;
    issued tokens stay valid until they expire.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=255)
    """The principal's name: requests it creates belong to it (``requester``)."""
    admin: bool = False
    """Administrators manage descriptors, pools and policies, may see and change any request
    and may name any subjects in the requests they make."""
    asserts_subjects: bool = False
    """The principal may name any subjects in its requests (other accounts included): the
    workspace server's, which makes requests on behalf of its users. Any other principal's
    requests are made for its own account only; see ``docs/resources.md``."""
    api_key_hash: str | None = None
    """argon2 hash of the whole API key ``wrm.<name>.<secret>``."""
    password_hash: str | None = None
    """argon2 hash of the password for ``username``/``password`` logins."""

    @model_validator(mode="after")
    def _hashes(self) -> Credential:
        hashes = [h for h in (self.api_key_hash, self.password_hash) if h is not None]
        if not hashes:
            raise ValueError(f"credential '{self.name}' needs api_key_hash or password_hash")
        if any(not h.startswith(ARGON2_PREFIX) for h in hashes):
            raise ValueError(f"credential '{self.name}': hashes must be argon2 hashes")
        return self


class ApiSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str
    """SQLAlchemy URL of the RM database (sqlite://, postgresql://, mysql:// / mariadb://). On
    PostgreSQL and MySQL/MariaDB its query may set ``connect_timeout``, ``statement_timeout`` and
    ``socket_timeout`` in seconds (defaults 5, 15 and 20; see ``wharf.sql.timeouts``)."""
    secret_key: SecretStr = Field(min_length=MIN_SECRET_LENGTH)
    """HMAC-SHA256 key that signs access tokens; every worker and replica must share it."""
    access_token_ttl_seconds: float = Field(default=3600.0, gt=0, le=30 * 86400)
    """Lifetime of an access token (default 1 h)."""
    credentials: tuple[Credential, ...] = ()
    admin_api_key: SecretStr | None = Field(default=None, min_length=MIN_ADMIN_KEY_LENGTH)
    """Bootstrap API key of the administrator ``admin`` (compared in constant time)."""
    sweep_interval_seconds: float = Field(default=30.0, gt=0, le=3600)
    """How often each worker expires lapsed leases even when nobody calls (and the least time
    a restart gives live leases to renew)."""
    liveness_interval_seconds: float = Field(default=2.0, gt=0, le=3600)
    """How often each worker records that it serves. A record older than three intervals means
    no worker served (a restart, a database outage): live leases are then extended by that
    time before anything expires, so holders never pay for it."""
    threads: int = Field(default=64, ge=1, le=1024)
    """Threads that run service calls in each worker; concurrent calls are combined into one
    scheduling transaction, so more threads mean bigger batches under load."""
    metrics_cache_seconds: float = Field(default=5.0, ge=0, le=3600)
    """``/metrics`` recomputes its figures from the database at most this often per worker."""
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024, le=1024**3)
    """Larger request bodies get 413 before any of them is read (a bulk renewal of the most
    items allowed takes about a tenth of the default 1 MiB)."""
    max_lease_seconds: int = Field(default=DEFAULT_MAX_LEASE_SECONDS, ge=1, le=10 * 365 * 86400)
    """The longest lease a request may be created or renewed with (default one day), so the
    capacity of a holder that died comes back at most this long after its last renewal; a
    request must have a lease (``lease_seconds``)."""
    login_limits: LoginLimits = LoginLimits()
    """Failed logins allowed per principal name and per client address before 429
    (``wharf.core.login_throttle``; counted per API process)."""
    metrics_public: bool = False
    """Serve ``/metrics`` without a token, for Prometheus scrapers on an internal network (it
    shows pool names, capacities and counts, never a request or a principal). Off by default:
    the API may face the internet, so every route but ``/health`` and login needs a token."""

    @model_validator(mode="after")
    def _unique_names(self) -> ApiSettings:
        names = [c.name for c in self.credentials]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate credential names: {', '.join(duplicates)}")
        return self


def load_credentials_file(path: Path) -> tuple[Credential, ...]:
    """Credentials from a YAML or JSON file: a list of entries, or ``{"credentials": [...]}``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"Cannot read the credentials file {path}: {exc.strerror}.") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"The credentials file {path} is not UTF-8 text (at byte {exc.start + 1})."
        ) from None
    data: Any
    try:
        import yaml

        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(
            f"The credentials file {path} is not valid YAML {yaml_problem(exc, text)}."
        ) from None
    if isinstance(data, dict):
        data = data.get("credentials")
    if not isinstance(data, list):
        raise InputError(f"The credentials file {path} must hold a list of credentials.")
    try:
        return tuple(Credential.model_validate(item) for item in data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(
            f"Invalid credentials file {path}: {where + ': ' if where else ''}{message}"
        ) from None


def credential_entry(credential: Credential) -> str:
    """One credentials-file entry as YAML (JSON is valid YAML)."""
    return "- " + json.dumps(credential.model_dump(exclude_none=True))
