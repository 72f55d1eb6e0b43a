"""``wharf schedule list | show | pause | resume | delete``: the project's recorded schedules.

Schedules are named per project; every command takes a schedule's name or id. Deleting a
schedule keeps the runs it started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from wharf.cli.output import OUTPUT_OPTION, emit, emit_one, paged

if TYPE_CHECKING:
    from wharf.store.models import ScheduleRecord

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
        record = client.set_schedule_active(name_or_id, active)
    click.echo(f"Schedule '{record.name}' is {'active' if active else 'paused'}.")


@schedule.command("delete")
@click.argument("name_or_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def delete_schedule(name_or_id: str, yes: bool) -> None:
    """Delete schedule NAME_OR_ID; the runs it started stay."""
    from wharf.sdk.client import Client

    with Client() as client:
        record = client.get_schedule(name_or_id)
        if not yes:
            click.confirm(f"Delete schedule '{record.name}'?", abort=True)
        client.delete_schedule(record.id)
    click.echo(f"Deleted schedule '{record.name}'.")
