"""``wharf login URL`` and ``wharf logout``: connect this machine's SDK and CLI to a server.

``login`` checks the credentials with the server, then stores the URL, the credential (an
access token from a password login, or the API key) and, with ``--project`` (or when the
principal is no member of the default project but of exactly one other), the project in the
user config file, where the store selection (``open_store``) finds them; ``WHARF_SERVER_URL``,
``WHARF_API_KEY`` and ``WHARF_PROJECT`` override them. Invariant: a stored project belongs to
the stored server: logging in to another server, or ``logout``, forgets it.
"""

from __future__ import annotations

import click
from click.core import ParameterSource


@click.command("login")
@click.argument("url")
@click.option("--username", "-u", help="Log in with this user's password (prompted).")
@click.option(
    "--password", help="The password (prompted when omitted; without a terminal, read from stdin)."
)
@click.option("--api-key", envvar="WHARF_API_KEY", help="Log in with a service account's API key.")
@click.option("--project", help="Work in this project (default: the default project).")
def login(
    url: str,
    username: str | None,
    password: str | None,
    api_key: str | None,
    project: str | None,
) -> None:
    """Log in to the Wharf server at URL, with a user's password or a service account's API
    key (--api-key, else WHARF_API_KEY unless --username or --password is given)."""
    from wharf.config.global_config import load_config, read_user_config, write_user_config
    from wharf.core.server_urls import check_base_url
    from wharf.core.url_credentials import mask_credentials
    from wharf.store.rest.session import login_with_password, visible_project, whoami

    url = url.rstrip("/")
    check_base_url(url, "Wharf server")  # before the prompts, not after them
    source_of = click.get_current_context().get_parameter_source
    source = source_of("api_key")
    if api_key is not None and not api_key.strip() and source is ParameterSource.COMMANDLINE:
        # an empty key ("$KEY" of an unset variable) would silently turn into a password login
        raise click.BadParameter("is empty.", param_hint="'--api-key'")
    if api_key and (username is not None or password is not None):
        if source is ParameterSource.COMMANDLINE:
            raise click.UsageError("Give either --api-key or --username/--password, not both.")
        api_key = None  # a WHARF_API_KEY left in the environment: the user named wins
        click.echo(
            "Note: WHARF_API_KEY is set in this environment: commands run here use it, not "
            "this login, until it is unset.",
            err=True,
        )
    if password == "" and source_of("password") is ParameterSource.COMMANDLINE:
        raise click.BadParameter("is empty.", param_hint="'--password'")  # not "no terminal"
    if api_key:
        credential = api_key
    else:
        username, password = _asked(username, password)
        credential = login_with_password(url, username, password)
    me = whoami(url, credential)
    if project is not None:
        visible_project(url, credential, project)
    config = load_config()
    updates: dict[str, str | None] = {"server_url": url, "api_key": credential}
    kept = read_user_config(config.home).get("server_url") == url  # its project still holds
    where = f", project '{project}'" if project else ""
    if project is None and not kept:
        updates["project"] = None  # a project of another server
        if config.project is None:  # nor WHARF_PROJECT: the default project, if a member
            project, where = _project_for(url, credential)
    if project is not None:
        updates["project"] = project
    write_user_config(config.home, updates)
    kind = "service account" if me.get("kind") == "service_account" else "user"
    click.echo(f"Logged in to {mask_credentials(url)} as {kind} '{me.get('name')}'{where}.")


def _project_for(url: str, credential: str) -> tuple[str | None, str]:
    """The project to work in when none is named: None (the default project) if the
    credential's principal is a member of it; else its only project, if it has one (and the
    words that say so); else None, with a note on stderr saying what to do."""
    import shlex

    from wharf.core.errors import InputError
    from wharf.core.url_credentials import mask_credentials
    from wharf.store.defaults import DEFAULT_PROJECT
    from wharf.store.rest.session import member_projects, visible_project

    try:
        visible_project(url, credential, DEFAULT_PROJECT)
        return None, ""
    except InputError:
        pass
    names, total = member_projects(url, credential)
    if total == 1:
        return names[0], f", project '{names[0]}' (your only project)"
    if total == 0:
        note = (
            "you are not a member of any project yet: a project admin adds you with "
            "`wharf project add-member PROJECT --user NAME`."
        )
    else:
        more = ", …" if total > len(names) else ""
        again = f"wharf login {shlex.quote(mask_credentials(url))} --project NAME"
        note = (
            f"you are not a member of project '{DEFAULT_PROJECT}': choose one of yours "
            f"({', '.join(names)}{more}) with `{again}`."
        )
    click.echo(f"Note: {note}", err=True)
    return None, ""


def _asked(username: str | None, password: str | None) -> tuple[str, str]:
    """The username and password, prompted for on a terminal. With none (CI, a pipe), the
    password is the first line of stdin (read without a prompt), and what is still missing is
    refused in one line saying how to give it: nobody can answer a prompt there."""
    import sys

    stdin = sys.stdin
    if stdin is not None and stdin.isatty():
        username = username or click.prompt("Username")
        return username, password or click.prompt("Password", hide_input=True)
    from wharf.core.errors import InputError

    if not username:
        raise InputError(
            "No terminal to ask the username on: give --username NAME (and --password PASSWORD "
            "or the password on stdin), or --api-key KEY (or WHARF_API_KEY) for a service account."
        )
    if not password:
        password = (stdin.readline() if stdin is not None else "").rstrip("\r\n")
    if not password:
        raise InputError(
            "No terminal to ask the password on: give --password PASSWORD, or the password as "
            "the first line of stdin (e.g. wharf login URL -u NAME < password-file)."
        )
    return username, password


@click.command("logout")
def logout() -> None:
    """Forget the server credentials (and revoke a user's tokens on the server)."""
    from wharf.config.global_config import load_config, read_user_config, write_user_config
    from wharf.core.errors import PermissionDeniedError, WharfError
    from wharf.core.url_credentials import mask_credentials

    home = load_config().home
    saved = read_user_config(home)
    url, credential = saved.get("server_url"), saved.get("api_key")
    still_valid = ""
    if url and credential:
        from wharf.store.rest.session import logout as revoke  # with httpx: only to revoke

        try:
            revoke(str(url), str(credential))
        except PermissionDeniedError as refusal:  # an API key: the server says how it ends
            still_valid = f" Forgotten here only: {refusal}"
        except WharfError:  # the server may be gone or the token expired: forgetting is enough
            pass
    write_user_config(home, {"server_url": None, "api_key": None, "project": None})
    click.echo(
        f"Logged out of {mask_credentials(str(url))}.{still_valid}" if url else "Not logged in."
    )
