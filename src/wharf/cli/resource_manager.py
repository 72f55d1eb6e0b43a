"""``wharf resource-manager serve | credential``, and what the ``pool``, ``policy`` and
``request`` commands share: reaching the RM (:func:`open_rm`) and reading what people type
(resource quantities: :mod:`wharf.cli.rm_quantities`).

Invariant: every command makes at most one change, so a refused command changed nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wharf.cli.rm_quantities import Resources

if TYPE_CHECKING:
    from pydantic import BaseModel

    from wharf.config.global_config import WharfConfig
    from wharf.resource_manager.contract import ResourceManagerClient

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8238
MIN_ADMIN_KEY_LENGTH = 16
"""As ``ApiSettings.admin_api_key`` requires (kept here so ``--help`` loads no settings)."""
MIN_SECRET_LENGTH = 32
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_MAX_LEASE_SECONDS = 86400
"""``ApiSettings``' defaults, likewise."""


# ----------------------------------------------------------------------------- reaching the RM


RM_OPTIONS = (
    (
        "--rm-url",
        "WHARF_RM_URL",
        "Resource Manager server URL (default: the workspace server "
        "you are logged in to, else the embedded one).",
    ),
    ("--api-key", "WHARF_RM_API_KEY", "API key for the Resource Manager server."),
    ("--username", "WHARF_RM_USERNAME", "Or log in to the Resource Manager with a name..."),
    ("--password", "WHARF_RM_PASSWORD", "...and a password."),
)
"""The connection options: on the group (also read from their variables) and on each command."""


def rm_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Group options (each also from its ``WHARF_RM_*`` variable) saved in ``ctx.obj``."""
    for flag, variable, text in reversed(RM_OPTIONS):
        func = click.option(flag, envvar=variable, help=f"{text} [env: {variable}]")(func)
    return func


def remember_rm(ctx: click.Context, **connection: str | None) -> None:
    ctx.obj = connection


def _remember_one(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None and param.name is not None:
        ctx.ensure_object(dict)[param.name] = value


def rm_command_options(group: click.Group) -> None:
    """Give every command of ``group`` the connection options too (``wharf pool list --rm-url
    …``): given there, they win over the group's (the variables are read by the group)."""
    for command in group.commands.values():
        for flag, variable, text in RM_OPTIONS:
            command.params.append(
                click.Option(
                    [flag],
                    expose_value=False,
                    callback=_remember_one,
                    help=f"{text} [env: {variable}]",
                )
            )


@contextmanager
def open_rm(ctx: click.Context) -> Iterator[ResourceManagerClient]:
    """The client this command talks to; closed afterwards.

    - ``WHARF_RM_URL`` (or ``--rm-url``, on the group or on the command) set: the RM server over
      HTTP, logging in with ``WHARF_RM_API_KEY``, or ``WHARF_RM_USERNAME`` and
      ``WHARF_RM_PASSWORD``;
    - else, when a workspace server is configured (``wharf login`` / ``WHARF_SERVER_URL``): the
      team's RM through that server (:mod:`wharf.cli.workspace_rm`);
    - otherwise: the embedded RM over the embedded SQLite file, opened as the engine opens it:
      as the embedded store's ``default`` user, with the ``local`` pool describing this machine
      made or brought up to date first.
    """
    connection: dict[str, str | None] = ctx.find_object(dict) or {}
    url = connection.get("rm_url")
    client: Any
    workspace = None if url else _workspace_url()
    if url:
        from wharf.core.errors import InputError
        from wharf.core.url_credentials import mask_credentials
        from wharf.resource_manager.client.http import HttpResourceManager

        api_key, username = connection.get("api_key"), connection.get("username")
        if not api_key and not (username and connection.get("password")):
            raise InputError(
                f"The Resource Manager at {mask_credentials(url)} needs a credential: pass "
                "--api-key (or set WHARF_RM_API_KEY), or --username and --password "
                "(WHARF_RM_USERNAME, WHARF_RM_PASSWORD)."
            )
        client = HttpResourceManager(
            url,
            api_key=api_key or None,
            username=None if api_key else username,
            password=None if api_key else connection.get("password"),
        )
    elif workspace is not None:
        from wharf.cli.workspace_rm import WorkspaceResourceManager

        client = WorkspaceResourceManager(*workspace)
    else:
        from wharf.config.flavors import resource_manager_connector
        from wharf.config.global_config import load_config
        from wharf.resource_manager.embedded.connect import connect_embedded
        from wharf.store.defaults import DEFAULT_USER

        # The engine's embedded RM, as the engine opens it: the same account, and the
        # ``local`` pool made on first use, whichever of the two uses it first.
        config = load_config()
        if config.resource_manager != "none":  # refused as a pipeline run refuses it
            resource_manager_connector(config.resource_manager, load=False)
        client = connect_embedded(config.store_url, DEFAULT_USER, config.local_step_slots)
        ctx.meta[EMBEDDED_RM] = True
        _end_lost_runs(config)
    try:
        yield client
    finally:
        client.close()


