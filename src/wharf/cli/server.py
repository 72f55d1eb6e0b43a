"""``wharf server serve | up | down | status``: run the workspace server.

``serve`` runs in the foreground (uvicorn); ``up`` runs the same command in the background
(``wharf.server.daemon``) and waits for ``/health``; ``down`` stops it; ``status`` reports it,
also finding a foreground server on the default (or given) port. Options also come from
``WHARF_SERVER_*`` environment variables.

Invariants: ``serve`` starts serving only on a database it could open (else one line says why)
and with an ``--admin-username`` that can log in (it has a password or an external identity,
or one is given or typed at a terminal; else one line says how to give it); a number of seconds
is finite and within its bounds;
``up`` hands secrets (signing key, passwords, the RM token) to the background process
through its environment, never its command line, which other users of the machine can read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

if TYPE_CHECKING:
    from wharf.store.account_ports import CredentialRepository
    from wharf.store.ports import UserRepository

DEFAULT_PORT = 8237
RM_CHECK_TIMEOUT_SECONDS = 5.0
MAX_ACCESS_TOKEN_TTL_SECONDS = 30 * 86400  # ServerSettings.access_token_ttl_seconds' bound


class Seconds(click.FloatRange):
    """A finite number of seconds within ``min``..``max``; anything else (a word, ``nan``, which
    click's FloatRange lets through since every comparison with it is false, ``inf``, a number
    out of bounds) fails with one message naming the option and its bounds."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        low = -math.inf if self.min is None else self.min
        high = math.inf if self.max is None else self.max
        if not (math.isfinite(number) and low <= number <= high):
            bounds = f", at least {low:.0f}" if self.max is None else f" between {low:.0f}"
            bounds += "" if self.max is None else f" and {high:.0f}"
            self.fail(f"must be a finite number of seconds{bounds}, not {value!r}", param, ctx)
        return number


