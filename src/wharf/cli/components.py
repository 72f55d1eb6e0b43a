"""``wharf component register NAME --type T --flavor F [-c key=value ...] | list |
update NAME --type T [-c key=value ...] [--remove KEY ...] | delete NAME --type T [--yes]``.

A thin layer over :mod:`wharf.sdk.stacks`, which validates and writes; the SDK and the table rows
(:mod:`wharf.cli.stack_rows`, pydantic models) are imported only when a command runs, and the
declared flavors (``wharf.flavors`` entry points) are read only when ``--flavor``'s help is shown.
``update`` changes a component's configuration only (its name, type and flavor stay) and prints the
new configuration unmasked, like ``list`` (secrets are not stored in components: an fsspec store
refuses them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from wharf.cli.confirm import YES_OPTION, confirm
from wharf.cli.output import OUTPUT_OPTION, emit, paged
from wharf.core.enums import ComponentType

COMPONENT_TYPES = ", ".join(t.value for t in ComponentType)
COMPONENT_COLUMNS = ("name", "type", "flavor", "configuration", "created", "id")


class FlavorOption(click.Option):
    """``--flavor``: its help lists the declared flavors of each type, read when it is shown."""

    @property
    def help(self) -> str | None:
        from wharf.config.flavors import declared_flavors

        known = "; ".join(
            f"{type.value}: {', '.join(sorted(names)) or 'none'}"
            for type, names in declared_flavors().items()
        )
        return f"A flavor of that type. Known flavors: {known}."

    @help.setter
    def help(self, value: str | None) -> None:
        """Ignored: the text above is built when it is read."""


F = TypeVar("F", bound=Callable[..., Any])


def config_option(help: str) -> Callable[[F], F]:
    """The repeatable ``--config/-c KEY=VALUE`` option of ``register`` and ``update``."""
    return click.option("--config", "-c", "config", multiple=True, metavar="KEY=VALUE", help=help)


@click.group()
def component() -> None:
    """Register, list, update and delete stack components."""


@component.command("register")
@click.argument("name")
@click.option(
    "--type", "-t", "type_", required=True, metavar="TYPE", help=f"One of: {COMPONENT_TYPES}."
)
@click.option(
    "--flavor",
    "-f",
    cls=FlavorOption,
    required=True,
    metavar="FLAVOR",
)
@config_option(
    "A configuration value (repeatable); parsed as JSON when it parses, else kept as text. "
    "A local artifact store's 'path' defaults to the configured artifact root."
)
def register_component(name: str, type_: str, flavor: str, config: tuple[str, ...]) -> None:
    """Register a stack component NAME."""
    from contextlib import closing

    from wharf.sdk import stacks
    from wharf.sdk.workspace import Workspace

    component_type = stacks.parse_component_type(type_)
    configuration = stacks.parse_configuration(config)
    with closing(Workspace.open()) as workspace:
        record = stacks.register_component(workspace, name, component_type, flavor, configuration)
    click.echo(f"Registered {record.type.value} '{record.name}' (flavor {record.flavor}).")


@component.command("list")
@click.option("--type", "-t", "type_", metavar="TYPE", help=f"Only this type: {COMPONENT_TYPES}.")
@paged
@OUTPUT_OPTION
def list_components(type_: str | None, page: int, size: int, output: str) -> None:
    """List stack components, newest first."""
    from contextlib import closing

    from wharf.sdk import stacks
    from wharf.sdk.workspace import Workspace

    component_type = None if type_ is None else stacks.parse_component_type(type_)
    with closing(Workspace.open()) as workspace:
        stacks.ensure_default_stack(workspace)
        result = stacks.list_components(workspace, component_type, page=page, size=size)
    if output == "json":
        emit(result.items, COMPONENT_COLUMNS, output)
        return
    from wharf.cli.stack_rows import component_rows

    emit(
        component_rows(result.items),
        COMPONENT_COLUMNS,
        output,
        title="Stack components",
        total=result.total,
        filtered=component_type is not None,
    )


def _shown(configuration: dict[str, Any]) -> str:
    """``key=value, ...`` in key order; text as is, other values as JSON."""
    if not configuration:
        return "no configuration"
    return ", ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value, sort_keys=True)}"
        for key, value in sorted(configuration.items())
    )


@component.command("update", short_help="Change a stack component's configuration.")
@click.argument("name")
@click.option(
    "--type",
    "-t",
    "type_",
    metavar="TYPE",
    help=f"One of: {COMPONENT_TYPES}; needed only when several types use NAME.",
)
@config_option("A configuration value to set (repeatable), parsed as for 'register'.")
@click.option(
    "--remove", "-r", multiple=True, metavar="KEY", help="A configuration key to drop (repeatable)."
)
def update_component(
    name: str, type_: str | None, config: tuple[str, ...], remove: tuple[str, ...]
) -> None:
    """Change the configuration of stack component NAME (a name, id or id prefix; of type TYPE
    when several types use the name); refused while a run on a stack using it is unfinished (an
    orchestrator's, also while a schedule uses such a stack)."""
    from contextlib import closing

    from wharf.sdk import stack_lookup, stacks
    from wharf.sdk.workspace import Workspace

    if not config and not remove:
        raise click.UsageError("Nothing to change: give -c KEY=VALUE or --remove KEY.")
    component_type = None if type_ is None else stacks.parse_component_type(type_)
    configuration = stacks.parse_configuration(config)
    with closing(Workspace.open()) as workspace:
        if component_type is None:
            found = stack_lookup.find_any_component(workspace, name)
            name, component_type = found.name, found.type
        record = stacks.update_component(workspace, name, component_type, configuration, remove)
    click.echo(
        f"Updated {record.type.value} component '{record.name}': {_shown(record.configuration)}."
    )


@component.command("delete", short_help="Delete a stack component.")
@click.argument("name")
@click.option(
    "--type",
    "-t",
    "type_",
    metavar="TYPE",
    help=f"One of: {COMPONENT_TYPES}; needed only when several types use NAME.",
)
@YES_OPTION
def delete_component(name: str, type_: str | None, yes: bool) -> None:
    """Delete stack component NAME (a name, id or id prefix; of type TYPE when several types use
    the name); refused while a stack uses it."""
    from contextlib import closing

    from wharf.sdk import stack_lookup, stacks
    from wharf.sdk.workspace import Workspace

    component_type = None if type_ is None else stacks.parse_component_type(type_)
    with closing(Workspace.open()) as workspace:
        if component_type is None:
            found = stack_lookup.find_any_component(workspace, name)
        else:
            found = stack_lookup.find_component(workspace, component_type, name)
        confirm(f"Delete {found.type.value} '{found.name}'?", yes=yes)
        record = stacks.delete_component(workspace, found.name, found.type)
    click.echo(f"Deleted {record.type.value} '{record.name}'.")
