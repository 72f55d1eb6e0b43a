"""Logging in and out of a workspace server (used by ``wharf login`` / ``wharf logout``), and
who a credential is. A login refused by something that is not a workspace server says so."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from wharf.core.errors import InputError, StoreUnavailableError, WharfError
from wharf.core.url_credentials import mask_credentials
from wharf.store.rest.errors import NotAuthenticatedError
from wharf.store.rest.http import HttpSession


def login_with_password(url: str, username: str, password: str) -> str:
    """A fresh access token for the user."""
    session = HttpSession(url, None)
    try:
        body = {"username": username, "password": password}
        with _on_a_workspace_server(session):
            data = session.send("POST", "/api/v1/auth/login", body=body)
    finally:
        session.close()
    token: str = data["access_token"]
    return token


def whoami(url: str, credential: str) -> dict[str, Any]:
    """The server's view of a credential (raises ``NotAuthenticatedError`` if refused)."""
    session = HttpSession(url, credential)
    try:
        with _on_a_workspace_server(session):
            return current_principal(session)
    finally:
        session.close()


@contextmanager
def _on_a_workspace_server(session: HttpSession) -> Iterator[None]:
    """Refusals as they are (refused credentials without the advice to log in: this is the
    login), unless what answered is no workspace server (another program, the Resource
    Manager, a URL with a path): then an ``InputError`` saying so, as its refusals (404, 401
    without a login route, 501) would only mislead. Asked only once refused."""
    try:
        yield
    except StoreUnavailableError:
        raise
    except WharfError as exc:
        try:
            health = session.send("GET", "/health/live")
        except WharfError:
            health = None
        if isinstance(health, dict) and "version" in health:
            if isinstance(exc, NotAuthenticatedError):
                raise NotAuthenticatedError(f"{exc.detail} (server {session.shown_url})") from None
            raise
        raise InputError(
            f"No Wharf workspace server answers at {session.shown_url}: give the URL 'wharf server "
            "serve' prints, such as http://HOST:8237 (no /api/v1)."
        ) from None


def current_principal(http: HttpSession) -> dict[str, Any]:
    """Who the session's credential is: ``kind`` (user / service_account), ``id``, ``name``,
    ``is_admin``, ``run_id`` (run tokens) and ``projects`` (project id -> role)."""
    data: dict[str, Any] = http.send("GET", "/api/v1/auth/me")
    return data


def logout(url: str, credential: str) -> None:
    """Revoke the user's tokens on the server (an API key is refused: `wharf api-key revoke`)."""
    session = HttpSession(url, credential)
    try:
        session.send("POST", "/api/v1/auth/logout")
    finally:
        session.close()


def visible_project(url: str, credential: str, name: str) -> dict[str, Any]:
    """The project named ``name`` as the credential sees it; ``InputError`` if it does not
    exist or the credential's principal is not a member (the server does not tell which)."""
    from wharf.core.errors import EntityNotFoundError, InputError

    session = HttpSession(url, credential)
    try:
        data: dict[str, Any] = session.send(
            "GET", "/api/v1/projects/by-name", params={"name": name}
        )
    except EntityNotFoundError:
        raise InputError(
            f"Project '{name}' does not exist on the server at {mask_credentials(url)}, or you "
            "are not a member of it."
        ) from None
    finally:
        session.close()
    return data


def member_projects(url: str, credential: str, limit: int = 20) -> tuple[list[str], int]:
    """The names of (up to ``limit``) the projects the credential sees, oldest first, and
    how many it sees in all."""
    session = HttpSession(url, credential)
    try:
        data: dict[str, Any] = session.send(
            "GET", "/api/v1/projects", params={"size": limit, "sort": "asc"}
        )
    finally:
        session.close()
    return [item["name"] for item in data["items"]], int(data["total"])
