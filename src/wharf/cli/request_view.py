"""What ``wharf request`` prints: the table rows of requests (:func:`request_row`), shared with
``wharf pool`` and ``wharf policy`` (:class:`Row`, :class:`QueueRow`, :func:`requester_of`),
one request in full (:func:`show_request`) and an explanation (:func:`echo_explanation`).

Invariant: pure rendering of the records it is given (``requests.py`` reads them); pools are
shown by name, from the names by id the caller passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import click
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import (
        ExplanationInfo,
        QueueEntry,
        ResourceRequestInfo,
    )

REASON_WIDTH = 60
DEMANDS_WIDTH = 40
"""Table cells longer than these are cut with ``…``; ``request show`` and JSON keep them whole."""
REQUEST_COLUMNS = ("id", "status", "requester", "pool", "demands", "created_at", "reason")


class Row(BaseModel):
    """A table row with whatever columns a command shows."""

    model_config = ConfigDict(extra="allow")


def _demands(info: ResourceRequestInfo) -> str:
    """As ``runs show`` writes them (``2 CPU, 1 GiB memory, 1 GPU (h100)``)."""
    from wharf.cli.run_view import demand_amount

    return ", ".join(
        demand_amount(d.quantity, d.unit, d.resource, d.kind, d.class_name) for d in info.demands
    )


def requester(info: ResourceRequestInfo) -> str:
    """Who asked: the RM principal, and the workspace user a server asked for (``alice (via
    wharf-server)``) when they differ."""
    return requester_of(info.requester, info.metadata)


def requester_of(principal: str, metadata: Mapping[str, str]) -> str:
    """:func:`requester` of a request made by ``principal`` with ``metadata`` (also a pool
    allocation's)."""
    user = metadata.get("user")
    return principal if not user or user == principal else f"{user} (via {principal})"


def _short(text: str | None, width: int = REASON_WIDTH) -> str | None:
    return text if text is None or len(text) <= width else text[: width - 1] + "…"


def request_row(info: ResourceRequestInfo, pools: dict[UUID, str]) -> Row:
    """``pools``: pool names by id (allocations name pools by id)."""
    held = sorted({pools.get(a.pool_id, str(a.pool_id)) for a in info.allocations})
    return Row(
        id=str(info.id),
        status=info.status.value,
        requester=requester(info),
        pool=", ".join(held) or info.pool,
        demands=_short(_demands(info), DEMANDS_WIDTH),
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
            requester=requester(info),
            demands=_short(_demands(info), DEMANDS_WIDTH),
            created_at=info.created_at,
            reason=entry.reason,
        )


def show_request(info: ResourceRequestInfo, pools: dict[UUID, str], output: str) -> None:
    """``request show`` as text: one field a line, then the allocations as a table.
    ``pools``: pool and policy names by id."""
    from wharf.cli.output import emit

    row = request_row(info, pools)
    fields: dict[str, Any] = dict(row.model_extra or {})
    fields.update(
        demands=_demands(info),
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
                    "policy": pools.get(a.policy_id, str(a.policy_id)),
                }
            )
            for a in info.allocations
        ]
        emit(rows, ("pool", "class", "resource", "quantity", "policy"), output)


def echo_explanation(found: ExplanationInfo) -> None:
    """``request explain`` as text: the outcome, then the queue positions, the blocker and the
    requests that would have to end."""
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
