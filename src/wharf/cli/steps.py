"""``wharf steps list --run RUN`` and ``wharf steps logs RUN STEP`` (or ``STEP_RUN_ID``)."""

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
    from wharf.sdk.client import Client

    with Client() as client:
        text = client.step_logs(run) if step is None else client.step_logs(step, run=run)
    click.echo(text, nl=not text.endswith("\n"))
