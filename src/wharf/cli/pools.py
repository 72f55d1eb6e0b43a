"""``wharf pool create | list | show | update | delete | queue``.

Pool fields come inline (:func:`apply_classes`) or from a file (``-f pool.yaml``, the API's pool
body, see :data:`POOL_FILE_HELP`); inline options are applied on top of the file, and
``update`` changes only what is given. Logged in to a workspace server (and without
``--rm-url``), ``list``, ``show`` and ``queue`` show the team's pools through it; changes are
made on the Resource Manager itself. ``list`` pages as every list does (``--page``/``--size``),
here: the Resource Manager's API sends every pool at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wharf.cli.output import OUTPUT_OPTION, echo_fields, paged
from wharf.cli.resource_manager import (
    echo_json,
    entries_by_name,
    load_yaml,
    open_rm,
    refuse_changes_here,
    refuse_deleting_local,
    remember_rm,
    resources,
    rm_command_options,
    rm_options,
    split_assignment,
)
from wharf.cli.rm_names import find_pool
from wharf.cli.rm_quantities import Resources, check_before_asking, check_quantities

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import PoolAllocation
    from wharf.resource_manager.domain import Pool

DEFAULT_CLASS = "default"
POOL_FILE_HELP = """\b
Pool file (-f FILE): YAML holding the pool's fields; options given as well are applied
on top of it. A quantity with a unit is exact ("64CPU", "512GiB", "500mCPU"); a bare
number counts base units (GPU, mCPU, bytes); null is unlimited (still accounted).
\b
  name: gpus                # needed unless NAME is given
  rank: 10                  # pools of higher rank are tried first (default 0)
  concurrency_limit: 20     # most requests holding an allocation at once
  fair_sharing: false       # order equal priorities by dominant resource share
  attributes: {site: lab}
  classes:                  # at least one
    - name: h100
      capacity: {GPU: 8, CPU: 64CPU, memory: 512GiB}
      rank: 1               # higher is tried first when a demand names no class
      reclaimable: never    # never | coordinated | unsafe
    - name: spot
      capacity: {GPU: 4, CPU: null}
      reclaimable: coordinated
