"""``wharf request list | show ID | release ID | cancel ID | explain ID``: the click commands
and how they find the requests (what they print is ``request_view``'s).

The commands go where ``wharf.cli.resource_manager.open_rm`` says; through a workspace server
(:func:`_workspace`) they follow its visibility rules (the requests of the caller's projects).
Pools are shown by name everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from uuid import UUID

import click

from wharf.cli.output import OUTPUT_OPTION, paged
from wharf.cli.resource_manager import (
    echo_json,
    open_rm,
    remember_rm,
    rm_command_options,
    rm_options,
)
from wharf.cli.rm_names import find_request

if TYPE_CHECKING:
    from wharf.execution.resources.team import WorkspaceRequests
    from wharf.resource_manager.contract.models import ResourceRequestInfo
    from wharf.store.rest.store import RestStore

STATUSES = (
    "pending",
    "allocated",
    "preempting",
    "preempted",
    "rejected",
    "cancelled",
    "released",
    "expired",
)


@click.group()
@rm_options
@click.pass_context
def request(ctx: click.Context, /, **connection: str | None) -> None:
    """Inspect, release, cancel and explain resource requests."""
    remember_rm(ctx, **connection)


@contextmanager
def _workspace(ctx: click.Context) -> Iterator[RestStore | None]:
    """The configured workspace server's store (``wharf login`` / ``WHARF_SERVER_URL``), unless
    the command names an RM itself (``--rm-url``, ``WHARF_RM_URL``); else None (the embedded
    RM, as the local administrator)."""
    url = _server_url(ctx)
    if url is None:
        yield None
        return
    from wharf.config.global_config import load_config
    from wharf.store.rest import RestStore

    with RestStore(url, load_config().api_key) as store:
        yield store


def _server_url(ctx: click.Context) -> str | None:
    """The workspace server :func:`_workspace` goes through, or None (the RM directly)."""
    connection: dict[str, str | None] = ctx.find_object(dict) or {}
    if connection.get("rm_url"):
        return None
    from wharf.config.global_config import load_config

    return load_config().server_url or None


def _requests_of(store: RestStore) -> WorkspaceRequests:
    """The workspace server's request routes, over the store's HTTP session."""
    from wharf.execution.resources.team import WorkspaceRequests

    return WorkspaceRequests(store.http)


def _pool_names(store: RestStore, *, policies: bool = False) -> dict[UUID, str]:
    """Pool (and policy) names by id, through the workspace server."""
    from wharf.cli.workspace_rm import pool_names

    return pool_names(store.http, policies=policies)


def _project_id(store: RestStore, project: str) -> UUID:
    from wharf.core.errors import EntityNotFoundError

    try:
        return UUID(project)
    except ValueError:
        pass
    try:
        return store.projects.get_by_name(project).id
    except EntityNotFoundError:  # or not the caller's: the server answers both alike
        raise _project_not_found(project, store) from None


def _project_not_found(project: str, store: Any, *also: str) -> Exception:
    """``--project`` naming none of the projects ``store`` lists to the caller: the close
    names among those (and ``also``)."""
    from wharf.core.errors import EntityNotFoundError, WharfError
    from wharf.core.paging import MAX_PAGE_SIZE, PageRequest
    from wharf.core.suggestions import did_you_mean

    try:
        names = [p.name for p in store.projects.list(PageRequest(size=MAX_PAGE_SIZE)).items]
    except WharfError:  # cannot list them: no hint
        names = []
    hint = did_you_mean(project, [*also, *names]) or "."
    return EntityNotFoundError(f"Project '{project}' not found{hint}")


def _check_local_project(project: str) -> None:
    """``--project`` on the embedded RM names a project of the local store: one it has, or
    the default or selected one (created on first use); else ``EntityNotFoundError``."""
    from wharf.config.global_config import load_config
    from wharf.core.errors import EntityNotFoundError
    from wharf.execution.services import open_store
    from wharf.store.defaults import DEFAULT_PROJECT

    config = load_config()
    if project in (DEFAULT_PROJECT, config.project):
        return
    store = open_store(config)
    try:
        try:
            project_id = UUID(project)
        except ValueError:
            store.projects.get_by_name(project)
        else:
            store.projects.get(project_id)
    except EntityNotFoundError:
        also = (DEFAULT_PROJECT, config.project or DEFAULT_PROJECT)
        raise _project_not_found(project, store, *also) from None
    finally:
        store.close()


def _pool_not_found(pool: str, names: Iterable[str] = ()) -> Exception:
    """The error for ``--pool`` naming none of the pools (``names``: those there are, whose
    close spellings it suggests)."""
    from wharf.core.errors import EntityNotFoundError
    from wharf.core.suggestions import did_you_mean

    return EntityNotFoundError(f"Pool '{pool}' not found{did_you_mean(pool, names) or '.'}")


def _listed_project(store: RestStore, project: str | None) -> UUID | None:
    """The project a list through the workspace is limited to: ``--project``, else the
    selected one (``WHARF_PROJECT``, ``wharf login --project``), as the other project-scoped
    commands; with neither, an admin lists every project's requests and a member of one
    project that project's, and anyone else is told to choose one (``InputError``)."""
    from wharf.config.global_config import load_config
    from wharf.core.errors import InputError
    from wharf.core.url_credentials import mask_credentials
    from wharf.store.rest.session import current_principal

    chosen = project or load_config().project
    if chosen is not None:
        return _project_id(store, chosen)
    me = current_principal(store.http)
    projects = me.get("projects") or {}
    if me.get("is_admin") or len(projects) == 1:
        return None
    server = mask_credentials(store.url)
    if projects:
        raise InputError(
            f"You ({me.get('name')}) belong to several projects on the server at {server}: "
            "choose one with --project, WHARF_PROJECT or `wharf login URL --project NAME`."
        )
    raise InputError(
        f"You ({me.get('name')}) are a member of no project on the server at {server}: "
        "a project's admin adds you with `wharf project add-member NAME`."
    )