def _end_lost_runs(config: WharfConfig) -> None:
    """End the embedded workspace's runs whose process is gone (killed, or its machine lost),
    releasing their steps' requests, as a ``wharf runs`` command does first: what the embedded
    RM shows next is then not held by a process that no longer exists. A sweep that fails is
    only logged (the command still runs). Nothing is imported for it when a read-only look at
    the store finds no such run (``lost_run_check``)."""
    from wharf.cli.lost_run_check import may_need_sweep

    if not may_need_sweep(config):
        return
    from wharf.execution.resources.port import releaser
    from wharf.sdk.workspace import Workspace
    from wharf.store.lost_runs import sweep_lost_runs

    try:
        with contextlib.closing(Workspace.open(config)) as workspace:
            sweep_lost_runs(workspace.store, release=releaser(workspace.step_resources))
    except Exception as exc:
        logger.warning("Could not end the runs whose process is gone: %s", exc)


def _workspace_url() -> tuple[str, str | None] | None:
    """The workspace server this machine is logged in to (URL and credential), if any."""
    from wharf.config.global_config import load_config

    config = load_config()
    return (config.server_url, config.api_key) if config.server_url else None


# ----------------------------------------------------------------------------- input


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML (or JSON) file holding one mapping; what is wrong with it in one line."""
    from wharf.yaml_files import load_mapping

    return load_mapping(path)


def entries_by_name(
    items: Any, *, model: str, field: str, names: tuple[str, ...] = ("name",)
) -> dict[str, dict[str, Any]]:
    """A file's list field (a pool's ``classes``, a policy's ``grants``; ``None``: empty) by
    each entry's name (its first key of ``names``). InputError naming the field, as the
    models word it, unless it is a list of mappings with distinct names: a name given twice
    would silently keep only the last entry."""
    from wharf.core.errors import InputError

    if items is None:
        return {}
    if not isinstance(items, list):
        raise InputError(f"Invalid {model}: '{field}' must be a list (got {items!r})")
    found: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(
                f"Invalid {model}: '{field}[{index}]' must be a mapping (KEY: VALUE entries) "
                f"(got {item!r})"
            )
        name = str(next((item[key] for key in names if key in item), None))
        if name in found:
            raise InputError(f"Invalid {model}: '{field}' names '{name}' more than once")
        found[name] = dict(item)
    return found


def split_assignment(text: str, what: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> (KEY, VALUE); InputError naming ``what`` otherwise."""
    from wharf.core.errors import InputError

    key, equals, value = text.partition("=")
    if not equals or not key.strip() or not value.strip():
        raise InputError(f"Expected {what}, got '{text}'.")
    return key.strip(), value.strip()


def resources(client: ResourceManagerClient) -> Resources:
    """The RM's descriptors, asked for only when a name is not a built-in kind."""
    return Resources(client.descriptors.list)


# ----------------------------------------------------------------------------- output


def echo_json(content: BaseModel | Sequence[BaseModel]) -> None:
    if isinstance(content, Sequence):
        data: Any = [item.model_dump(mode="json", by_alias=True) for item in content]
    else:
        data = content.model_dump(mode="json", by_alias=True)
    click.echo(json.dumps(data, indent=2))


# ----------------------------------------------------------------------------- commands


