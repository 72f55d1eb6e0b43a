"""The records ``wharf runs show`` needs, read through :func:`wharf.cli.reads.read`.

:func:`gather` reads the run, all its step runs, its pipeline's name, its snapshot (the step
graph and each step's resource settings), its stack's name (or that the stack was deleted) and,
for cached steps, the name of the run they reused: all on the quick path when it applies (no
SQLAlchemy). Only a run whose steps asked the Resource
Manager for resources also opens a ``Client``: :func:`allocations` reads what each request got.
:func:`run_stacks` names the stacks of a page of runs the same way, for ``wharf runs list``.
A record that has gone (a deleted origin run, an unreachable Resource Manager) leaves its detail
out rather than failing the command.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

from wharf.cli.run_view import RunView, amount, in_pipeline_order
from wharf.core.errors import EntityNotFoundError, WharfError
from wharf.store.models import MAX_PAGE_SIZE

if TYPE_CHECKING:
    from wharf.cli.reads import Reads
    from wharf.resource_manager.contract.models import ResourceRequestInfo
    from wharf.sdk.client import Client
    from wharf.store.models import PipelineRunRecord, StepRunRecord


DELETED_STACK = "(deleted stack)"
"""What ``runs show`` and ``runs list`` name as the stack of a run whose stack was deleted."""


class RunStack(NamedTuple):
    shown: str
    """As ``runs show`` shows it: the stack's name, or :data:`DELETED_STACK`."""
    name: str | None
    """The stack's name; None once the stack is deleted."""


def gather(reads: Reads, run: str) -> RunView:
    record = reads.get_pipeline_run(run)
    steps: list[StepRunRecord] = []
    page = 1
    while True:
        found = reads.list_run_steps(record.id, page=page, size=MAX_PAGE_SIZE)
        steps += found.items
        if len(steps) >= found.total or not found.items:
            break
        page += 1
    pipeline = reads.get_pipeline(record.pipeline_id)
    snapshot = reads.get_snapshot(record.snapshot_id)
    stack_name = None if snapshot.stack_id is None else reads.get_stack_name(snapshot.stack_id)
    return RunView(
        run=record,
        pipeline_name=pipeline.name,
        stack=_stack(snapshot.stack_id, stack_name),
        stack_name=stack_name,
        steps=in_pipeline_order(steps, snapshot.spec),
        spec=snapshot.spec,
        cached_from=_cached_from(reads, steps),
    )


def run_stacks(reads: Reads, runs: Sequence[PipelineRunRecord]) -> dict[UUID, RunStack]:
    """Run id -> the stack the run ran on, as :func:`gather` says it for ``runs show``: one
    read of the runs' snapshots' stack ids, then one per distinct stack (a page of runs shares
    few). A run whose snapshot cannot be read (gone between the reads) is left out."""
    stack_ids = reads.get_snapshot_stack_ids([run.snapshot_id for run in runs])
    names = {i: reads.get_stack_name(i) for i in set(stack_ids.values()) if i is not None}
    stacks: dict[UUID, RunStack] = {}
    for run in runs:
        if run.snapshot_id in stack_ids:
            stack_id = stack_ids[run.snapshot_id]
            name = None if stack_id is None else names[stack_id]
            stacks[run.id] = RunStack(_stack(stack_id, name), name)
    return stacks


def _stack(stack_id: UUID | None, name: str | None) -> str:
    """The name of the stack the run ran on; once that stack is deleted, says so: deleting a
    stack clears its id from its runs' snapshots (``stacks.delete_stack``), so no id is left to
    show unless it went between the reads."""
    if name is not None:
        return name
    return DELETED_STACK if stack_id is None else f"{DELETED_STACK[:-1]} {stack_id.hex[:8]})"


def _cached_from(reads: Reads, steps: list[StepRunRecord]) -> dict[UUID, str]:
    """Cached step run id -> name of the run whose step it reused."""
    run_names: dict[UUID, str] = {}
    origins: dict[UUID, str] = {}
    for step in steps:
        if step.original_step_run_id is None:
            continue
        try:
            original = reads.get_step_run(step.original_step_run_id)
            if original.run_id not in run_names:
                run_names[original.run_id] = reads.get_pipeline_run(original.run_id).name
        except EntityNotFoundError:
            continue
        origins[step.id] = run_names[original.run_id]
    return origins


def allocations(client: Client, steps: list[StepRunRecord]) -> dict[UUID, str]:
    """Step run id -> what its resource request holds or held (e.g. ``1 gpu (h100) in pool
    gpus``), for the steps with a request the Resource Manager still knows."""
    pools: dict[UUID, str] = {}
    got: dict[UUID, str] = {}
    for step in steps:
        if step.resource_request_id is None:
            continue
        try:
            info = client.get_resource_request(step.resource_request_id)
        except WharfError:
            continue
        parts = []
        for a in info.allocations:
            if a.pool_id not in pools:
                pools[a.pool_id] = _pool_name(client, a.pool_id)
            held = amount(a.quantity, a.unit, a.resource, a.class_name)
            parts.append(f"{held} in pool {pools[a.pool_id]}")
        got[step.id] = ", ".join(parts) or _nothing(info)
    return got


def _nothing(info: ResourceRequestInfo) -> str:
    """What a request that holds nothing got: its status, and while it waits, why (the
    Resource Manager's reason, as the pipeline's own output says it)."""
    from wharf.core.enums import ResourceRequestStatus

    reason = (info.status_reason or "").strip().splitlines()
    if info.status is ResourceRequestStatus.PENDING and reason:
        return f"nothing yet (pending: {reason[0]})"
    return f"nothing ({info.status.value})"


def _pool_name(client: Client, pool_id: UUID) -> str:
    """The pool's name: through the workspace server in team mode (the workspace has no RM
    client of its own there), else from the workspace's RM; its id if neither can say."""
    if client.workspace.server_url is not None:
        from wharf.cli.workspace_rm import pool_names
        from wharf.store.rest.store import RestStore

        store = client.store
        if isinstance(store, RestStore):
            return pool_names(store.http).get(pool_id, str(pool_id))
    try:
        return client.resource_manager.pools.get(pool_id).name
    except WharfError:
        return str(pool_id)
