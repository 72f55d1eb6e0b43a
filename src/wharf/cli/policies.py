"""``wharf policy create | list | show | update | delete``.

A policy admits requests whose subjects match its selector (:func:`_selector`) to one pool, with
grants per class (:func:`_apply_grants`). Fields come inline or from a file (``-f policy.yaml``,
the API's policy body; inline options are applied on top of it), and ``update`` changes only
what is given. The RM refuses a policy whose reserved shares would exceed a class's capacity.
``list`` pages as every list does (``--page``/``--size``), here: the RM sends every policy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wharf.cli.output import OUTPUT_OPTION, paged
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
from wharf.cli.rm_names import find_policy
from wharf.cli.rm_quantities import Resources, check_before_asking, check_quantities

POLICY_FILE_HELP = """\b
Policy file (-f FILE): YAML holding the policy's fields; options given as well are applied
on top of it. Quantities are written as in a pool file ("2", "64CPU", "512GiB").

\b
  name: research            # needed unless NAME is given
  pool: gpus                # needed unless --pool is given (an id or a name)
  subject_selector:         # whom it admits; all / any / not combine selectors
    any:
      - {subject_type: account, subject_id: alice}
      - {subject_type: project, attributes: {name: vision}}
  priority: 10              # higher is queued first and may preempt lower (default 0)
  concurrency_limit: 4      # most requests allocated at once
  fair_share_weight: 2      # its share's weight in a pool with fair sharing (default 1)
  grants:                   # none at all: every class, nothing reserved
    - class: h100
      resources: {GPU: {reserved: 2, limit: 6}}
    - class: spot           # a grant without figures: the class, nothing reserved
