"""``wharf request list | show ID | release ID | cancel ID | explain ID``.

Lists filter like the API (``--status`` repeatable, ``--pool``, ``--subject``, ``--requester``,
``--metadata KEY=VALUE`` repeatable) and page with ``--page``/``--size``. ``release`` gives an
allocation back (a pending request is cancelled); ``cancel`` withdraws a pending request.
Also the table rows shared with ``wharf pool``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import click
from pydantic import BaseModel, ConfigDict

from wharf.cli.output import OUTPUT_OPTION, paged
from wharf.cli.resource_manager import echo_json, open_rm, remember_rm, rm_options

if TYPE_CHECKING:
    from wharf.resource_manager.client.models import QueueEntry, ResourceRequestInfo

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
REASON_WIDTH = 60
REQUEST_COLUMNS = ("id", "status", "requester", "pool", "demands", "created_at", "reason")


class Row(BaseModel):
    """A table row with whatever columns a command shows."""

    model_config = ConfigDict(extra="allow")


def _demands(info: ResourceRequestInfo) -> str:
    parts = []
    for demand in info.demands:
        what = demand.resource or demand.kind or "selected resource"
        unit = f" {demand.unit}" if demand.unit else ""
        where = f" ({demand.class_name})" if demand.class_name else ""
        parts.append(f"{demand.quantity}{unit} {what}{where}")
    return ", ".join(parts)


def _short(text: str | None) -> str | None:
    return text if text is None or len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 1] + "…"


def request_row(info: ResourceRequestInfo, pools: dict[UUID, str]) -> Row:
    """``pools``: pool names by id (allocations name pools by id)."""
    held = sorted({pools.get(a.pool_id, str(a.pool_id)) for a in info.allocations})
    return Row(
        id=str(info.id),
        status=info.status.value,
        requester=info.requester,
        pool=", ".join(held) or info.pool,
        demands=_demands(info),
        created_at=info.created_at,
        reason=_short(info.status_reason),
    )


class QueueRow(Row):
    @classmethod
    def of(cls, entry: QueueEntry) -> QueueRow:
        info = entry.request
        return cls(
            position=entry.position,
            id=str(info.id),
            requester=info.requester,
            demands=_demands(info),
            created_at=info.created_at,
            reason=entry.reason,
        )


@click.group()
@rm_options
@click.pass_context
def request(ctx: click.Context, /, **connection: str | None) -> None:
    """Inspect, release, cancel and explain resource requests."""
    remember_rm(ctx, **connection)


@request.command("list")
@click.option("--status", "-s", "statuses", multiple=True, type=click.Choice(STATUSES))
@click.option("--pool", help="Pool id or name.")
@click.option("--subject", help="Subject id (a project, run, step, account ...).")
@click.option("--requester", help="Principal that created the request.")
@click.option("--metadata", "-m", multiple=True, metavar="KEY=VALUE")
@click.option("--sort", type=click.Choice(["asc", "desc"]), default="desc", show_default=True)
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
    sort: str,
    output: str,
    page: int,
    size: int,
) -> None:
    """List resource requests, newest first."""
    from wharf.cli.output import emit
    from wharf.cli.resource_manager import split_assignment
    from wharf.resource_manager.client.models import PageRequest, RequestFilter
    from wharf.resource_manager.domain import load

    pairs = [split_assignment(text, "KEY=VALUE for --metadata") for text in metadata]
    query = load(
        RequestFilter,
        {
            "status": statuses or None,
            "pool": pool,
            "subject_id": subject,
            "requester": requester,
            "metadata": dict(pairs),
        },
    )
    paging = load(PageRequest, {"index": page, "size": size, "sort": sort})
    with open_rm(ctx) as rm:
        found = rm.requests.list(query, paging)
        if output == "json":
            echo_json(found.items)
            return
        pools = {p.id: p.name for p in rm.pools.list()}
    rows = [request_row(info, pools) for info in found.items]
    emit(rows, REQUEST_COLUMNS, output, total=found.total)


def _request_id(text: str) -> UUID:
    from wharf.core.errors import InputError

    try:
        return UUID(text)
    except ValueError:
        raise InputError(f"'{text}' is not a resource request id.") from None


@request.command("show")
@click.argument("request_id")
@OUTPUT_OPTION
@click.pass_context
def show(ctx: click.Context, request_id: str, output: str) -> None:
    """Show one request with its allocations."""
    with open_rm(ctx) as rm:
        info = rm.requests.get(_request_id(request_id))
        if output == "json":
            echo_json(info)
            return
        pools = {p.id: p.name for p in rm.pools.list()}
    _show(info, pools, output)


def _show(info: ResourceRequestInfo, pools: dict[UUID, str], output: str) -> None:
    from wharf.cli.output import emit

    row = request_row(info, pools)
    fields: dict[str, Any] = dict(row.model_extra or {})
    fields.update(
        reason=info.status_reason,
        runtime_state=info.runtime_state.value,
        reclaim_tolerance=info.reclaim_tolerance.value,
        lease_expires_at=info.lease_expires_at,
        allocated_at=info.allocated_at,
        metadata=info.metadata,
    )
    for key, value in fields.items():
        shown = value.strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else value
        click.echo(f"{key:<18} {'-' if shown in (None, '', {}) else shown}")
    if info.allocations:
        rows = [
            Row.model_validate(
                {
                    "pool": pools.get(a.pool_id, str(a.pool_id)),
                    "class": a.class_name,
                    "resource": a.resource,
                    "quantity": f"{a.quantity} {a.unit}",
                    "policy": str(a.policy_id),
                }
            )
            for a in info.allocations
        ]
        emit(rows, ("pool", "class", "resource", "quantity", "policy"), output)


@request.command("release")
@click.argument("request_id")
@click.pass_context
def release(ctx: click.Context, request_id: str) -> None:
    """Give the request's allocation back (a pending request is cancelled)."""
    with open_rm(ctx) as rm:
        info = rm.requests.release(_request_id(request_id))
    click.echo(f"Request {info.id}: {info.status.value}.")


@request.command("cancel")
@click.argument("request_id")
@click.pass_context
def cancel(ctx: click.Context, request_id: str) -> None:
    """Withdraw a pending request."""
    with open_rm(ctx) as rm:
        info = rm.requests.cancel(_request_id(request_id))
    click.echo(f"Request {info.id}: {info.status.value}.")


@request.command("explain")
@click.argument("request_id")
@OUTPUT_OPTION
@click.pass_context
def explain(ctx: click.Context, request_id: str, output: str) -> None:
    """Why the request is where it is: its queue position, what blocks it, who would have to
    give capacity back."""
    with open_rm(ctx) as rm:
        found = rm.requests.explain(_request_id(request_id))
    if output == "json":
        echo_json(found)
        return
    click.echo(f"{found.status.value} ({found.outcome}): {found.reason}")
    for position in found.positions:
        click.echo(
            f"  pool '{position.pool_name}': position {position.position} of "
            f"{position.queue_length} — {position.reason}"
        )
    if found.blocker:
        click.echo(f"  blocked by: {found.blocker}")
    if found.would_have_to_end:
        ids = ", ".join(str(i) for i in found.would_have_to_end)
        click.echo(f"  would have to end: {ids}")
