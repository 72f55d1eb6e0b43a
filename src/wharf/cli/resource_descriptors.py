"""``wharf resource create | list | show | delete``: the resources pools may offer and steps may
ask for (the Resource Manager's descriptors).

``CPU``, ``memory`` and ``GPU`` are built in and read-only; a custom resource (a licence, a
TPU, a test rig) is registered here before a pool offers it. By default it has one unit, named
like the resource, so ``-c license=3`` means three of them; ``--unit`` gives it units of its
own (exactly one of multiplier 1, the base unit). Changes are made on the Resource Manager
itself, as for pools and policies: through a workspace server they are refused, nothing sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from wharf.cli.output import OUTPUT_OPTION, echo_fields
from wharf.cli.resource_manager import (
    echo_json,
    open_rm,
    refuse_changes_here,
    remember_rm,
    rm_command_options,
    rm_options,
    split_assignment,
)

if TYPE_CHECKING:
    from wharf.resource_manager.domain import ResourceDescriptor


@click.group()
@rm_options
@click.pass_context
def resource(ctx: click.Context, /, **connection: str | None) -> None:
    """Manage the resources pools offer (built-in: CPU, memory, GPU)."""
    remember_rm(ctx, **connection)


def _units(texts: tuple[str, ...]) -> list[dict[str, Any]]:
    from wharf.core.errors import InputError

    units = []
    for text in texts:
        name, value = split_assignment(text, "UNIT=MULTIPLIER for --unit")
        try:
            multiplier = int(value)
        except ValueError:
            raise InputError(f"--unit {text}: '{value}' is not a whole number.") from None
        units.append({"name": name, "multiplier": multiplier})
    return units


def descriptor_body(
    name: str,
    *,
    kind: str | None,
    units: tuple[str, ...],
    default_unit: str | None,
    description: str,
) -> dict[str, Any]:
    """The descriptor body the options describe: without ``--unit``, one unit named like the
    resource; the kind defaults to the name in lower case."""
    from wharf.core.resource_kinds import custom_kind

    custom = custom_kind(name)
    body: dict[str, Any] = {
        "name": name,
        "kind": kind or custom.name,
        "units": _units(units) or [{"name": name, "multiplier": 1}],
        "description": description,
    }
    if default_unit is not None:
        body["default_unit"] = default_unit
    elif not units:
        body["default_unit"] = custom.default_unit
    return body


@resource.command("create")
@click.argument("name")
@click.option(
    "--unit",
    "units",
    multiple=True,
    metavar="UNIT=MULTIPLIER",
    help="A unit and how many base units it holds (repeatable; exactly one of multiplier 1). "
    "Default: one unit named like the resource.",
)
@click.option("--default-unit", help="The unit a bare number means (default: the base unit).")
@click.option("--kind", help="The resource's kind (default: NAME in lower case).")
@click.option("--description", default="", help="What the resource is, for people.")
@OUTPUT_OPTION
@click.pass_context
def create(
    ctx: click.Context,
    name: str,
    units: tuple[str, ...],
    default_unit: str | None,
    kind: str | None,
    description: str,
    output: str,
) -> None:
    """Register custom resource NAME (a licence, a TPU) for pools to offer."""
    import re

    from wharf.core.errors import InputError
    from wharf.core.resources import NAME_PATTERN
    from wharf.resource_manager.domain import ResourceDescriptor, load
    from wharf.resource_manager.domain.units import check_custom_name

    if re.fullmatch(NAME_PATTERN, name) is None:  # before the kind and unit made from it
        raise InputError(
            f"Invalid resource name {name!r}: it must start with a letter or digit and hold "
            "only letters, digits and _ . : - (at most 128 characters)."
        )
    body = descriptor_body(
        name, kind=kind, units=units, default_unit=default_unit, description=description
    )
    check_custom_name(name, body["kind"])
    descriptor = load(ResourceDescriptor, body)
    with open_rm(ctx) as rm:
        refuse_changes_here(rm)
        _show(rm.descriptors.create(descriptor), output)


@resource.command("list")
@OUTPUT_OPTION
@click.pass_context
def list_resources(ctx: click.Context, output: str) -> None:
    """List the resources, built-in ones first."""
    from wharf.cli.output import emit

    with open_rm(ctx) as rm:
        found = _ordered(rm.descriptors.list())
    if output == "json":
        echo_json(found)
        return
    columns = ("name", "kind", "units", "default_unit", "description")
    emit([_row(d) for d in found], columns, output, noun="resources")


@resource.command("show")
@click.argument("name")
@OUTPUT_OPTION
@click.pass_context
def show(ctx: click.Context, name: str, output: str) -> None:
    """Show resource NAME with its units."""
    with open_rm(ctx) as rm:
        found = rm.descriptors.get(name)
    _show(found, output)


@resource.command("delete", short_help="Delete a custom resource no pool offers.")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete custom resource NAME (refused while a pool offers it)."""
    with open_rm(ctx) as rm:
        refuse_changes_here(rm)
        name = rm.descriptors.get(name).name  # an unknown name is said before asking
        from wharf.cli.confirm import confirm

        confirm(f"Delete resource '{name}'?", yes=yes)
        rm.descriptors.delete(name)
    click.echo(f"Deleted resource '{name}'.")


# ----------------------------------------------------------------------------- rendering


def _ordered(descriptors: list[ResourceDescriptor]) -> list[ResourceDescriptor]:
    from wharf.core.resource_kinds import STOCK_RESOURCES

    return sorted(descriptors, key=lambda d: (d.name not in STOCK_RESOURCES, d.name))


def _units_text(descriptor: ResourceDescriptor) -> str:
    return ", ".join(f"{u.name}={u.multiplier}" for u in descriptor.units)


def _row(descriptor: ResourceDescriptor) -> Any:
    from wharf.cli.request_view import Row

    return Row(
        name=descriptor.name,
        kind=descriptor.kind,
        units=_units_text(descriptor),
        default_unit=descriptor.default_unit,
        description=descriptor.description,
    )


def _show(descriptor: ResourceDescriptor, output: str) -> None:
    if output == "json":
        echo_json(descriptor)
        return
    echo_fields(
        (
            ("name", descriptor.name),
            ("kind", descriptor.kind),
            ("units", _units_text(descriptor)),
            ("default_unit", descriptor.default_unit),
            ("description", descriptor.description),
        )
    )


rm_command_options(resource)
