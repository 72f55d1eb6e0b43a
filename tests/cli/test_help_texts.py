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
