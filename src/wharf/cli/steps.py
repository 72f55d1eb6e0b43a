"""``wharf steps list --run RUN`` and ``wharf steps logs RUN STEP`` (or ``STEP_RUN_ID``).

``steps logs`` prints a step's stored output as it is. Where there is no output to print it says
why on stderr, in one line, and exits 0: a step that ended and wrote no output, a step that has
not ended yet (its output comes when it ends; a queued one has not started), and a
step that never started (it failed or was stopped before it started, or a step of the pipeline
that its run never reached), and one that started, did not succeed and stored no output (a
force-stopped step). A cached step gets one line naming the run it was cached from (as
``wharf runs logs`` names it), followed by the logs of the step run it reuses, if stored. A log
the artifact store cannot give, and a run's id given alone, are one-line errors.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, NoReturn

import click

from wharf.cli.output import OUTPUT_OPTION, emit, paged

if TYPE_CHECKING:
    from wharf.core.errors import EntityNotFoundError
    from wharf.sdk.client import Client
    from wharf.store.models import StepRunRecord

STEP_COLUMNS = ("name", "status", "attempt", "start_time", "end_time", "id")
LATER = "its output is stored when it ends (wharf runs logs RUN --follow prints it then)"


@click.group()
def steps() -> None:
    """Inspect the step runs of a run."""


@steps.command("list")
@click.option("--run", "run", required=True, help="The run: its name, id or id prefix.")
@paged
@OUTPUT_OPTION
def list_steps(run: str, page: int, size: int, output: str) -> None:
    """List the step runs of a run, in the order they started."""
    from wharf.cli.reads import read

    result = read(lambda r: r.list_run_steps(run, page=page, size=size))
    emit(result.items, STEP_COLUMNS, output, title="Step runs", total=result.total)


@steps.command("logs", short_help="Print the output of one step of a run.")
@click.argument("run")
@click.argument("step", required=False)
def step_logs(run: str, step: str | None) -> None:
    """Print the captured stdout/stderr of STEP of RUN: RUN is a run's name, id or id prefix,
    STEP the name of one of its steps (its last attempt). Given alone, RUN is a step run's id
    or id prefix (as in: wharf steps logs STEP_RUN_ID). A step's output is stored when it ends."""
    from wharf.cli.run_logs import cached_from, is_cached
    from wharf.core.errors import EntityNotFoundError, WharfError
    from wharf.sdk.client import Client

    with Client() as client:
        try:
            record = (
                client.find_step_run(run) if step is None else client.find_step_run(step, run=run)
            )
        except EntityNotFoundError as exc:
            if step is None:
                _refuse_a_run(client, run, exc)
            note = _unreached(client, run, step)
            if note is None:
                raise
            click.echo(note, err=True)
            return
        try:
            text = client.step_logs(record)
        except WharfError:
            raise
        except Exception as exc:  # e.g. an artifact store this machine cannot read
            from wharf.cli.run_logs import unreadable

            raise WharfError(f"Step '{record.name}': {unreadable(exc)}") from None
        origin = cached_from(client, record) if is_cached(record) else None
        note = None  # a cached step: the line naming its origin says it
        if origin is None:
            note = _why_no_logs(client, record) if not text else _not_ended(record)
    if origin is not None:  # as `wharf runs logs` says; then the reused step run's logs
        there = "its logs there:" if text else "it has no logs there."
        click.echo(f"Step '{record.name}' was cached from run {origin}; {there}", err=True)
    if text:
        click.echo(text, nl=not text.endswith("\n"))
    if note is not None:
        click.echo(note, err=True)


def _not_ended(record: StepRunRecord) -> str | None:
    """The note for a step run that has not ended yet (None if it has)."""
    from wharf.core.enums import ExecutionStatus

    status = record.status
    if status.is_finished or status is ExecutionStatus.RETRYING:
        return None
    if record.start_time is None:
        return f"Step '{record.name}' is {status.value}: it has not started yet; {LATER}."
    return f"Step '{record.name}' is {status.value}: {LATER}."


def _why_no_logs(client: Client, record: StepRunRecord) -> str:
    """Why a step run that was not cached has no output to print: it has not ended, never
    started, or stored none; else it wrote none (silence would look like a failure), unless its
    run goes on: a log can be stored a moment after its step ended (a Kubernetes step's)."""
    from wharf.cli.run_logs import never_started, stored_nothing

    note = _not_ended(record)
    if note is not None:
        return note
    never = never_started(record) or stored_nothing(record)  # as `wharf runs logs` says it
    if never is not None:
        return f"Step '{record.name}' {never}"
    ended = f"Step '{record.name}' ({record.status.value})"
    if record.logs_uri is None or client.get_pipeline_run(record.run_id).status.is_finished:
        return f"{ended} wrote no output."
    return f"{ended} has no stored output yet: it wrote none, or its log is stored in a moment."


def _unreached(client: Client, run: str, step: str) -> str | None:
    """The note for STEP of RUN when the run has no step run of that name but its pipeline has
    that step (None if it does not): the run never reached it, or has not yet."""
    found = client.get_pipeline_run(run)
    if step not in client.get_snapshot(found.snapshot_id).spec.steps:
        return None
    from wharf.cli.run_logs import never_reached

    if found.status.is_finished:
        return f"Step '{step}' {never_reached(found)}"  # as `wharf runs logs` says it
    status = found.status.value
    return f"Step '{step}' has not started yet (run '{found.name}' is {status}); {LATER}."


def _refuse_a_run(client: Client, given: str, error: EntityNotFoundError) -> NoReturn:
    """RUN given alone names no step run: if it names a run, say how to name one of its steps
    (an error all the same); else re-raise ``error``."""
    from wharf.core.errors import EntityNotFoundError, InputError

    try:
        found = client.get_pipeline_run(given)
    except EntityNotFoundError:
        raise error from None
    names = list(dict.fromkeys(s.name for s in client.list_run_steps(found.id, size=50).items))
    listed = f" (its steps: {', '.join(names)})" if names else ""
    raise InputError(
        f"'{given}' is run '{found.name}', not a step run: wharf steps logs "
        f"{shlex.quote(given)} STEP prints one of its steps{listed}; wharf runs logs "
        f"{shlex.quote(given)} prints them all."
    ) from None
