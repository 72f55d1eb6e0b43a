"""``wharf user create | list | update | delete`` and ``wharf project create | list | add-member |
remove-member``: administer the workspace server this machine is logged in to.

Users and projects are named by name (or id). ``user delete`` deactivates the user: their
tokens are revoked and they can no longer log in, while the runs they made are kept (a user is
never removed, so nothing they made loses its owner); ``user update NAME --active`` undoes it.
Passwords are prompted for (hidden, twice) at a terminal unless ``--password`` is given. New
names follow :func:`wharf.core.names.account_name` (checked here too, before anything is sent);
lists page as every list does (``--page``/``--size``); ``user delete`` and ``remove-member`` ask
first unless ``--yes``. With no terminal to ask on, a command that would ask is refused in one
line.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click

from wharf.cli.confirm import YES_OPTION, confirm
from wharf.cli.output import OUTPUT_OPTION, paged

API = "/api/v1"
ROLES = ("viewer", "member", "admin")


def emit_items(
    items: list[dict[str, Any]], columns: tuple[str, ...], output: str, total: int | None = None
) -> None:
    """``items`` (JSON records) as JSON or a table; ``total``: how many the whole list has (the
    table then says when a page shows fewer, as every paged list does)."""
    import json

    from wharf.cli.output import format_table, page_note

    if output == "json":
        click.echo(json.dumps(items, indent=2))
        return
    rows = [[_cell(item.get(c)) for c in columns] for item in items]
    lines = format_table(columns, rows)
    note = None if total is None else page_note(len(items), total)
    click.echo("\n".join(lines if note is None else [*lines, note]))


def _cell(value: Any) -> str:
    """A JSON value as a table cell: instants as ``2026-01-02 03:04:05`` (UTC), None as -."""
    from datetime import datetime

    if value is None:
        return "-"
    if isinstance(value, str) and len(value) >= 19 and value[10:11] == "T":
        try:
            return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
        except ValueError:
            return value
    return str(value)


def _password(given: str | None, ask: bool) -> str | None:
    """``given``, else (if ``ask``) the password typed twice at the terminal; with no terminal
    to ask on, a one-line refusal saying to give ``--password``."""
    if given is not None or not ask:
        return given
    if sys.stdin is None or not sys.stdin.isatty():
        from wharf.core.errors import InputError

        raise InputError("There is no terminal to ask for the password on: give --password.")
    text: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return text


# ----------------------------------------------------------------------------- users


@click.group()
def user() -> None:
    """Create, list, update and deactivate the users of the workspace server (admins)."""


@user.command("create")
@click.argument("name")
@click.option("--admin", is_flag=True, help="The user administers the whole workspace server.")
@click.option("--password", help="Initial password (prompted when omitted).")
@click.option("--no-password", is_flag=True, help="No password (the user logs in otherwise).")
def create_user(name: str, admin: bool, password: str | None, no_password: bool) -> None:
    """Create user NAME (letters, digits, '.', '_', '-' and '@')."""
    from wharf.cli.admin_client import session
    from wharf.core.names import account_name

    if no_password and password is not None:
        raise click.UsageError("Give --password or --no-password, not both.")
    name = account_name(name, "user")  # before the password prompt
    body = {"name": name, "is_admin": admin, "password": _password(password, not no_password)}
    with session() as http:
        made = http.send("POST", f"{API}/users", body=body)
    kind = "admin" if made["is_admin"] else "user"
    click.echo(f"Created {kind} '{made['name']}' ({made['id']}).")


@user.command("list")
@paged
@OUTPUT_OPTION
def list_users(page: int, size: int, output: str) -> None:
    """List the users, newest first."""
    from wharf.cli.admin_client import one_page, session

    with session() as http:
        users, total = one_page(http, f"{API}/users", page, size)
    emit_items(users, ("name", "is_admin", "active", "created", "id"), output, total)


@user.command("update")
@click.argument("name")
@click.option("--admin/--no-admin", default=None, help="Make the user an admin, or not.")
@click.option("--active/--inactive", default=None, help="Let the user log in, or not.")
@click.option("--password", help="New password.")
@click.option("--set-password", is_flag=True, help="Prompt for a new password.")
def update_user(
    name: str, admin: bool | None, active: bool | None, password: str | None, set_password: bool
) -> None:
    """Change user NAME; only what is given changes."""
    from wharf.cli.admin_client import session, user
    from wharf.core.errors import InputError

    if set_password and password is not None:
        raise click.UsageError("Give --password or --set-password, not both.")
    password = _password(password, set_password)
    if admin is None and active is None and password is None:
        raise InputError(
            "Nothing to change: give --admin/--no-admin, --active/--inactive or a password."
        )
    with session() as http:
        found = user(http, name)
        body = {"is_admin": admin, "active": active, "password": password}
        http.send("PATCH", f"{API}/users/{found['id']}", body=body)
    revoked = password is not None or active is False
    note = " Their logins and run tokens are revoked: they log in again." if revoked else ""
    click.echo(f"Updated user '{found['name']}'.{note}")


@user.command("delete", short_help="Deactivate a user; their runs are kept.")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def delete_user(name: str, yes: bool) -> None:
    """Deactivate user NAME: they can no longer log in; their runs are kept."""
    from wharf.cli.admin_client import session, user

    with session() as http:
        found = user(http, name)  # a user that does not exist is said before any question
        confirm(f"Deactivate user '{found['name']}' (their runs are kept)?", yes=yes)
        http.send("PATCH", f"{API}/users/{found['id']}", body={"active": False})
    click.echo(
        f"Deactivated user '{found['name']}': they can no longer log in; their runs are kept "
        f"(`wharf user update {shlex.quote(found['name'])} --active` undoes it)."
    )


# ----------------------------------------------------------------------------- projects


@click.group()
def project() -> None:
    """Create and list projects of the workspace server; manage their members."""


@project.command("create", short_help="Create a project (admins).")
@click.argument("name")
def create_project(name: str) -> None:
    """Create project NAME (admins; letters, digits, '.', '_', '-' and '@')."""
    from wharf.cli.admin_client import session
    from wharf.core.names import account_name

    name = account_name(name, "project")
    with session() as http:
        made = http.send("POST", f"{API}/projects", body={"name": name})
    click.echo(f"Created project '{made['name']}' ({made['id']}).")


@project.command("list")
@paged
@OUTPUT_OPTION
def list_projects(page: int, size: int, output: str) -> None:
    """List the projects you can see, newest first."""
    from wharf.cli.admin_client import one_page, session

    with session() as http:
        projects, total = one_page(http, f"{API}/projects", page, size)
    emit_items(projects, ("name", "created", "id"), output, total)


def _member(http: Any, user_name: str | None, account_name: str | None) -> tuple[str, str, str]:
    """(body key, id, label) of the member named by --user or --service-account."""
    from wharf.cli.admin_client import service_account, user
    from wharf.core.errors import InputError

    if (user_name is None) == (account_name is None):
        raise InputError("Name the member with exactly one of --user and --service-account.")
    if user_name is not None:
        found = user(http, user_name)
        return "user_id", found["id"], f"user '{found['name']}'"
    assert account_name is not None
    found = service_account(http, account_name)
    return "service_account_id", found["id"], f"service account '{found['name']}'"


@project.command("add-member", short_help="Give a user or service account a role.")
@click.argument("name")
@click.option("--user", "user_name", help="The user to add.")
@click.option("--service-account", "account_name", help="Or the service account to add.")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    default="member",
    show_default=True,
    help="viewer: reads; member: also runs pipelines; admin: also manages members.",
)
def add_member(name: str, user_name: str | None, account_name: str | None, role: str) -> None:
    """Give a user or service account ROLE in project NAME (or change their role)."""
    from wharf.cli.admin_client import project, session

    with session() as http:
        found = project(http, name)
        key, member_id, label = _member(http, user_name, account_name)
        http.send(
            "PUT", f"{API}/projects/{found['id']}/members", body={key: member_id, "role": role}
        )
    click.echo(f"{label[0].upper()}{label[1:]} is now {role} of project '{found['name']}'.")


@project.command("remove-member", short_help="Take a user or service account out of a project.")
@click.argument("name")
@click.option("--user", "user_name", help="The user to remove.")
@click.option("--service-account", "account_name", help="Or the service account to remove.")
@YES_OPTION
def remove_member(name: str, user_name: str | None, account_name: str | None, yes: bool) -> None:
    """Take a user or service account out of project NAME (asks first unless --yes)."""
    from wharf.cli.admin_client import all_items, project, session
    from wharf.core.errors import EntityNotFoundError

    with session() as http:
        found = project(http, name)
        key, member_id, label = _member(http, user_name, account_name)
        path = f"{API}/projects/{found['id']}/members"
        # the server's message names both by id; and one that is no member is said before asking
        missing = EntityNotFoundError(
            f"{label[0].upper()}{label[1:]} is not a member of project '{found['name']}'."
        )
        if not any(m.get(key) == member_id for m in all_items(http, path)):
            raise missing
        confirm(f"Remove {label} from project '{found['name']}'?", yes=yes)
        try:
            http.send("DELETE", path, params={key: member_id})
        except EntityNotFoundError:  # removed meanwhile
            raise missing from None
    click.echo(f"Removed {label} from project '{found['name']}'.")
