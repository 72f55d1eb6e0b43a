"""Entry point of the ``wharf`` command: :func:`main`, the :class:`LazyGroup` of sub-command
groups listed in :data:`COMMANDS`.

Invariants: ``wharf --help`` loads neither the engine nor SQLAlchemy (groups are imported only when
invoked), and no group's help loads pydantic or the store (``tests/cli/test_cli_imports.py``).
Every ``WharfError`` (and invalid input) is printed as one line on stderr with exit code 1, never
a traceback (a server's refusal of no credential at all says how to log in; wording it imports
nothing where no server was asked); a usage error is one line too (exit code 2). A value the
message quotes is escaped and shortened (:mod:`wharf.cli.error_text`). Ctrl-C ends any command
with exit code 130 and no message.
"""

from __future__ import annotations

import gc
import importlib
import sys
import warnings
from typing import Any

import click

from wharf import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "runs": ("wharf.cli.runs:runs", "Inspect and stop pipeline runs."),
    "steps": ("wharf.cli.steps:steps", "Inspect the step runs of a run."),
    "pipelines": ("wharf.cli.pipelines:pipelines", "List pipelines."),
    "artifacts": (
        "wharf.cli.artifacts:artifacts",
        "List artifacts and their versions; load a version's value.",
    ),
    "stack": ("wharf.cli.stacks:stack", "Register, list, show, choose and delete stacks."),
    "component": (
        "wharf.cli.components:component",
        "Register, list, update and delete stack components.",
    ),
    "server": ("wharf.cli.server:server", "Run the workspace server (serve, up, down, status)."),
    "login": ("wharf.cli.auth:login", "Log in to a Wharf server."),
    "logout": ("wharf.cli.auth:logout", "Forget the Wharf server credentials."),
    "resource-manager": (
        "wharf.cli.resource_manager:resource_manager",
        "Run the Resource Manager server; make its credentials.",
    ),
    "pool": ("wharf.cli.pools:pool", "Create, list, show, update, delete pools; see a queue."),
    "resource": (
        "wharf.cli.resource_descriptors:resource",
        "Register, list, show and delete the resources pools offer.",
    ),
    "policy": ("wharf.cli.policies:policy", "Create, list, show, update, delete policies."),
    "request": (
        "wharf.cli.requests:request",
        "List, show, release, cancel and explain resource requests.",
    ),
    "schedule": (
        "wharf.cli.schedules:schedule",
        "List, show, pause, resume and delete pipeline schedules.",
    ),
    "user": ("wharf.cli.accounts:user", "Administer the workspace server's users."),
    "project": ("wharf.cli.accounts:project", "Create and list projects; manage members."),
    "service-account": (
        "wharf.cli.service_accounts:service_account",
        "Create and list service accounts.",
    ),
    "api-key": (
        "wharf.cli.service_accounts:api_key",
        "Create, list and revoke service account keys.",
    ),
}

INTERRUPTED = 130
"""The exit code of a command the user interrupted (Ctrl-C), as a shell and a pipeline's own
process report it."""

SHORT_LIVED = frozenset(
    {"runs", "steps", "pipelines", "artifacts", "stack", "component", "pool", "policy", "request"}
    | {"resource"}
    | {"schedule", "login", "logout", "user", "project", "service-account", "api-key"}
)
"""Groups whose commands all end within seconds: they run without the garbage collector."""


