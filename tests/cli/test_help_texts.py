"""Every command of the ``wharf`` tree explains itself: options have help, arguments are named.

The tree is walked through the lazy top-level group, so a command group added to
``wharf.cli.main.COMMANDS`` is checked without touching this test.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from wharf.cli.main import cli
from wharf.core.enums import ComponentType


def walk(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None
) -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    yield " ".join(path), command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path)} lists '{name}' but cannot load it"
            yield from walk(sub, (*path, name), ctx)


COMMANDS = dict(walk(cli, ("wharf",), None))


def test_the_walk_reaches_the_whole_tree() -> None:
    for expected in ("wharf runs list", "wharf pool create", "wharf component register"):
        assert expected in COMMANDS


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_has_help_and_every_argument_is_named_in_the_help(path: str) -> None:
    command = COMMANDS[path]
    text = (command.help or "").strip()
    assert text, f"'{path}' has no help text"
    missing = [
        "/".join(p.opts)
        for p in command.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert not missing, f"'{path}': options without help: {', '.join(missing)}"
    unnamed = [
        p.human_readable_name
        for p in command.params
        if isinstance(p, click.Argument) and p.human_readable_name not in text
    ]
    assert not unnamed, f"'{path}': help does not say what {', '.join(unnamed)} is"


def test_component_register_lists_the_flavors_of_each_type() -> None:
    flavor = next(p for p in COMMANDS["wharf component register"].params if p.name == "flavor")
    text = flavor.help or ""
    for component_type in ComponentType:
        assert f"{component_type.value}: " in text, text
    assert "orchestrator: kubernetes, local, local_process" in text


def test_every_output_option_is_o_output_with_its_default_shown() -> None:
    odd = [
        path
        for path, command in COMMANDS.items()
        for p in command.params
        if isinstance(p, click.Option)
        and "--output" in p.opts
        and (sorted(p.opts) != ["--output", "-o"] or p.default != "table" or not p.show_default)
    ]
    assert not odd, f"--output differs from the other commands' in: {', '.join(odd)}"


def test_runs_list_offers_only_the_statuses_a_run_can_have() -> None:
    status = next(p for p in COMMANDS["wharf runs list"].params if p.name == "status")
    assert isinstance(status.type, click.Choice)
    run_statuses = {"initializing", "provisioning", "queued", "running", "stopping"}
    run_statuses |= {"completed", "failed", "stopped"}  # never cached, skipped, cancelled ...
    assert set(status.type.choices) == run_statuses


def test_no_group_listing_cuts_a_summary_short() -> None:
    """A group's ``--help`` lists each command with its summary (``short_help``, else the first
    sentence of its help) cut to what fits beside the names in 80 columns, as click does."""
    cut = []
    for path, group in COMMANDS.items():
        if not isinstance(group, click.Group) or path == "wharf":  # wharf lists COMMANDS' texts
            continue
        listed = {
            name: command
            for name, command in COMMANDS.items()
            if name.rpartition(" ")[0] == path and not command.hidden
        }
        width = click.Context(group, terminal_width=80).make_formatter().width
        limit = width - 6 - max(len(name.rpartition(" ")[2]) for name in listed)
        cut += [
            f"{name}: {command.get_short_help_str(limit)!r}"
            for name, command in listed.items()
            if command.get_short_help_str(limit) != command.get_short_help_str(10_000)
        ]
    assert not cut, "summaries cut short (give a short_help):\n" + "\n".join(cut)