"""
"""The pool file's format with an example, as ``pool create --help`` and ``update --help``
print it (the example is created by a test exactly as printed)."""
RECLAIMABLE = ("never", "coordinated", "unsafe")


def _class_options(func: Any) -> Any:
    options = [
        click.option(
            "--capacity",
            "-c",
            "capacities",
            multiple=True,
            metavar="RESOURCE[:CLASS]=QTY",
            help="Capacity of a resource in a class (repeatable).",
        ),
        click.option(
            "--reclaimable",
            multiple=True,
            metavar="CLASS=never|coordinated|unsafe",
            help="How a class's allocations may be taken back (repeatable).",
        ),
        click.option(
            "--class-rank",
            multiple=True,
            metavar="CLASS=N",
            help="Rank of a class: higher is tried first when a demand names no class "
            "(repeatable; default 0).",
        ),
        click.option(
            "--rank", type=int, help="Pool rank: pools of higher rank are tried first (default 0)."
        ),
        click.option(
            "--concurrency-limit",
            type=click.IntRange(min=0),
            help="Most requests holding an allocation at once.",
        ),
        click.option(
            "--fair-sharing/--no-fair-sharing",
            default=None,
            help="Order requests of equal priority by their policy's dominant resource share.",
        ),
        click.option(
            "-f",
            "--file",
            "file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Pool fields as YAML.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _by_name(classes: Any) -> dict[str, dict[str, Any]]:
    return entries_by_name(classes, model="pool", field="classes")


def apply_classes(
    res: Resources,
    classes: dict[str, dict[str, Any]],
    capacities: tuple[str, ...],
    reclaimable: tuple[str, ...],
    class_ranks: tuple[str, ...],
) -> None:
    """Apply the inline class options to ``classes`` (name -> class body), in place.

    ``--capacity gpu:h100=8 --capacity cpu=64 --capacity memory=512GiB`` makes class ``h100``
    with 8 GPUs and class ``default`` with 64 CPUs and 512 GiB (entries without a class go to
    ``default``; ``unlimited`` means no limit, still accounted). On ``update`` the options edit
    the pool's current classes; other classes and resources stay.
    """
    from wharf.core.errors import InputError

    for item in classes.values():  # file or current classes: resource names as the RM knows
        capacity = item.get("capacity")
        if isinstance(capacity, dict):
            item["capacity"] = {res.descriptor(k).name: v for k, v in capacity.items()}
    given: set[tuple[str, str]] = set()
    for text in capacities:
        resource, class_name, quantity = read_capacity(res, text)
        target_name = class_name or DEFAULT_CLASS
        if (target_name, resource) in given:  # the last one silently won
            raise InputError(
                f"--capacity gives {resource} of class '{target_name}' twice; give it once."
            )
        given.add((target_name, resource))
        target = classes.setdefault(target_name, {"name": target_name})
        target["capacity"] = {**target.get("capacity", {}), resource: quantity}
    for option, field, texts in (
        ("--reclaimable", "reclaimable", reclaimable),
        ("--class-rank", "rank", class_ranks),
    ):
        for text in texts:
            class_name, value = split_assignment(text, f"CLASS=VALUE for {option}")
            if class_name not in classes:
                raise InputError(f"{option}: the pool has no class '{class_name}'.")
            if field == "reclaimable" and value not in RECLAIMABLE:
                raise InputError(f"{option}: expected one of {', '.join(RECLAIMABLE)}.")
            try:
                classes[class_name][field] = value if field == "reclaimable" else int(value)
            except ValueError:
                raise InputError(f"{option}: '{value}' is not a whole number.") from None


def read_capacity(res: Resources, text: str) -> tuple[str, str | None, int | None]:
    """``--capacity RESOURCE[:CLASS]=QTY`` -> (resource, class or None, base units or None)."""
    key, value = split_assignment(text, "RESOURCE[:CLASS]=QUANTITY")
    resource, class_name = res.split_key(key)
    return resource, class_name, res.quantity(resource, value, allow_unlimited=True)


def _top_level(body: dict[str, Any], **values: Any) -> None:
    for key, value in values.items():
        if value is not None:
            body[key] = value


@click.group()
@rm_options
@click.pass_context
def pool(ctx: click.Context, /, **connection: str | None) -> None:
    """Manage resource pools (capacity classes and limits)."""
    remember_rm(ctx, **connection)


@pool.command("create", epilog=POOL_FILE_HELP)
@click.argument("name", required=False)
@_class_options
@OUTPUT_OPTION
@click.pass_context
def create(
    ctx: click.Context,
    name: str | None,
    capacities: tuple[str, ...],
    reclaimable: tuple[str, ...],
    class_rank: tuple[str, ...],
    rank: int | None,
    concurrency_limit: int | None,
    fair_sharing: bool | None,
    file: Path | None,
    output: str,
) -> None:
    """Create a pool NAME (or the one in -f FILE)."""
    from wharf.resource_manager.contract.models import PoolCreate
    from wharf.resource_manager.domain import load

    body = load_yaml(file) if file else {}
    check_before_asking(capacities, read_capacity)
    _top_level(
        body, name=name, rank=rank, concurrency_limit=concurrency_limit, fair_sharing=fair_sharing
    )
    with open_rm(ctx) as rm:
        classes = _by_name(body.get("classes"))
        apply_classes(resources(rm), classes, capacities, reclaimable, class_rank)
        body["classes"] = list(classes.values())
        spec = load(PoolCreate, body)
        check_quantities((r, v) for c in spec.classes for r, v in c.capacity.items())
        created = rm.pools.create(spec)
        _show(rm, created, output)


@pool.command("update", epilog=POOL_FILE_HELP)
@click.argument("name")
@_class_options
@click.option("--remove-class", multiple=True, metavar="CLASS", help="Drop a class.")
@click.option("--rename", help="New pool name.")
@OUTPUT_OPTION
@click.pass_context
def update(
    ctx: click.Context,
    name: str,
    capacities: tuple[str, ...],
    reclaimable: tuple[str, ...],
    class_rank: tuple[str, ...],
    rank: int | None,
    concurrency_limit: int | None,
    fair_sharing: bool | None,
    file: Path | None,
    remove_class: tuple[str, ...],
    rename: str | None,
    output: str,
) -> None:
    """Change pool NAME; only what is given changes."""
    from wharf.core.errors import InputError
    from wharf.resource_manager.contract.models import PoolUpdate
    from wharf.resource_manager.domain import load

    body = load_yaml(file) if file else {}
    check_before_asking(capacities, read_capacity)
    _top_level(
        body, name=rename, rank=rank, concurrency_limit=concurrency_limit, fair_sharing=fair_sharing
    )
    with open_rm(ctx) as rm:
        refuse_changes_here(rm)
        name = find_pool(rm, name).name
        if capacities or reclaimable or class_rank or remove_class:
            current = body.get("classes") or [
                c.model_dump(mode="json") for c in rm.pools.get(name).classes
            ]
            classes = _by_name(current)
            for class_name in remove_class:
                if classes.pop(class_name, None) is None:
                    raise InputError(f"--remove-class: the pool has no class '{class_name}'.")
            apply_classes(resources(rm), classes, capacities, reclaimable, class_rank)
            body["classes"] = list(classes.values())
        if not body:
            raise InputError("Nothing to change: give at least one option.")
        _show(rm, rm.pools.update(name, load(PoolUpdate, body)), output)


@pool.command("list")
@paged
@OUTPUT_OPTION
@click.pass_context
def list_pools(ctx: click.Context, page: int, size: int, output: str) -> None:
    """List pools, by name."""
    from wharf.cli.output import emit, page_slice

    with open_rm(ctx) as rm:
        every = rm.pools.list()  # the Resource Manager sends them all: paged here
        pools = page_slice(every, page, size)
        if output == "json":
            echo_json(pools)
            return
        res = resources(rm)
        rows = [_row(res, p) for p in pools]
        columns = ("name", "rank", "classes", "concurrency_limit", "fair_sharing", "id")
        hint = "`wharf pool create` makes one."
        emit(rows, columns, output, total=len(every), noun="pools", hint=hint)


@pool.command("show", short_help="Show pool NAME with its classes and current allocations.")
@click.argument("name")
@OUTPUT_OPTION
@click.pass_context
def show(ctx: click.Context, name: str, output: str) -> None:
    """Show pool NAME (a name, id or id prefix) with its classes and current allocations."""
    from wharf.core.errors import IllegalOperationError

    with open_rm(ctx) as rm:
        found = find_pool(rm, name)
        held: list[PoolAllocation] | None = None
        try:
            held = rm.pools.allocations(found.id)
        except IllegalOperationError as refused:  # a workspace whose RM credential may not
            hidden = str(refused)
        if output == "json":
            data = found.model_dump(mode="json", by_alias=True)
            data["allocations"] = (
                None if held is None else [a.model_dump(mode="json", by_alias=True) for a in held]
            )
            click.echo(json.dumps(data, indent=2))
            return
        _show(rm, found, output)
        if held is None:
            click.echo(f"Current allocations not shown: {hidden}")
        else:
            _allocations(rm, held, output)


@pool.command("delete", short_help="Delete a pool and its policies.")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete pool NAME and its policies (refused while it has live requests)."""
    with open_rm(ctx) as rm:
        refuse_changes_here(rm)
        name = find_pool(rm, name).name  # an unknown name is said before asking to confirm
        refuse_deleting_local(ctx, "pool", name)
        from wharf.cli.confirm import confirm

        confirm(f"Delete pool '{name}' and its policies?", yes=yes)
        rm.pools.delete(name)
    click.echo(f"Deleted pool '{name}'.")