class LazyGroup(click.Group):
    """The ``wharf`` group: a sub-command group is imported by its import string only when
    invoked. Invoking one turns the garbage collector back on unless it is in
    :data:`SHORT_LIVED`, and holds library loggers that log every HTTP request (httpx,
    httpcore) at WARNING, so no command's output is padded with request lines."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if cmd_name not in SHORT_LIVED:
            gc.enable()
        from wharf.config.library_logs import quiet_library_loggers  # not for ``--help``

        quiet_library_loggers()
        module, _, attr = entry[0].partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="wharf")
def cli() -> None:
    """Wharf: ML pipelines on shared, scarce compute."""


def main(argv: list[str] | None = None) -> Any:
    """Run the ``wharf`` command with ``argv`` (None: the process's arguments).

    The cyclic garbage collector is off while the commands in :data:`SHORT_LIVED` run (imports
    create many objects and almost no garbage, yet trigger many collections). ``main()`` without
    arguments (the process's entry point) leaves it off until exit; ``main(argv)`` called inside
    another program restores its state.
    """
    collecting = gc.isenabled()
    gc.disable()  # LazyGroup turns it back on unless SHORT_LIVED
    try:
        return _run(argv)
    finally:
        if argv is not None and collecting:
            gc.enable()
        elif argv is not None:
            gc.disable()


def _run(argv: list[str] | None) -> Any:
    from wharf.cli.error_text import one_line_values
    from wharf.core.errors import WharfError

    # A password prompt with no terminal (CI, a piped password) says "Warning: Password input
    # may be echoed." itself; Python's GetPassWarning would repeat it with a source line.
    warnings.filterwarnings("ignore", message="Can not control echo on the terminal")
    try:
        return cli.main(args=argv, prog_name="wharf", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):  # Ctrl-C
            if exc.__cause__ is None:  # at a prompt: end its line (click did, elsewhere)
                click.echo(err=True)
            sys.exit(INTERRUPTED)
        click.echo("Aborted.", err=True)  # a prompt's input ended (EOF)
        sys.exit(1)
    except click.UsageError as exc:
        if _is_help(exc):  # a group called without a command: its help, as click prints it
            exc.show()
        else:
            click.echo(f"Error: {one_line_values(usage_error_line(exc))}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"Error: {one_line_values(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except WharfError as exc:
        click.echo(f"Error: {one_line_values(_not_logged_in(exc) or str(exc))}", err=True)
        sys.exit(1)
    except ValueError as exc:  # pydantic validation of user input
        click.echo(f"Error: {one_line_values(_one_line(exc))}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:  # outside click's own handling (e.g. while a group is imported)
        sys.exit(INTERRUPTED)


def _not_logged_in(exc: Exception) -> str | None:
    """How to log in, for the workspace server's refusal of a request sent with no credential
    (``WHARF_SERVER_URL`` set, no API key or login): the server's own words name the
    ``Authorization`` header, which a CLI user never sends by hand. None for any other error."""
    if "wharf.store.rest.errors" not in sys.modules:  # no server was asked: not its refusal
        return None  # (importing it would import the REST store and httpx for every error)
    from wharf.core.errors import WharfError
    from wharf.store.rest.errors import NotAuthenticatedError

    if not isinstance(exc, NotAuthenticatedError):
        return None
    from wharf.config.global_config import load_config

    try:
        config = load_config()
    except WharfError:
        return None
    from wharf.core.url_credentials import mask_credentials

    url = mask_credentials((config.server_url or "").rstrip("/"))
    if not url or config.api_key or f"(server {url}; " not in str(exc):
        return None  # a refused credential, or another server's refusal: its words
    return (
        f"Not logged in to {url}: run 'wharf login {url}' (a user's password, or --api-key KEY "
        "for a service account), or set WHARF_API_KEY."
    )


def usage_error_line(exc: click.UsageError) -> str:
    """A usage error as one line: an unknown command names the closest ones, any other error
    says where the help is (click would print the usage and a blank line first)."""
    ctx = exc.ctx
    help_hint = f" Try '{ctx.command_path} --help'." if ctx is not None else ""
    name = _unknown_command(exc)
    if name is None or ctx is None or not isinstance(ctx.command, click.Group):
        message = exc.format_message()
        ended = message.endswith((".", "!", "?"))  # click's 'unexpected extra argument (b)'
        return f"{message}{'' if ended else '.'}{help_hint}"
    import difflib

    known = ctx.command.list_commands(ctx)
    close = difflib.get_close_matches(name, known, n=3)
    if not close:
        return f"No such command '{name}'.{help_hint}"
    options = " or ".join(f"'{c}'" for c in close)
    return f"No such command '{name}'. Did you mean {options}?"


def _is_help(exc: click.UsageError) -> bool:
    no_args_is_help = getattr(click.exceptions, "NoArgsIsHelpError", None)  # click >= 8.2
    return no_args_is_help is not None and isinstance(exc, no_args_is_help)


def _unknown_command(exc: click.UsageError) -> str | None:
    name = getattr(exc, "command_name", None)  # click >= 8.4 (NoSuchCommand)
    if isinstance(name, str):
        return name
    prefix = "No such command '"
    if exc.message.startswith(prefix) and exc.message.endswith("'."):
        return exc.message[len(prefix) : -2]
    return None


def _one_line(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        from wharf.core.validation import describe_validation_error

        return describe_validation_error(exc)
    return " ".join(str(exc).split())


if __name__ == "__main__":
    main()
