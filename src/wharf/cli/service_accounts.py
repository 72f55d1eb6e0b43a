"""``wharf service-account create | list`` and ``wharf api-key create | list | revoke``:
non-human principals (CI, schedulers) of the workspace server this machine is logged in to, and
their API keys (admins).

A key's secret is printed once, at creation, on stdout (so it can be captured); the server keeps
only its hash. ``api-key revoke`` names the key by name or id; a revoked key stops working at
once, and ``revoke`` asks first unless ``--yes``. Log in with a key: ``wharf login URL --api-key
KEY`` (or ``WHARF_API_KEY``). Lists page as every list does (``--page``/``--size``).
"""

from __future__ import annotations

import click

from wharf.cli.accounts import emit_items
from wharf.cli.confirm import YES_OPTION
from wharf.cli.output import OUTPUT_OPTION, paged

API = "/api/v1"


@click.group("service-account")
def service_account() -> None:
    """Create and list service accounts (admins)."""


@service_account.command("create", short_help="Create a service account.")
@click.argument("name")
@click.option("--description", help="What the account is for.")
@click.option("--admin", is_flag=True, help="The account administers the whole server.")
def create_account(name: str, description: str | None, admin: bool) -> None:
    """Create service account NAME (then: 'wharf api-key create NAME', 'wharf project
    add-member PROJECT --service-account NAME')."""
    from wharf.cli.admin_client import session
    from wharf.core.names import account_name

    name = account_name(name, "service account")
    body = {"name": name, "description": description, "is_admin": admin}
    with session() as http:
        made = http.send("POST", f"{API}/service_accounts", body=body)
    click.echo(f"Created service account '{made['name']}' ({made['id']}).")


@service_account.command("list")
@paged
@OUTPUT_OPTION
def list_accounts(page: int, size: int, output: str) -> None:
    """List the service accounts, newest first."""
    from wharf.cli.admin_client import one_page, session

    with session() as http:
        accounts, total = one_page(http, f"{API}/service_accounts", page, size)
    columns = ("name", "is_admin", "active", "description", "created", "id")
    emit_items(accounts, columns, output, total)


@click.group("api-key")
def api_key() -> None:
    """Create, list and revoke the API keys of service accounts (admins)."""


@api_key.command("create", short_help="Make an API key for a service account.")
@click.argument("account")
@click.option("--name", "key_name", default="default", show_default=True, help="Key name.")
@OUTPUT_OPTION
def create_key(account: str, key_name: str, output: str) -> None:
    """Make an API key for service account ACCOUNT; its secret is printed once."""
    import json

    from wharf.cli.admin_client import service_account, session
    from wharf.core.errors import EntityExistsError

    with session() as http:
        found = service_account(http, account)
        try:
            made = http.send(
                "POST", f"{API}/service_accounts/{found['id']}/api_keys", body={"name": key_name}
            )
        except EntityExistsError:  # the server's message names the account by id
            raise EntityExistsError(
                f"Service account '{found['name']}' already has an API key named '{key_name}' "
                "(a revoked key keeps its name): choose another with --name."
            ) from None
    if output == "json":
        click.echo(json.dumps(made, indent=2))
        return
    click.echo(made["secret"])
    click.echo(
        f"API key '{key_name}' of service account '{found['name']}' (shown once; log in with "
        "'wharf login URL --api-key KEY').",
        err=True,
    )


@api_key.command("list", short_help="List the API keys of a service account.")
@click.argument("account")
@paged
@OUTPUT_OPTION
def list_keys(account: str, page: int, size: int, output: str) -> None:
    """List the API keys of service account ACCOUNT, newest first (names and ids, as 'revoke'
    takes them; never their secrets)."""
    from wharf.cli.admin_client import one_page, service_account, session

    with session() as http:
        found = service_account(http, account)
        path = f"{API}/service_accounts/{found['id']}/api_keys"
        keys, total = one_page(http, path, page, size)
    emit_items(keys, ("name", "created", "last_used", "revoked_at", "id"), output, total)


@api_key.command("revoke", short_help="Revoke an API key of a service account.")
@click.argument("account")
@click.argument("key")
@YES_OPTION
def revoke_key(account: str, key: str, yes: bool) -> None:
    """Revoke KEY (a key name or id) of service account ACCOUNT (asks first unless --yes)."""
    from wharf.cli.admin_client import all_items, service_account, session
    from wharf.cli.confirm import confirm
    from wharf.core.errors import EntityNotFoundError

    with session() as http:
        found = service_account(http, account)
        keys = all_items(http, f"{API}/service_accounts/{found['id']}/api_keys")
        matching = [k for k in keys if key in (k["id"], k["name"]) and not k["revoked_at"]]
        if not matching:
            raise EntityNotFoundError(
                f"Service account '{found['name']}' has no active API key '{key}'."
            )
        confirm(
            f"Revoke API key '{key}' of service account '{found['name']}' (it stops working at "
            "once)?",
            yes=yes,
        )
        for item in matching:
            http.send("POST", f"{API}/service_accounts/{found['id']}/api_keys/{item['id']}/revoke")
    click.echo(f"Revoked API key '{key}' of service account '{found['name']}'.")
