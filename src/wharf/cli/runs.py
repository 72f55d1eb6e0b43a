"""``wharf runs list | show RUN | logs RUN [--follow] | stop RUN``."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, NoReturn
from uuid import UUID

import click

from wharf.cli.output import OUTPUT_OPTION, emit, paged
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityNotFoundError
from wharf.core.transitions import RUN_INITIAL_STATUSES, RUN_TRANSITIONS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from wharf.cli.reads import Reads
    from wharf.cli.run_details import RunStack
    from wharf.sdk.client import Client
    from wharf.store.models import Page, PipelineRunRecord

RUN_COLUMNS = ("name", "status", "stack", "created", "end_time", "id")
RUN_STATUSES = [
    s.value
    for s in ExecutionStatus
    if s in RUN_INITIAL_STATUSES or any(s in targets for targets in RUN_TRANSITIONS.values())
]
"""The statuses a run can have (``cached``, ``skipped``, ``cancelled`` ... are steps' only)."""


@click.group()
def runs() -> None:
    """Inspect and stop pipeline runs."""


@runs.command("list")
@click.option("--pipeline", help="Only runs of this pipeline (name or id).")
@click.option(
    "--status",
    type=click.Choice(RUN_STATUSES),
    help="Only runs in this status.",
)
@paged
@OUTPUT_OPTION
def list_runs(pipeline: str | None, status: str | None, page: int, size: int, output: str) -> None:
    """List pipeline runs, newest first.

    Each row names the stack the run ran on ("(deleted stack)" once that stack is deleted,
    as "wharf runs show" says it), and the run's id by a short prefix that RUN arguments accept
    (-o json gives the whole id)."""
    from wharf.cli.reads import read
    from wharf.cli.run_details import run_stacks

    def query(reads: Reads) -> tuple[Page[PipelineRunRecord], dict[UUID, RunStack]]:
        found = reads.list_pipeline_runs(pipeline=pipeline, status=status, page=page, size=size)
        return found, run_stacks(reads, found.items)

    result, stacks = read(query)
    if output == "json":
        import json

        click.echo(json.dumps([_run_json(r, stacks.get(r.id)) for r in result.items], indent=2))
        return
    short = short_ids([r.id for r in result.items], result.total)
    emit(
        result.items,
        RUN_COLUMNS,
        output,
        title="Pipeline runs",
        total=result.total,
        derived={
            "stack": lambda r: stacks[r.id].shown if r.id in stacks else None,
            "id": lambda r: short[r.id],
        },
        filtered=pipeline is not None or status is not None,
        hint="running a pipeline (python my_pipeline.py) makes one.",
    )


SHORT_ID_DIGITS = 8
"""Fewest hex digits of a run's id a table shows (the first group of the written UUID)."""


def short_ids(ids: Sequence[UUID], total: int) -> dict[UUID, str]:
    """The prefix of each of ``ids`` (hex digits) a table shows, as git abbreviates commits:
    :data:`SHORT_ID_DIGITS`, more once ``total`` ids make a shared prefix likely (git's rule:
    a digit per two bits of the count, past 65535 runs), and more until no two of ``ids``
    share one. Ids are random, so a prefix shared with a run not listed is unlikely; RUN
    arguments then say the prefix is ambiguous and list the runs."""
    digits = max(SHORT_ID_DIGITS, -(-total.bit_length() // 2))
    while len({i.hex[:digits] for i in ids}) < len(set(ids)):
        digits += 1
    return {i: i.hex[:digits] for i in ids}


def _run_json(run: PipelineRunRecord, stack: RunStack | None) -> dict[str, Any]:
    """A run as ``runs list -o json`` gives it: its record, and its stack's name and whether
    that stack was deleted, as ``runs show -o json`` (both null if unknown)."""
    data = run.model_dump(mode="json")
    data["stack_name"] = None if stack is None else stack.name
    data["stack_deleted"] = None if stack is None else stack.name is None
    return data


@runs.command("show", short_help="Show a run and its steps.")
@click.argument("run")
@OUTPUT_OPTION
def show_run(run: str, output: str) -> None:
    """Show RUN (a run's name, id or id prefix): its pipeline, status and duration, and its
    steps as a tree under their upstream steps, with status, duration, cache origin and
    resources."""
    from datetime import UTC, datetime

    from wharf.cli.reads import read
    from wharf.cli.run_details import allocations, gather
    from wharf.cli.run_view import render, unreached_steps

    _given(run)
    try:
        view = read(lambda reads: gather(reads, run))
    except EntityNotFoundError as exc:
        _not_a_run(run, exc)
    if output == "json":
        import json

        data = view.run.model_dump(mode="json")
        data["pipeline_name"] = view.pipeline_name
        data["stack_name"] = view.stack_name
        data["stack_deleted"] = view.stack_name is None
        data["steps"] = [s.model_dump(mode="json") for s in view.steps]
        data["steps_not_started"] = unreached_steps(view)
        click.echo(json.dumps(data, indent=2))
        return
    if any(step.resource_request_id is not None for step in view.steps):
        from dataclasses import replace

        from wharf.sdk.client import Client

        with Client() as client:
            view = replace(view, allocated=allocations(client, list(view.steps)))
    click.echo("\n".join(render(view, datetime.now(UTC))))


@runs.command("logs", short_help="Print the output of every step of a run.")
@click.argument("run")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing each step's output as the step ends, until the run finishes.",
)
def run_logs(run: str, follow: bool) -> None:
    """Print the captured output of every step of RUN (a run's name, id or id prefix), each
    line prefixed with the step's name. A step's output is stored when the step ends; with
    --follow, steps still running are printed as they end (Ctrl-C stops following), and a run
    its orchestrator will never start (e.g. a Kubernetes orchestrator image that cannot be
    pulled) is ended failed, with the reason as an error (exit code 1). Following ends with
    one line on stderr saying how the run ended (its status and reason)."""
    from wharf.cli.run_logs import RunLogs
    from wharf.sdk.client import Client

    _given(run)
    with Client() as client:
        try:
            logs = RunLogs(client, run, click.echo)
        except EntityNotFoundError as exc:
            _not_a_run(run, exc, client)
        if follow:
            import gc

            gc.enable()  # following may last hours: collect as long-running commands do
            try:
                logs.follow()
            except KeyboardInterrupt:  # how one stops following: no message; as any Ctrl-C,
                import sys

                from wharf.cli.main import INTERRUPTED  # exit code 130

                sys.exit(INTERRUPTED)
            from wharf.cli.run_logs import ended_line, no_output

            if not logs.printed_any:
                click.echo(no_output(logs.latest, logs.steps_seen), err=True)
            if logs.run.id not in client.swept:  # its sweep's warning said how it ended
                click.echo(ended_line(logs.latest), err=True)  # else a follower cannot tell
        else:
            logs.poll(following=False)
            if not logs.printed_any:  # else silence looks like a hang or a failure
                from wharf.cli.run_logs import no_output

                click.echo(no_output(logs.latest, logs.steps_seen), err=True)
    if logs.unreadable:
        from wharf.core.errors import WharfError

        raise WharfError(f"Could not read the log of: {', '.join(logs.unreadable)}.")


@runs.command("stop", short_help="Stop a run gracefully; --force kills steps.")
@click.argument("run")
@click.option(
    "--force",
    is_flag=True,
    help="Also kill the run's isolated step processes (they end stopped): at once for those "
    "this machine started, through the run's orchestrator for the others.",
)
def stop_run(run: str, force: bool) -> None:
    """Stop run RUN gracefully: no new steps start; running steps are interrupted at their next
    safe point (within a second or two when the run is on this machine; otherwise at its next
    heartbeat, within WHARF_HEARTBEAT_INTERVAL, 15 s by default) and end stopped; then the
    run ends stopped. A step that finishes before that keeps its result. On Kubernetes,
    running step pods are not interrupted: they finish. Ctrl-C or SIGTERM in the process
    running the pipeline stops it the same way (a second Ctrl-C forces)."""
    from wharf.sdk.client import Client

    _given(run)
    with Client() as client:
        try:
            record = client.stop_run(run, force=force)
        except EntityNotFoundError as exc:
            _not_a_run(run, exc, client)
        running = [] if force or record.status.is_finished else _running_steps(client, record.id)
    reason = (record.status_reason or "").rstrip(".")
    why = f": {reason}" if record.status.is_finished and reason else ""
    if running:  # a step blocked outside Python (a long C call) is interrupted only after it
        why = (  # (when they end depends on the orchestrator: see the docstring)
            f": no new steps start; still running: {', '.join(running)} "
            f"(`wharf runs stop {record.name} --force` ends them at once)"
        )
    if not record.status.is_finished and record.orchestrator_host is None:
        why = (
            ": no orchestrating process has taken it over yet (e.g. a Kubernetes run whose pod "
            f"has not started); it ends when one does, or now with `wharf runs stop {record.name} "
            "--force`"
        )
    click.echo(f"Run '{record.name}' is {record.status.value}{why}.")


def _running_steps(client: Client, run_id: UUID) -> list[str]:
    """The names of the run's steps that are running (the first 10 and how many more)."""
    from wharf.core.enums import ExecutionStatus

    found = client.list_run_steps(run_id, status=ExecutionStatus.RUNNING, size=10)
    names = [step.name for step in found.items]
    more = found.total - len(names)
    return [*names, f"{more} more"] if more > 0 else names


def _given(run: str) -> None:
    """Refuse an empty RUN (``"$RUN"`` of an unset variable) as the embedded store does, before
    a workspace server can name its request field instead."""
    if not run.strip():
        from wharf.core.ids import run_not_found

        raise run_not_found(run, names_a_pipeline=False)


def _not_a_run(given: str, error: EntityNotFoundError, client: Client | None = None) -> NoReturn:
    """Re-raise ``error`` (no run matches ``given``), saying so when ``given`` is the id or id
    prefix of a step run (one copied from ``wharf steps list``)."""
    from wharf.core.errors import WharfError
    from wharf.core.ids import parse_id_prefix, parse_uuid

    if parse_uuid(given) is None and parse_id_prefix(given) is None:
        raise error
    try:
        if client is None:
            from wharf.sdk.client import Client

            with Client() as own:
                step = own.get_step_run(given)
                found = own.get_pipeline_run(step.run_id)
        else:
            step = client.get_step_run(given)
            found = client.get_pipeline_run(step.run_id)
    except WharfError:
        raise error from None
    attempt = f", attempt {step.attempt}" if step.attempt > 1 else ""
    raise EntityNotFoundError(
        f"{error} '{given}' is a step run (step '{step.name}'{attempt}) of run '{found.name}': "
        f"wharf runs show {found.name} shows that run, wharf steps logs {shlex.quote(given)} "
        "the step's output."
    ) from None