@pool.command("queue")
@click.argument("name")
@OUTPUT_OPTION
@click.pass_context
def queue(ctx: click.Context, name: str, output: str) -> None:
    """The pending requests queued in pool NAME, in queue order."""
    from wharf.cli.output import emit
    from wharf.cli.request_view import QueueRow

    with open_rm(ctx) as rm:
        name = find_pool(rm, name).name
        entries = rm.pools.queue(name)
    if output == "json":
        echo_json(entries)
        return
    if not entries:
        click.echo(f"No requests wait in pool '{name}'.")
        return
    rows = [QueueRow.of(entry) for entry in entries]
    columns = ("position", "id", "requester", "demands", "created_at", "reason")
    emit(rows, columns, output, title=f"Queue of pool '{name}'")


# ----------------------------------------------------------------------------- rendering


def _classes_text(res: Resources, pool: Pool) -> str:
    parts = []
    for item in pool.classes:
        quantities = ", ".join(res.show(r, q) for r, q in sorted(item.capacity.items()))
        parts.append(f"{item.name}: {quantities}")
    return "; ".join(parts)


def _row(res: Resources, pool: Pool) -> Any:
    from wharf.cli.request_view import Row

    return Row(
        name=pool.name,
        rank=pool.rank,
        classes=_classes_text(res, pool),
        concurrency_limit=pool.concurrency_limit,
        fair_sharing=pool.fair_sharing,
        id=str(pool.id),
    )


def _show(rm: Any, pool: Pool, output: str) -> None:
    from wharf.cli.output import emit

    if output == "json":
        echo_json(pool)
        return
    res = resources(rm)
    keys = ("name", "id", "rank", "concurrency_limit", "fair_sharing", "attributes")
    echo_fields((key, getattr(pool, key)) for key in keys)
    rows = []
    for item in pool.classes:
        for resource, quantity in sorted(item.capacity.items()):
            rows.append(_class_row(item.name, item.rank, item.reclaimable, resource, res, quantity))
    emit(rows, ("class", "rank", "reclaimable", "resource", "capacity"), output)


def _allocations(rm: Any, held: list[PoolAllocation], output: str) -> None:
    """The pool's current allocations, one row per request and class (or a line saying none)."""
    from wharf.cli.output import emit
    from wharf.cli.request_view import Row, requester_of

    if not held:
        click.echo("No current allocations.")
        return
    policies = {p.id: p.name for p in rm.policies.list()}
    rows = [
        Row.model_validate(
            {
                "request": str(a.request_id),
                "status": a.request_status.value,
                "requester": requester_of(a.requester, a.metadata),
                "class": a.class_name,
                "resource": a.resource,
                "quantity": f"{a.quantity} {a.unit}",
                "policy": policies.get(a.policy_id, str(a.policy_id)),
                "allocated_at": a.allocated_at,
            }
        )
        for a in held
    ]
    columns = ("request", "status", "requester", "class", "resource", "quantity", "policy")
    emit(rows, (*columns, "allocated_at"), output, title="Current allocations")


def _class_row(
    name: str, rank: int, reclaimable: Any, resource: str, res: Resources, quantity: int | None
) -> Any:
    from wharf.cli.request_view import Row

    return Row.model_validate(
        {
            "class": name,
            "rank": rank,
            "reclaimable": reclaimable.value,
            "resource": resource,
            "capacity": res.show(resource, quantity),
        }
    )


rm_command_options(pool)