"""
"""The policy file's format with an example, as ``policy create --help`` and ``update --help``
print it (the example is created by a test exactly as printed, on the pool file's example)."""

if TYPE_CHECKING:
    from wharf.resource_manager.domain import Policy


def _policy_options(func: Any) -> Any:
    options = [
        click.option("--pool", help="The pool (id or name) the policy admits to."),
        click.option(
            "--subject-type",
            help="The type of subject the policy matches: account, project, pipeline, "
            "pipeline_run, step_run or component (the subjects every request names).",
        ),
        click.option("--subject-id", help="The id of the subject the policy matches."),
        click.option(
            "--subject-attribute",
            multiple=True,
            metavar="KEY=VALUE",
            help="An attribute the subject must have (repeatable; all must hold).",
        ),
        click.option(
            "--selector",
            help="The whole subject selector as YAML/JSON, with all / any / not (instead of "
            "--subject-type, --subject-id and --subject-attribute).",
        ),
        click.option(
            "--priority", type=int, help="Higher is queued first and may preempt lower (default 0)."
        ),
        click.option(
            "--priority-lane/--no-priority-lane",
            default=None,
            help="Queue before everything else; may preempt normal work, is never preempted.",
        ),
        click.option("--preemption-group", help="Policies of one group never preempt each other."),
        click.option(
            "--concurrency-limit",
            type=click.IntRange(min=0),
            help="Most requests this policy may have allocated at once.",
        ),
        click.option(
            "--fair-share-weight",
            type=click.IntRange(min=1),
            help="Weight of this policy's share in a pool with fair sharing (default 1).",
        ),
        click.option(
            "--reserved",
            multiple=True,
            metavar="RESOURCE:CLASS=QTY",
            help="Amount of a class's resource kept for this policy (repeatable).",
        ),
        click.option(
            "--limit",
            "limits",
            multiple=True,
            metavar="RESOURCE:CLASS=QTY",
            help="Most of a class's resource this policy may hold, borrowing included "
            "(repeatable).",
        ),
        click.option(
            "--grant",
            "grants",
            multiple=True,
            metavar="CLASS",
            help="Let the policy use class CLASS without reserved amounts (repeatable); a "
            "policy with no grant (--grant, --reserved, --limit) may use every class.",
        ),
        click.option(
            "-f",
            "--file",
            "file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Policy fields as YAML.",
        ),
        OUTPUT_OPTION,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _scalar(text: str) -> str | int | bool:
    """``true``/``false``/integers as such (selectors compare types), anything else as text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, bool | int) else text


def _selector(options: dict[str, Any]) -> dict[str, Any] | None:
    """The subject selector: built from ``--subject-type``, ``--subject-id`` and
    ``--subject-attribute KEY=VALUE`` (all must hold on one subject), or given whole as
    YAML/JSON with ``--selector '{any: [...]}'`` (its YAML errors as a file's, with a line and
    column); None if none is given."""
    from wharf.core.errors import InputError
    from wharf.yaml_files import parse_yaml

    text = options["selector"]
    if text is not None:
        if options["subject_type"] or options["subject_id"] or options["subject_attribute"]:
            raise InputError(
                "Give --selector or --subject-type/--subject-id/--subject-attribute, not both: "
                "--selector is the whole selector."
            )
        data = parse_yaml(text, "--selector")
        if not isinstance(data, dict):
            raise InputError("--selector must be a mapping such as '{subject_type: account}'.")
        return data
    selector: dict[str, Any] = {}
    if options["subject_type"]:
        selector["subject_type"] = options["subject_type"]
    if options["subject_id"]:
        selector["subject_id"] = options["subject_id"]
    pairs = [split_assignment(t, "KEY=VALUE") for t in options["subject_attribute"]]
    if pairs:
        selector["attributes"] = {key: _scalar(value) for key, value in pairs}
    return selector or None


def _grant_list(grants: Any) -> dict[str, dict[str, Any]]:
    return entries_by_name(grants, model="policy", field="grants", names=("class", "class_name"))


def _apply_grants(
    res: Resources, grants: dict[str, dict[str, Any]], options: dict[str, Any]
) -> None:
    """Apply ``--grant``/``--reserved``/``--limit`` to ``grants`` (class -> grant), in place.

    ``--reserved gpu:h100=2 --limit gpu:h100=4`` per resource and class, ``--grant CLASS`` for a
    grant with no per-resource figures (file form: ``grants: [{class: h100, resources: {GPU:
    {reserved: 2}}}]``). On ``update`` they edit the current grants.
    """
    for grant in grants.values():  # file or current grants: resource names as the RM knows
        found = grant.get("resources")
        if isinstance(found, dict):
            grant["resources"] = {res.descriptor(k).name: v for k, v in found.items()}
    for class_name in options["grants"]:
        grants.setdefault(class_name, {"class": class_name})
    for field, option, read in _READERS:
        for text in options[option]:
            resource, class_name, quantity = read(res, text)
            grant = grants.setdefault(class_name, {"class": class_name})
            entries = dict(grant.get("resources") or {})
            entry = dict(entries.get(resource) or {})
            entry[field] = quantity
            entries[resource] = entry
            grant["resources"] = entries


def _read_share(res: Resources, text: str, field: str) -> tuple[str, str, int | None]:
    """``--reserved`` / ``--limit RESOURCE:CLASS=QTY`` -> (resource, class, base units or None
    for an unlimited limit)."""
    from wharf.core.errors import InputError

    key, value = split_assignment(text, f"RESOURCE:CLASS=QUANTITY for --{field}")
    resource, class_name = res.split_key(key)
    if class_name is None:
        raise InputError(f"--{field} needs a class: RESOURCE:CLASS=QUANTITY, got '{text}'.")
    return resource, class_name, res.quantity(resource, value, allow_unlimited=field == "limit")


def _read_reserved(res: Resources, text: str) -> tuple[str, str, int | None]:
    return _read_share(res, text, "reserved")


def _read_limit(res: Resources, text: str) -> tuple[str, str, int | None]:
    return _read_share(res, text, "limit")


_READERS = (("reserved", "reserved", _read_reserved), ("limit", "limits", _read_limit))
"""(grant field, option, reader) of the per-resource grant options."""


def _check_shares(options: dict[str, Any]) -> None:
    """Bad ``--reserved``/``--limit`` of the built-in kinds, refused before the RM is asked."""
    for _, option, read in _READERS:
        check_before_asking(options[option], read)


def _fields(options: dict[str, Any], *, name_key: str) -> dict[str, Any]:
    body = load_yaml(options["file"]) if options["file"] else {}
    from wharf.core.errors import InputError

    for key in ("priority", "priority_lane", "preemption_group", "concurrency_limit"):
        if options[key] is not None:
            body[key] = options[key]
    if body.get("priority_lane") is True and body.get("priority", 0) != 0:
        # The lane is served before every priority: a priority given with it would be stored
        # and shown as 'lane', doing nothing.
        raise InputError(
            f"Priority {body['priority']} has no effect in the priority lane (served before "
            "every priority): give --priority or --priority-lane, not both."
        )
    if options["fair_share_weight"] is not None:
        body["fair_share_weight"] = options["fair_share_weight"]
    if options.get(name_key):
        body["name"] = options[name_key]
    if options["pool"]:
        body["pool"] = options["pool"]
    selector = _selector(options)
    if selector is not None:
        body["subject_selector"] = selector
    return body


def _edits_grants(options: dict[str, Any]) -> bool:
    return bool(options["grants"] or options["reserved"] or options["limits"])


@click.group()
@rm_options
@click.pass_context
def policy(ctx: click.Context, /, **connection: str | None) -> None:
    """Manage resource policies (who may use which pool, with which shares)."""
    remember_rm(ctx, **connection)


@policy.command("create", epilog=POLICY_FILE_HELP)
@click.argument("name", required=False)
@_policy_options
@click.pass_context
def create(ctx: click.Context, /, **options: Any) -> None:
    """Create a policy NAME (or the one in -f FILE) on --pool."""
    from wharf.core.errors import InputError
    from wharf.resource_manager.contract.models import PolicyCreate
    from wharf.resource_manager.domain import load

    body = _fields(options, name_key="name")
    _check_shares(options)
    for field, how in (
        ("name", "a NAME"),
        ("pool", "--pool"),
        ("subject_selector", "--subject-type, --subject-id, --subject-attribute or --selector"),
    ):
        if field not in body:
            raise InputError(f"A policy needs {how} (or {field} in -f FILE).")
    with open_rm(ctx) as rm:
        grants = _grant_list(body.get("grants"))
        _apply_grants(resources(rm), grants, options)
        body["grants"] = list(grants.values())
        spec = load(PolicyCreate, body)
        check_quantities(
            (resource, value)
            for grant in spec.grants
            for resource, entry in grant.resources.items()
            for value in (entry.reserved, entry.limit, entry.default_value)
        )
        _show(rm, rm.policies.create(spec), options["output"])


@policy.command("update", epilog=POLICY_FILE_HELP)
@click.argument("name")
@_policy_options
@click.option(
    "--remove-grant", multiple=True, metavar="CLASS", help="Drop the grant of CLASS (repeatable)."
)
@click.option("--rename", help="New policy name.")
@click.pass_context
def update(ctx: click.Context, /, name: str, **options: Any) -> None:
    """Change policy NAME; only what is given changes."""
    from wharf.core.errors import InputError
    from wharf.resource_manager.contract.models import PolicyUpdate
    from wharf.resource_manager.domain import load

    if options["pool"]:
        raise InputError("A policy cannot move to another pool; create a new one.")
    body = _fields(options, name_key="rename")
    _check_shares(options)
    with open_rm(ctx) as rm:
        refuse_changes_here(rm)
        name = find_policy(rm, name).name
        if body.get("priority", 0) != 0 and "priority_lane" not in body:
            _refuse_priority_in_lane(rm.policies.get(name), body["priority"])
        if _edits_grants(options) or options["remove_grant"]:
            current = body.get("grants")
            if current is None:
                current = [_grant_body(g) for g in rm.policies.get(name).grants]
            grants = _grant_list(current)
            for class_name in options["remove_grant"]:
                if grants.pop(class_name, None) is None:
                    raise InputError(f"--remove-grant: the policy has no grant for '{class_name}'.")
            _apply_grants(resources(rm), grants, options)
            body["grants"] = list(grants.values())
        if not body:
            raise InputError("Nothing to change: give at least one option.")
        _show(rm, rm.policies.update(name, load(PolicyUpdate, body)), options["output"])


def _refuse_priority_in_lane(current: Policy, priority: int) -> None:
    """A priority given alone to a policy in the priority lane would be stored unused (the
    lane is served before every priority), as ``_fields`` refuses when both are given."""
    from wharf.core.errors import InputError

    if current.priority_lane:
        raise InputError(
            f"Policy '{current.name}' is in the priority lane (served before every priority): "
            f"priority {priority} would have no effect; give --no-priority-lane with --priority."
        )


def _grant_body(grant: Any) -> dict[str, Any]:
    data: dict[str, Any] = grant.model_dump(mode="json")
    data["class"] = data.pop("class_name")
    return data


@policy.command("list")
@click.option("--pool", help="Only the policies of this pool.")
@paged
@OUTPUT_OPTION
@click.pass_context
def list_policies(ctx: click.Context, pool: str | None, page: int, size: int, output: str) -> None:
    """List policies, by name."""
    from wharf.cli.output import emit, page_slice

    with open_rm(ctx) as rm:
        every = rm.policies.list(pool)  # the Resource Manager sends them all: paged here
        policies = page_slice(every, page, size)
        if output == "json":
            echo_json(policies)
            return
        pools = {p.id: p.name for p in rm.pools.list()}
        res = resources(rm)
    rows = [_row(res, pools, p) for p in policies]
    columns = ("name", "pool", "selector", "priority", "grants", "concurrency_limit", "id")
    hint = "`wharf policy create` makes one."
    emit(
        rows,
        columns,
        output,
        total=len(every),
        filtered=pool is not None,
        noun="policies",
        hint=hint,
    )


@policy.command("show")
@click.argument("name")
@OUTPUT_OPTION
@click.pass_context
def show(ctx: click.Context, name: str, output: str) -> None:
    """Show policy NAME (a name, id or id prefix)."""
    with open_rm(ctx) as rm:
        _show(rm, find_policy(rm, name), output)


@policy.command("delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete policy NAME."""
    with open_rm(ctx) as rm:
        refuse_changes_here(rm)
        name = find_policy(rm, name).name  # an unknown name is said before asking to confirm
        refuse_deleting_local(ctx, "policy", name)
        from wharf.cli.confirm import confirm

        confirm(f"Delete policy '{name}'?", yes=yes)
        rm.policies.delete(name)
    click.echo(f"Deleted policy '{name}'.")


# ----------------------------------------------------------------------------- rendering


def _grants_text(res: Resources, policy: Policy) -> str:
    parts = []
    for grant in policy.grants:
        figures = [
            f"{name} reserved {res.show(name, g.reserved)}"
            + ("" if g.limit is None else f" limit {res.show(name, g.limit)}")
            for name, g in sorted(grant.resources.items())
        ]
        parts.append(f"{grant.class_name}: {', '.join(figures) or 'no reservations'}")
    return "; ".join(parts) or "-"


def _row(res: Resources, pools: dict[Any, str], policy: Policy) -> Any:
    from wharf.cli.request_view import Row

    selector = policy.subject_selector.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    priority = "lane" if policy.priority_lane else policy.priority
    return Row(
        name=policy.name,
        pool=pools.get(policy.pool_id, str(policy.pool_id)),
        selector=json.dumps(selector, separators=(",", ":")),
        priority=priority,
        grants=_grants_text(res, policy),
        concurrency_limit=policy.concurrency_limit,
        id=str(policy.id),
    )


def _show(rm: Any, policy: Policy, output: str) -> None:
    if output == "json":
        echo_json(policy)
        return
    pools = {p.id: p.name for p in rm.pools.list()}
    row = _row(resources(rm), pools, policy)
    for key, value in (row.model_extra or {}).items():
        click.echo(f"{key:<18} {'-' if value is None else value}")


rm_command_options(policy)
