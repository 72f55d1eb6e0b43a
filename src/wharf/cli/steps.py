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
@click.argument("run_or_step_run")
@click.argument("step", required=False)
def step_logs(run_or_step_run: str, step: str | None) -> None:
    """Print the captured stdout/stderr of a step: ``wharf steps logs RUN STEP`` (a run by name,
    id or id prefix, and one of its steps by name: its last attempt), or ``wharf steps logs
    STEP_RUN_ID`` (an id or id prefix). A step's output is stored when the step ends."""
    from wharf.sdk.client import Client

    with Client() as client:
        if step is None:
            text = client.step_logs(run_or_step_run)
        else:
            text = client.step_logs(step, run=run_or_step_run)
    click.echo(text, nl=not text.endswith("\n"))
