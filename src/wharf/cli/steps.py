"""``wharf steps list --run RUN`` and ``wharf steps logs RUN STEP`` (or ``STEP_RUN_ID``).

``steps logs`` prints a step's stored output as it is (nothing for none); for a step that has
not ended yet it says on stderr that its output comes when it ends, instead of printing nothing.
"""

from __future__ import annotations

import click

from wharf.cli.output import OUTPUT_OPTION, emit, paged

STEP_COLUMNS = ("name", "status", "attempt", "start_time", "end_time", "id")


@click.group()
def steps() -> None:
    """Inspect the step runs of a run."""


@steps.command("list")
@click.option("--run", "run", required=True, help="Run id or name.")
@paged
@OUTPUT_OPTION
def list_steps(run: str, page: int, size: int, output: str) -> None:
    """List the step runs of a run, in the order they started."""
    from wharf.cli.reads import read

    result = read(lambda r: r.list_run_steps(run, page=page, size=size))
    emit(result.items, STEP_COLUMNS, output, title="Step runs", total=result.total)


@steps.command("logs")
@click.argument("run")
@click.argument("step", required=False)
def step_logs(run: str, step: str | None) -> None:
    """Print the captured stdout/stderr of STEP of RUN: RUN is a run's name, id or id prefix,
    STEP the name of one of its steps (its last attempt). Given alone, RUN is a step run's id
    or id prefix (as in: wharf steps logs STEP_RUN_ID). A step's output is stored when it ends."""
    from wharf.core.enums import ExecutionStatus
    from wharf.sdk.client import Client

    with Client() as client:
        record = client.find_step_run(run) if step is None else client.find_step_run(step, run=run)
        text = client.step_logs(record)
    if text:
        click.echo(text, nl=not text.endswith("\n"))
    if not (record.status.is_finished or record.status is ExecutionStatus.RETRYING):
        click.echo(
            f"Step '{record.name}' is {record.status.value}: its output is stored when it ends "
            "(wharf runs logs RUN --follow prints it then).",
            err=True,
        )
