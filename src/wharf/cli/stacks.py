"""``wharf stack register NAME -o ORCH -a STORE [-s OP] | list | set NAME | show [NAME] |
delete NAME [--yes]``.

A thin layer over :mod:`wharf.sdk.stacks`, which validates and writes; the SDK and the table rows
(:mod:`wharf.cli.stack_rows`, pydantic models) are imported only when a command runs. ``wharf stack
set`` writes ``active_stack`` into the user config file; ``WHARF_ACTIVE_STACK`` still overrides it.
``wharf stack delete`` keeps the stack's components and refuses the active stack.
"""

from __future__ import annotations

import json
import os
import shlex

import click

from wharf.cli.components import COMPONENT_COLUMNS
from wharf.cli.confirm import YES_OPTION, confirm
from wharf.cli.output import OUTPUT_OPTION, emit, emit_one, paged

ACTIVE_STACK_ENV = "WHARF_ACTIVE_STACK"
STACK_COLUMNS = (
    "active",
    "name",
    "orchestrator",
    "artifact_store",
    "step_operator",
    "created",
    "id",
)


@click.group()
def stack() -> None:
    """Register, list, show, choose and delete stacks."""


@stack.command("register")
@click.argument("name")
@click.option("--orchestrator", "-o", required=True, help="Name of an orchestrator component.")
@click.option("--artifact-store", "-a", required=True, help="Name of an artifact store component.")
@click.option("--step-operator", "-s", help="Name of a step operator component (optional).")
def register_stack(
    name: str, orchestrator: str, artifact_store: str, step_operator: str | None
) -> None:
    """Register a stack NAME from registered components."""
    from contextlib import closing

    from wharf.sdk import stacks
    from wharf.sdk.workspace import Workspace

    with closing(Workspace.open()) as workspace:
        record = stacks.register_stack(
            workspace,
            name,
            orchestrator=orchestrator,
            artifact_store=artifact_store,
            step_operator=step_operator,
        )
    click.echo(
        f"Registered stack '{record.name}'; use it with: wharf stack set {shlex.quote(record.name)}"
    )


@stack.command("list")
@paged
@OUTPUT_OPTION
def list_stacks(page: int, size: int, output: str) -> None:
    """List stacks, newest first; '*' marks the active one."""
    from contextlib import closing

    from wharf.sdk import stacks
    from wharf.sdk.workspace import Workspace

    with closing(Workspace.open()) as workspace:
        result = stacks.list_stacks(workspace, page=page, size=size)
    if output == "json":
        emit(result.items, (), output)
        return
    from wharf.cli.stack_rows import stack_rows

    emit(stack_rows(result.items), STACK_COLUMNS, output, title="Stacks", total=result.total)


@stack.command("set", short_help="Make NAME the active stack (saved in the user config file).")
@click.argument("name")
def set_stack(name: str) -> None:
    """Make NAME the active stack (saved in the user config file); NAME is a stack's name, id
    or id prefix."""
    from contextlib import closing

    from wharf.sdk import stacks
    from wharf.sdk.workspace import Workspace

    with closing(Workspace.open()) as workspace:
        record = stacks.set_active_stack(workspace, name)
    click.echo(f"Active stack: '{record.name}'.")
    override = os.environ.get(ACTIVE_STACK_ENV)
    if override and override != record.name:
        click.echo(
            f"Note: {ACTIVE_STACK_ENV}={override} overrides the config file in this environment.",
            err=True,
        )


@stack.command("show", short_help="Show a stack and its components.")
@click.argument("name", required=False)
@OUTPUT_OPTION
def show_stack(name: str | None, output: str) -> None:
    """Show stack NAME (a name, id or id prefix; the active one by default), its components and
    their configuration."""
    from contextlib import closing

    from wharf.sdk import stacks
    from wharf.sdk.workspace import Workspace

    with closing(Workspace.open()) as workspace:
        description = stacks.describe_stack(workspace, name)
    if output == "json":
        click.echo(json.dumps(description.model_dump(mode="json"), indent=2))
        return
    from wharf.cli.stack_rows import StackHeader, component_rows

    header = StackHeader(
        name=description.name,
        id=description.id,
        active="yes" if description.active else "no",
        created=description.created,
    )
    emit_one(header, output)
    click.echo("")
    emit(
        component_rows(description.components.values()),
        ("type", *(c for c in COMPONENT_COLUMNS if c not in ("type", "created"))),
        output,
        title="Components",
    )


@stack.command("delete", short_help="Delete a stack (its components are kept).")
@click.argument("name")
@YES_OPTION
def delete_stack(name: str, yes: bool) -> None:
    """Delete stack NAME (a name, id or id prefix; its components are kept); refused for the
    active stack and while a run of it is unfinished or a schedule uses it."""
    from contextlib import closing

    from wharf.sdk import stacks
    from wharf.sdk.workspace import Workspace

    with closing(Workspace.open()) as workspace:
        record = stacks.stack_to_delete(workspace, name)  # refusals come before the prompt
        confirm(f"Delete stack '{record.name}'?", yes=yes)
        stacks.delete_stack(workspace, record.name)
    click.echo(f"Deleted stack '{record.name}'.")