def _project_metadata(project: str) -> tuple[str, str]:
    """The metadata entry naming ``project`` (an id or a name) on the requests of its steps."""
    try:
        return "project_id", str(UUID(project))
    except ValueError:
        return "project", project


@request.command("list")
@click.option(
    "--status",
    "-s",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES),
    help="Only requests in this status (repeatable).",
)
@click.option("--pool", help="Only requests allocated from this pool (id or name).")
@click.option(
    "--subject", help="Only requests naming this subject id (a project, run, step, account ...)."
)
@click.option("--requester", help="Only requests this principal created.")
@click.option(
    "--metadata",
    "-m",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only requests with this metadata entry (repeatable; all must match).",
)
@click.option("--project", help="Only requests of this project's steps (name or id).")
@click.option(
    "--sort",
    type=click.Choice(["asc", "desc"]),
    default="desc",
    show_default=True,
    help="Order by creation time: desc (newest first) or asc.",
)
@OUTPUT_OPTION
@paged
@click.pass_context
def list_requests(
    ctx: click.Context,
    statuses: tuple[str, ...],
    pool: str | None,
    subject: str | None,
    requester: str | None,
    metadata: tuple[str, ...],
    project: str | None,
    sort: str,
    output: str,
    page: int,
    size: int,
) -> None:
    """List resource requests, newest first."""
    from wharf.cli.output import emit
    from wharf.cli.resource_manager import split_assignment
    from wharf.core.errors import EntityNotFoundError
    from wharf.core.paging import Page, PageRequest
    from wharf.resource_manager.contract.models import RequestFilter
    from wharf.resource_manager.domain import load

    pairs = dict(split_assignment(text, "KEY=VALUE for --metadata") for text in metadata)
    paging = load(PageRequest, {"index": page, "size": size, "sort": sort})
    filters: dict[str, Any] = {
        "status": statuses or None,
        "pool": pool,
        "subject_id": subject,
        "requester": requester,
        "metadata": pairs,
    }
    found: Page[ResourceRequestInfo]
    pools: dict[UUID, str] = {}
    with _workspace(ctx) as store:
        if store is not None:
            project_id = _listed_project(store, project)
            if pool is not None:  # unless the server cannot say which pools there are
                pools = _pool_names(store)
                if pools and pool not in pools.values() and pool not in map(str, pools):
                    raise _pool_not_found(pool, pools.values())
            query = load(RequestFilter, filters)
            found = _requests_of(store).list(query, paging, project_id=project_id)
            if output != "json" and found.items and not pools:
                pools = _pool_names(store)
        else:
            if project is not None:
                if not (ctx.find_object(dict) or {}).get("rm_url"):  # else: any workspace's
                    _check_local_project(project)
                key, value = _project_metadata(project)
                filters["metadata"] = {**pairs, key: value}
            query = load(RequestFilter, filters)
            with open_rm(ctx) as rm:
                if pool is not None:
                    try:
                        rm.pools.get(pool)
                    except EntityNotFoundError:
                        names = [p.name for p in rm.pools.list()]
                        raise _pool_not_found(pool, names) from None
                found = rm.requests.list(query, paging)
                if output != "json":
                    pools = {p.id: p.name for p in rm.pools.list()}
    if output == "json":
        echo_json(found.items)
        return
    from wharf.cli.request_view import REQUEST_COLUMNS, request_row  # pydantic: not for --help

    rows = [request_row(info, pools) for info in found.items]
    filtered = bool(statuses or pool or subject or requester or metadata or project)
    emit(rows, REQUEST_COLUMNS, output, total=found.total, filtered=filtered, noun="requests")


