"""``wharf schedule list | show | pause | resume | delete``: the project's recorded schedules,
by name (unique per project) or id. Deleting a schedule keeps the runs it started.

On an orchestrator that fires schedules itself (``BaseOrchestrator.schedules_runs``, e.g. a
Kubernetes CronJob), pause, resume and delete also change the schedule there
(:func:`_orchestrator_of`). Invariant: when the platform refuses or cannot be reached, the
schedule is left as it was: pause and resume put the store's record back, and delete pauses
the record first (so an account the server refuses never reaches the platform), then changes
the platform, and deletes the record only once that worked (else resumes it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from wharf.cli.confirm import YES_OPTION, confirm
from wharf.cli.output import OUTPUT_OPTION, emit, emit_one, paged

if TYPE_CHECKING:
    from wharf.orchestrators.base import BaseOrchestrator
    from wharf.sdk.client import Client
    from wharf.store.models import ScheduleRecord, SnapshotRecord

SCHEDULE_COLUMNS = ("name", "trigger", "active", "start_time", "end_time", "created", "id")


@click.group()
def schedule() -> None:
    """List, show, pause, resume and delete pipeline schedules."""


def _trigger(record: ScheduleRecord) -> str:
    if record.cron_expression is not None:
        return f"cron {record.cron_expression}"
    if record.interval_seconds is not None:
        return f"every {record.interval_seconds} s"
    when = record.run_once_start_time
    return "once" if when is None else f"once at {when:%Y-%m-%d %H:%M:%S}"


@schedule.command("list")
@click.option("--pipeline", help="Only schedules of this pipeline (name or id).")
@paged
@OUTPUT_OPTION
def list_schedules(pipeline: str | None, page: int, size: int, output: str) -> None:
    """List the project's schedules, newest first."""
    from wharf.sdk.client import Client

    with Client() as client:
        result = client.list_schedules(pipeline=pipeline, page=page, size=size)
    emit(
        result.items,
        SCHEDULE_COLUMNS,
        output,
        title="Schedules",
        total=result.total,
        derived={"trigger": _trigger},
        filtered=pipeline is not None,
        hint="running a pipeline declared with @pipeline(schedule=Schedule(...)) records one.",
    )


@schedule.command("show")
@click.argument("name_or_id")
@OUTPUT_OPTION
def show_schedule(name_or_id: str, output: str) -> None:
    """Show schedule NAME_OR_ID."""
    from wharf.sdk.client import Client

    with Client() as client:
        emit_one(client.get_schedule(name_or_id), output)


@schedule.command("pause")
@click.argument("name_or_id")
def pause_schedule(name_or_id: str) -> None:
    """Pause schedule NAME_OR_ID: it starts no runs until resumed."""
    _set_active(name_or_id, False)


@schedule.command("resume")
@click.argument("name_or_id")
def resume_schedule(name_or_id: str) -> None:
    """Resume the paused schedule NAME_OR_ID."""
    _set_active(name_or_id, True)


def _set_active(name_or_id: str, active: bool) -> None:
    from wharf.sdk.client import Client

    with Client() as client:
        before = client.get_schedule(name_or_id)
        record = client.set_schedule_active(before.id, active)
        try:
            found = _orchestrator_of(client, record)
            if found is not None:
                orchestrator, snapshot = found
                orchestrator.set_schedule_active(record, active, snapshot)
        except BaseException:
            try:  # the store's record says what fires: put it back
                client.set_schedule_active(before.id, before.active)
            except Exception as exc:  # the platform's error is the one to report
                click.echo(f"Warning: could not restore schedule '{record.name}': {exc}", err=True)
            raise
    click.echo(f"Schedule '{record.name}' is {'active' if active else 'paused'}.")


def _orchestrator_of(
    client: Client, record: ScheduleRecord
) -> tuple[BaseOrchestrator, SnapshotRecord] | None:
    """The orchestrator of the stack the schedule's snapshot runs on, and that snapshot (its
    settings may say where the platform keeps the schedule); None: no stack."""
    from wharf.core.enums import ComponentType

    snapshot = client.store.snapshots.get(record.snapshot_id)
    if snapshot.stack_id is None:
        return None
    stack = client.store.stacks.get_stack(snapshot.stack_id)
    orchestrator: BaseOrchestrator = client.workspace.component_instance(
        stack, ComponentType.ORCHESTRATOR
    )
    return orchestrator, snapshot


@schedule.command("delete")
@click.argument("name_or_id")
@YES_OPTION
def delete_schedule(name_or_id: str, yes: bool) -> None:
    """Delete schedule NAME_OR_ID; the runs it started stay."""
    from wharf.sdk.client import Client

    with Client() as client:
        record = client.get_schedule(name_or_id)
        confirm(f"Delete schedule '{record.name}'?", yes=yes)
        found = _orchestrator_of(client, record)
        if found is not None and found[0].schedules_runs:
            _delete_on_platform(client, record, *found)
        client.delete_schedule(record.id)
    click.echo(f"Deleted schedule '{record.name}'.")


def _delete_on_platform(
    client: Client, record: ScheduleRecord, orchestrator: BaseOrchestrator, snapshot: SnapshotRecord
) -> None:
    """Delete the platform's schedule, once the store let this account pause it (the same
    right as deleting it: one refused, e.g. a viewer, leaves the platform untouched); paused, it
    fires nothing while it goes. A platform failure puts the record back as it was."""
    client.set_schedule_active(record.id, False)
    try:
        orchestrator.delete_schedule(record, snapshot)
    except BaseException:
        if record.active:
            try:
                client.set_schedule_active(record.id, True)
            except Exception as exc:  # the platform's error is the one to report
                click.echo(f"Warning: could not resume schedule '{record.name}': {exc}", err=True)
        raise
