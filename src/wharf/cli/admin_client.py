"""What the workspace administration commands (``wharf user``, ``project``, ``service-account``,
``api-key``) share: the session to the server this machine is logged in to, and finding users,
projects and service accounts by name (or id); a name that matches none is refused with the
close names among those the caller may list.

Invariant: these commands only ever talk to a workspace server (``wharf login`` /
``WHARF_SERVER_URL``); without one they fail with one line saying how to log in, and send
nothing. The server decides who may do what (admins, project admins).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from wharf.core.errors import EntityNotFoundError, InputError, WharfError
from wharf.core.suggestions import did_you_mean
from wharf.store.rest.http import HttpSession

API = "/api/v1"
PAGE_SIZE = 1000


@contextmanager
def session() -> Iterator[HttpSession]:
    """The logged-in workspace server's HTTP session, closed afterwards."""
    from wharf.config.global_config import load_config

    config = load_config()
    if not config.server_url:
        raise InputError(
            "Not logged in to a workspace server: run 'wharf login URL' (or set "
            "WHARF_SERVER_URL and WHARF_API_KEY) as an administrator first."
        )
    http = HttpSession(config.server_url, config.api_key)
    try:
        yield http
    finally:
        http.close()


def _uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


def user(http: HttpSession, name: str) -> dict[str, Any]:
    """The user named ``name`` (or with that id)."""
    user_id = _uuid(name)
    if user_id is not None:
        found: dict[str, Any] = http.send("GET", f"{API}/users/{user_id}")
        return found
    try:
        found = http.send("GET", f"{API}/users/by-name", params={"name": name})
    except EntityNotFoundError as missing:
        raise _hinted(missing, http, name, "users") from None
    return found


def project(http: HttpSession, name: str) -> dict[str, Any]:
    """The project named ``name`` (or with that id)."""
    project_id = _uuid(name)
    if project_id is not None:
        found: dict[str, Any] = http.send("GET", f"{API}/projects/{project_id}")
        return found
    try:
        found = http.send("GET", f"{API}/projects/by-name", params={"name": name})
    except EntityNotFoundError as missing:
        raise _hinted(missing, http, name, "projects") from None
    return found


def _hinted(missing: EntityNotFoundError, http: HttpSession, name: str, kind: str) -> Exception:
    """``missing`` with the close names among the ``kind`` (a list route) the caller may list
    (``; did you mean 'x'?``); as it was when none is close or the list is refused."""
    try:
        names = [item["name"] for item in all_items(http, f"{API}/{kind}")]
    except WharfError:
        return missing
    hint = did_you_mean(name, names)
    return EntityNotFoundError(f"{str(missing).removesuffix('.')}{hint}") if hint else missing


def all_items(http: HttpSession, path: str) -> list[dict[str, Any]]:
    """Every item of a paged list route."""
    items: list[dict[str, Any]] = []
    index = 1
    while True:
        page = http.send("GET", path, params={"index": index, "size": PAGE_SIZE})
        items.extend(page["items"])
        if len(items) >= page["total"] or not page["items"]:
            return items
        index += 1


def one_page(
    http: HttpSession, path: str, page: int, size: int
) -> tuple[list[dict[str, Any]], int]:
    """Page ``page`` of ``size`` items of a paged list route (newest first), and the total."""
    found = http.send("GET", path, params={"index": page, "size": size})
    return found["items"], found["total"]


def service_account(http: HttpSession, name: str) -> dict[str, Any]:
    """The service account named ``name`` (or with that id)."""
    account_id = _uuid(name)
    if account_id is not None:
        found: dict[str, Any] = http.send("GET", f"{API}/service_accounts/{account_id}")
        return found
    accounts = all_items(http, f"{API}/service_accounts")
    for account in accounts:
        if account["name"] == name:
            return account
    hint = did_you_mean(name, [account["name"] for account in accounts]) or "."
    raise EntityNotFoundError(f"No service account named '{name}'{hint}")