@click.group("resource-manager")
def resource_manager() -> None:
    """Run the Resource Manager server and manage who may log in to it."""


@resource_manager.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to listen on.",
)
@click.option("--db-url", envvar="WHARF_RM_DB_URL", help="RM database (default: embedded file).")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes sharing the port.",
)
@click.option(
    "--credentials",
    "credentials_file",
    envvar="WHARF_RM_CREDENTIALS_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML/JSON file of principals and argon2 hashes (see 'credential').",
)
@click.option(
    "--admin-api-key",
    envvar="WHARF_RM_ADMIN_API_KEY",
    help=f"API key of the administrator 'admin' (at least {MIN_ADMIN_KEY_LENGTH} characters).",
)
@click.option(
    "--bootstrap-pool",
    "bootstrap_pools",
    multiple=True,
    metavar="NAME=RESOURCE[:CLASS]=QTY[,...]",
    help="Make pool NAME with this capacity, and a policy NAME-everyone letting every account "
    "use it, unless they exist (repeatable; e.g. team=cpu=16,memory=64GiB,gpu=2).",
)
@click.option(
    "--secret-key",
    envvar="WHARF_RM_SECRET_KEY",
    help=f"Token signing key (at least {MIN_SECRET_LENGTH} characters).",
)
@click.option(
    "--access-token-ttl",
    type=click.FloatRange(min=1),
    default=3600.0,
    show_default=True,
    help="Seconds an access token stays valid.",
)
@click.option(
    "--sweep-interval",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds between sweeps that expire lapsed leases when nobody calls.",
)
@click.option(
    "--max-body-bytes",
    envvar="WHARF_RM_MAX_BODY_BYTES",
    type=click.IntRange(1024, 1024**3),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Larger request bodies are refused (413) before any of them is read.",
)
@click.option(
    "--max-lease",
    "max_lease_seconds",
    envvar="WHARF_RM_MAX_LEASE_SECONDS",
    type=click.IntRange(1, 10 * 365 * 86400),
    default=DEFAULT_MAX_LEASE_SECONDS,
    show_default=True,
    help="Longest lease (seconds) a request may be created or renewed with.",
)
@click.option(
    "--metrics-public/--metrics-private",
    envvar="WHARF_RM_METRICS_PUBLIC",
    default=False,
    show_default=True,
    help="Serve /metrics without a token (for scrapers on an internal network).",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="Least severe server log lines shown.",
)
def serve(
    host: str,
    port: int,
    db_url: str | None,
    workers: int,
    credentials_file: Path | None,
    admin_api_key: str | None,
    bootstrap_pools: tuple[str, ...],
    secret_key: str | None,
    access_token_ttl: float,
    sweep_interval: float,
    max_body_bytes: int,
    max_lease_seconds: int,
    metrics_public: bool,
    log_level: str,
) -> None:
    """Serve the RM's HTTP API in the foreground until interrupted.

    Without --secret-key a key is kept in <user data dir>/resource_manager/secret_key (replicas
    on other machines must be given the same key). --bootstrap-pool makes what users need to
    run steps at once on a fresh database; a pool or policy that exists is left as it is, so
    restarts and replicas may all pass the same options.
    """
    from wharf.cli.listen import check_address
    from wharf.config.global_config import load_config
    from wharf.core.errors import InputError
    from wharf.resource_manager.api import ApiSettings, load_credentials_file
    from wharf.resource_manager.api.serve import run
    from wharf.resource_manager.domain import load

    config = load_config()
    credentials = load_credentials_file(credentials_file) if credentials_file else ()
    if not credentials and not admin_api_key:
        raise InputError("Nobody could log in: give --credentials or --admin-api-key.")
    if admin_api_key is not None and len(admin_api_key) < MIN_ADMIN_KEY_LENGTH:
        raise InputError(
            f"--admin-api-key must be at least {MIN_ADMIN_KEY_LENGTH} characters long (it has "
            f"{len(admin_api_key)}); make one with: openssl rand -hex 24"
        )
    if secret_key is not None and len(secret_key) < MIN_SECRET_LENGTH:
        raise InputError(
            f"--secret-key must be at least {MIN_SECRET_LENGTH} characters long (it has "
            f"{len(secret_key)}); make one with: openssl rand -hex 32"
        )
    check_address(host, port, in_use_hint=" (another server there?)")
    settings = load(
        ApiSettings,
        {
            "database_url": db_url or config.store_url,
            "secret_key": secret_key or _stored_secret(config.home),
            "access_token_ttl_seconds": access_token_ttl,
            "credentials": credentials,
            "admin_api_key": admin_api_key,
            "sweep_interval_seconds": sweep_interval,
            "max_body_bytes": max_body_bytes,
            "max_lease_seconds": max_lease_seconds,
            "metrics_public": metrics_public,
        },
    )
    # Opened (and migrated) once here first: a database that cannot be opened is one line
    # saying why, not a traceback of each worker's start-up.
    from wharf.resource_manager.service.service import ResourceManagerService

    ResourceManagerService.open(settings.database_url).close()
    if bootstrap_pools:
        from wharf.cli.rm_bootstrap import bootstrap, parse_pool

        wanted = [parse_pool(text) for text in bootstrap_pools]
        for line in bootstrap(settings.database_url, wanted):
            click.echo(line, err=True)
    shown = "[::]" if host == "::" else host
    click.echo(f"Wharf Resource Manager on http://{shown}:{port} ({workers} worker(s)).", err=True)
    run(settings, host=host, port=port, workers=workers, log_level=log_level)