def _server_options(func: Any) -> Any:
    options = [
        click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind."),
        click.option(
            "--port",
            type=click.IntRange(1, 65535),
            default=DEFAULT_PORT,
            show_default=True,
            help="Port to listen on.",
        ),
        click.option(
            "--db-url",
            envvar="WHARF_SERVER_DB_URL",
            help="Store URL (default: the embedded store).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(1, 64),
            default=1,
            show_default=True,
            help="Server processes sharing the port.",
        ),
        click.option(
            "--secret-key",
            envvar="WHARF_SERVER_SECRET_KEY",
            help="Token signing key (at least 32 characters; default: one kept in <user data "
            "dir>/server/secret_key; replicas on other machines must be given the same key).",
        ),
        click.option(
            "--admin-username",
            envvar="WHARF_SERVER_ADMIN_USERNAME",
            help="Admin to create at start-up.",
        ),
        click.option(
            "--admin-password", envvar="WHARF_SERVER_ADMIN_PASSWORD", help="Its initial password."
        ),
        click.option(
            "--introspection-url",
            envvar="WHARF_SERVER_INTROSPECTION_URL",
            help="External identity provider's token introspection URL.",
        ),
        click.option(
            "--artifact-root",
            envvar="WHARF_SERVER_ARTIFACT_ROOT",
            type=click.Path(file_okay=False, path_type=str),
            help="Directory of the default stack's artifact store, reached under this path by "
            "every client and step (a shared file system); default: the default stack has no "
            "artifact store and members register one.",
        ),
        click.option(
            "--resource-manager-url",
            envvar="WHARF_SERVER_RESOURCE_MANAGER_URL",
            help="Resource Manager service URL (default: no resource requests).",
        ),
        click.option(
            "--resource-manager-token",
            envvar="WHARF_SERVER_RESOURCE_MANAGER_TOKEN",
            help="API key the server uses with the Resource Manager.",
        ),
        click.option(
            "--access-token-ttl",
            type=Seconds(min=1, max=MAX_ACCESS_TOKEN_TTL_SECONDS),
            default=3600.0,
            show_default=True,
            help="Seconds an access token stays valid.",
        ),
        click.option(
            "--log-level",
            type=click.Choice(["critical", "error", "warning", "info", "debug"]),
            default="info",
            show_default=True,
            help="Least severe server log lines shown.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _home() -> Path:
    from wharf.config.global_config import load_config

    return load_config().home


def _store_url() -> str:
    from wharf.config.global_config import load_config

    return load_config().store_url


def _secret(home: Path, given: str | None) -> str:
    """The token signing key: ``given``, else the one in ``<user data dir>/server/secret_key``,
    created there (0600) on first use; replicas on other machines must be given the same key."""
    if given:
        from wharf.server.settings import MIN_SECRET_LENGTH

        if len(given) < MIN_SECRET_LENGTH:
            raise click.BadParameter(
                f"needs {MIN_SECRET_LENGTH}+ characters (it has {len(given)}).",
                param_hint="'--secret-key'",
            )
        return given
    from wharf.cli.secret_key import stored_secret_key
    from wharf.server.settings import MIN_SECRET_LENGTH

    return stored_secret_key(home / "server" / "secret_key", MIN_SECRET_LENGTH)


def _absolute(path: str | None) -> str | None:
    """The directory as an absolute path (a relative one is taken from where the server starts).

    With ``--artifact-root`` the shared ``default`` stack stores artifacts in that directory (one
    every client and step reaches under that path); without, it has no artifact store until
    members register one (``wharf.server.default_stack``).
    """
    return None if not path else str(Path(path).expanduser().absolute())


def _check_admin(username: str | None, password: str | None) -> None:
    """The bootstrap admin's password goes with a username and follows the password rule of
    every other user (else it was ignored, or set however short)."""
    from wharf.server.auth.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH

    if password is None:
        return
    if not username:
        raise click.UsageError("--admin-password needs --admin-username (the admin it is for).")
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise click.BadParameter(
            f"needs {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters.",
            param_hint="'--admin-password'",
        )


def _admin_password(
    db_url: str, username: str | None, password: str | None, external: str | None
) -> str | None:
    """The bootstrap admin's password: ``password`` if given; else None when none is needed
    (no admin, or one that can log in already: it has a password or an external identity, or
    an identity provider may link it); else the one typed at a terminal; else InputError saying
    how to give it (the server would start with an admin no one can log in as)."""
    if not username or password is not None or external:
        return password
    from wharf.store.sql.server_stores import open_server_stores

    stores = open_server_stores(db_url)
    try:
        if _can_log_in(stores.store.users, stores.accounts.credentials, username):
            return None
    finally:
        stores.close()
    import sys

    if not sys.stdin.isatty():
        from wharf.core.errors import InputError

        raise InputError(
            f"Admin '{username}' has no password: give it in WHARF_SERVER_ADMIN_PASSWORD (or "
            "--admin-password), or start the server at a terminal to be asked for it."
        )
    typed: str = click.prompt(
        f"Password of admin '{username}'", hide_input=True, confirmation_prompt=True
    )
    _check_admin(username, typed)
    return typed


def _can_log_in(users: UserRepository, credentials: CredentialRepository, username: str) -> bool:
    """Whether user ``username`` exists and has a password or an external identity."""
    from wharf.core.errors import EntityNotFoundError

    try:
        credential = credentials.get(users.get_by_name(username).id)
    except EntityNotFoundError:
        return False
    return credential.password_hash is not None or credential.external_id is not None


def _check_resource_manager(url: str | None, token: str | None) -> None:
    """The RM URL and token come together: with both, the server requests resources for the
    steps that ask for them; without, such steps fail."""
    from wharf.core.errors import InputError

    if url and not token:
        raise InputError(
            "--resource-manager-url needs --resource-manager-token (an API key of the Resource "
            "Manager; or WHARF_SERVER_RESOURCE_MANAGER_TOKEN)."
        )
    if token and not url:
        raise InputError("--resource-manager-token is given without --resource-manager-url.")


def _check_rm_token(url: str, token: str) -> None:
    """Refuse to start with a token the Resource Manager rejects; an RM that cannot be reached
    yet (it may be starting too) is only a warning: the server connects when it needs it."""
    from wharf.core.errors import InputError, StoreUnavailableError, WharfError
    from wharf.core.url_credentials import mask_credentials
    from wharf.resource_manager.client.http import HttpResourceManager
    from wharf.resource_manager.client.http_transport import RetryPolicy
    from wharf.resource_manager.contract import AuthenticationError

    client = HttpResourceManager(
        url, api_key=token, timeout=RM_CHECK_TIMEOUT_SECONDS, retry=RetryPolicy(attempts=1)
    )
    try:
        client.descriptors.list()
    except AuthenticationError as error:
        raise InputError(
            f"The Resource Manager at {mask_credentials(url)} rejected "
            f"--resource-manager-token ({error}); give an API key it accepts (its "
            "--admin-api-key, or one from 'wharf resource-manager credential')."
        ) from None
    except StoreUnavailableError as error:
        click.echo(f"Warning: cannot check the Resource Manager token yet: {error}", err=True)
    except WharfError as error:
        click.echo(f"Warning: cannot check the Resource Manager token: {error}", err=True)
    finally:
        client.close()


def _check_address(host: str, port: int) -> None:
    from wharf.cli.listen import check_address

    hint = f" (a server there? 'wharf server status --host {host} --port {port}')"
    check_address(host, port, in_use_hint=hint)


def _url(host: str, port: int) -> str:
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


@click.group()
def server() -> None:
    """Run the workspace server (the store over REST, with users and RBAC)."""


@server.command("serve")
@_server_options
def serve(
    host: str,
    port: int,
    db_url: str | None,
    workers: int,
    secret_key: str | None,
    admin_username: str | None,
    admin_password: str | None,
    introspection_url: str | None,
    artifact_root: str | None,
    resource_manager_url: str | None,
    resource_manager_token: str | None,
    access_token_ttl: float,
    log_level: str,
) -> None:
    """Serve in the foreground until interrupted."""
    from wharf.config.global_config import load_config
    from wharf.server.serve import run
    from wharf.server.settings import ServerSettings
    from wharf.store.sql.server_stores import open_server_stores

    _check_admin(admin_username, admin_password)
    _check_resource_manager(resource_manager_url, resource_manager_token)
    _check_address(host, port)
    if resource_manager_url and resource_manager_token:
        _check_rm_token(resource_manager_url, resource_manager_token)
    config = load_config()
    database_url = db_url or config.store_url
    admin_password = _admin_password(
        database_url, admin_username, admin_password, introspection_url
    )
    settings = ServerSettings(
        database_url=database_url,
        secret_key=_secret(config.home, secret_key),
        admin_username=admin_username,
        admin_password=admin_password,
        introspection_url=introspection_url,
        artifact_root=_absolute(artifact_root),
        access_token_ttl_seconds=access_token_ttl,
        resource_manager_url=resource_manager_url or None,
        resource_manager_token=resource_manager_token or None,
    )
    # Opened (and migrated) once here first: a database that cannot be opened is one line
    # saying why, not a traceback of each worker's start-up.
    open_server_stores(settings.database_url).close()
    click.echo(f"Wharf server on {_url(host, port)} ({workers} worker(s)).", err=True)
    run(settings, host=host, port=port, workers=workers, log_level=log_level)


@server.command("up")
@_server_options
@click.option(
    "--timeout",
    type=Seconds(min=1),
    default=60.0,
    show_default=True,
    help="Seconds to wait for the server to answer before giving up.",
)
def up(
    host: str,
    port: int,
    db_url: str | None,
    workers: int,
    secret_key: str | None,
    admin_username: str | None,
    admin_password: str | None,
    introspection_url: str | None,
    artifact_root: str | None,
    resource_manager_url: str | None,
    resource_manager_token: str | None,
    access_token_ttl: float,
    log_level: str,
    timeout: float,
) -> None:
    """Start the server in the background; return once it answers."""
    from wharf.server import daemon

    _check_admin(admin_username, admin_password)
    _check_resource_manager(resource_manager_url, resource_manager_token)
    home = _home()
    admin_password = _admin_password(
        db_url or _store_url(), admin_username, admin_password, introspection_url
    )
    args = ["--host", host, "--port", str(port), "--workers", str(workers)]
    args += ["--access-token-ttl", str(access_token_ttl), "--log-level", log_level]
    if artifact_root:
        args += ["--artifact-root", str(_absolute(artifact_root))]
    env = {"WHARF_SERVER_SECRET_KEY": _secret(home, secret_key)}
    for name, value in (
        ("WHARF_SERVER_DB_URL", db_url),
        ("WHARF_SERVER_ADMIN_USERNAME", admin_username),
        ("WHARF_SERVER_ADMIN_PASSWORD", admin_password),
        ("WHARF_SERVER_INTROSPECTION_URL", introspection_url),
        ("WHARF_SERVER_RESOURCE_MANAGER_URL", resource_manager_url),
        ("WHARF_SERVER_RESOURCE_MANAGER_TOKEN", resource_manager_token),
    ):
        if value:
            env[name] = value
    url = _url(host, port)
    info = daemon.start(home, args, url, env=env, timeout=timeout)
    click.echo(f"Wharf server running at {info.url} (pid {info.pid}); log: {info.log_file}")


@server.command("down")
def down() -> None:
    """Stop the background server."""
    from wharf.server import daemon

    info = daemon.stop(_home())
    if info is None:
        click.echo("No Wharf server is running.")
    else:
        click.echo(f"Stopped the Wharf server at {info.url} (pid {info.pid}).")


@server.command("status", short_help="Say whether a server runs and answers.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Where to look for a server.")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to look on when no background server ('up') is recorded.",
)
def status(host: str, port: int) -> None:
    """Say whether a server runs and answers: the background one ('up'), else one on --host and
    --port (started in the foreground with 'serve'). Exit code 0 when it answers, 1 when the
    background server's process is recorded but does not answer, 3 when none runs (as a
    service's status command does), so scripts can wait on it. With neither a background
    server nor --host/--port, the server you are logged in to (or WHARF_SERVER_URL), if any."""
    from wharf.config.global_config import load_config
    from wharf.server import daemon

    config = load_config()
    info = daemon.read_info(config.home)
    context = click.get_current_context()
    named = any(
        context.get_parameter_source(option) is not ParameterSource.DEFAULT
        for option in ("host", "port")
    )
    if info is None and not named and config.server_url:
        from wharf.core.url_credentials import mask_credentials

        shown = mask_credentials(config.server_url)
        if not daemon.healthy(config.server_url.rstrip("/")):
            click.echo(f"The Wharf server you are logged in to, at {shown}, does not answer.")
            raise SystemExit(1)
        click.echo(f"The Wharf server you are logged in to, at {shown}: healthy.")
        return
    if info is None:
        url = _url(host, port)
        if not daemon.healthy(url):
            click.echo(f"No Wharf server is running at {url}.")
            raise SystemExit(3)
        click.echo(
            f"Wharf server at {url}: healthy (started with 'wharf server serve'; stop it "
            "where it runs)."
        )
        return
    healthy = daemon.healthy(info.url)
    state = "healthy" if healthy else "not answering"
    click.echo(f"Wharf server at {info.url} (pid {info.pid}): {state}; log: {info.log_file}")
    if not healthy:
        raise SystemExit(1)
