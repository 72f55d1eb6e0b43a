"""The question a destructive command asks before acting (:func:`confirm`), skipped by its
``--yes`` option (:data:`YES_OPTION`).

Invariant: with no terminal to ask on (stdin is not a TTY: CI, cron, a pipe) and no ``--yes``,
the command is refused in one line and nothing is changed; it never waits for an answer nobody
can give.
"""

from __future__ import annotations

import sys

import click

YES_OPTION = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


def confirm(question: str, *, yes: bool) -> None:
    """Ask ``question`` (y/N) unless ``yes``; a "no" aborts (``Aborted.``), and no terminal
    raises InputError (one line, exit 1) saying to add ``--yes``."""
    if yes:
        return
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        from wharf.core.errors import InputError

        raise InputError(
            f"Not done: this asks '{question}' and there is no terminal to answer on; "
            "add --yes to confirm."
        )
    click.confirm(question, abort=True)