@request.command("show")
@click.argument("request_id")
@OUTPUT_OPTION
@click.pass_context
def show(ctx: click.Context, request_id: str, output: str) -> None:
    """Show request REQUEST_ID with its allocations."""
    pools: dict[UUID, str] = {}
    with _workspace(ctx) as store:
        if store is not None:
            info = find_request(_requests_of(store), request_id)
            if output != "json":
                pools = _pool_names(store, policies=True)
        else:
            with open_rm(ctx) as rm:
                info = find_request(rm.requests, request_id)
                if output != "json":
                    pools = {p.id: p.name for p in rm.pools.list()}
                    pools.update((p.id, p.name) for p in rm.policies.list())
    if output == "json":
        echo_json(info)
        return
    from wharf.cli.request_view import show_request

    show_request(info, pools, output)


@request.command("release", short_help="Give a request's allocation back.")
@click.argument("request_id")
@click.pass_context
def release(ctx: click.Context, request_id: str) -> None:
    """Give the allocation of request REQUEST_ID back (a pending request is cancelled; one
    that already finished is left as it is: an error, as for cancel)."""
    with _workspace(ctx) as store:
        if store is not None:
            requests = _requests_of(store)
            found = find_request(requests, request_id)
            _refuse_finished(found, "release")
            info = requests.release(found.id)
        else:
            with open_rm(ctx) as rm:
                found = find_request(rm.requests, request_id)
                _refuse_finished(found, "release")
                info = rm.requests.release(found.id, manual=True)  # the reason names the caller
    click.echo(f"Request {info.id}: {info.status.value}.")


def _refuse_finished(info: ResourceRequestInfo, verb: str) -> None:
    """An error naming how ``info`` ended, unless it is still pending or holds capacity (the
    RM answers a finished request unchanged, which read as if this command had ended it)."""
    from wharf.core.enums import ResourceRequestStatus as S
    from wharf.core.errors import IllegalOperationError

    if info.status not in (S.PENDING, S.ALLOCATED, S.PREEMPTING):
        reason = f": {info.status_reason}" if info.status_reason else ""
        raise IllegalOperationError(
            f"Request {info.id} was already finished ({info.status.value}{reason}); nothing "
            f"to {verb}."
        )


@request.command("cancel", short_help="Withdraw a pending request.")
@click.argument("request_id")
@click.pass_context
def cancel(ctx: click.Context, request_id: str) -> None:
    """Withdraw the pending request REQUEST_ID (one that already finished is left as it is:
    an error)."""
    from wharf.core.enums import ResourceRequestStatus as S
    from wharf.core.errors import IllegalOperationError

    live = (S.PENDING, S.ALLOCATED, S.PREEMPTING)  # the RM refuses to cancel the last two
    direct = _server_url(ctx) is None  # else the workspace server names the caller itself
    with open_rm(ctx) as rm:
        info = find_request(rm.requests, request_id)
        if info.status in live:
            if direct:
                info = rm.requests.cancel(info.id, manual=True)  # the reason names the caller
            else:
                info = rm.requests.cancel(info.id)
            finished = info.status is not S.CANCELLED  # it ended another way meanwhile
        else:
            finished = True
    if finished:
        reason = f": {info.status_reason}" if info.status_reason else ""
        raise IllegalOperationError(
            f"Request {info.id} was already finished ({info.status.value}{reason}); nothing "
            "to cancel."
        )
    click.echo(f"Request {info.id}: {info.status.value}.")


@request.command("explain", short_help="Say why a request is where it is.")
@click.argument("request_id")
@OUTPUT_OPTION
@click.pass_context
def explain(ctx: click.Context, request_id: str, output: str) -> None:
    """Why request REQUEST_ID is where it is: its queue position, what blocks it, who would
    have to give capacity back."""
    with open_rm(ctx) as rm:
        found = rm.requests.explain(find_request(rm.requests, request_id).id)
    if output == "json":
        echo_json(found)
        return
    from wharf.cli.request_view import echo_explanation

    echo_explanation(found)


rm_command_options(request)