def _stored_secret(home: Path) -> str:
    from wharf.cli.secret_key import stored_secret_key

    return stored_secret_key(home / "resource_manager" / "secret_key", MIN_SECRET_LENGTH)


@resource_manager.command("credential", short_help="Make an entry of the credentials file.")
@click.argument("name")
@click.option("--admin", is_flag=True, help="The principal administers pools and policies.")
@click.option(
    "--asserts-subjects",
    is_flag=True,
    help="The principal may name any subjects, other accounts included: give it to the "
    "workspace server's credential (it makes requests for its users).",
)
@click.option(
    "--password", is_flag=True, help="Prompt for a password instead of making an API key."
)
def credential(name: str, admin: bool, asserts_subjects: bool, password: bool) -> None:
    """Make an API key (or hash a password) for NAME and print its credentials-file entry.

    The key is shown once; only its argon2 hash goes into the file.
    """
    from wharf.resource_manager.api.credentials import hash_secret, new_api_key
    from wharf.resource_manager.api.settings import Credential, credential_entry
    from wharf.resource_manager.domain import load

    role = {"name": name, "admin": admin, "asserts_subjects": asserts_subjects}
    if password:
        secret = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        entry = {**role, "password_hash": hash_secret(secret)}
        click.echo(credential_entry(load(Credential, entry)))
        return
    key = new_api_key(name)
    entry = {**role, "api_key_hash": hash_secret(key)}
    click.echo(credential_entry(load(Credential, entry)))
    click.echo(f"API key (shown once): {key}", err=True)


EMBEDDED_RM = "wharf.embedded_rm"
"""``ctx.meta`` key: the command's Resource Manager is the embedded one (:func:`open_rm`)."""


def refuse_deleting_local(ctx: click.Context, kind: str, name: str) -> None:
    """Refuse deleting the embedded RM's ``local`` pool or its ``local-default`` policy: every
    command and run that opens the embedded RM makes them again at once, so the deletion
    would be said and undone (the QA pass), and an edit of the pool lost with it."""
    from wharf.core.errors import InputError
    from wharf.resource_manager.embedded.local_pool import LOCAL_POLICY, LOCAL_POOL

    if ctx.meta.get(EMBEDDED_RM) and name == {"pool": LOCAL_POOL, "policy": LOCAL_POLICY}[kind]:
        raise InputError(
            f"The {kind} '{name}' describes this machine to the embedded Resource Manager, "
            "which makes it again whenever it opens: change it with "
            f"`wharf {kind} update {name}` instead of deleting it."
        )


def refuse_changes_here(rm: object) -> None:
    """Refuse a change of pools or policies through the workspace server before anything is
    looked up (``workspace_rm.refuse_changes_here``)."""
    from wharf.cli.workspace_rm import refuse_changes_here as refuse

    refuse(rm)
