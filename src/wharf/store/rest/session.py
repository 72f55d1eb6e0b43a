"""Logging in and out of a workspace server (used by ``wharf login`` / ``wharf logout``)."""

from __future__ import annotations

from typing import Any

from wharf.store.rest.http import HttpSession


def login_with_password(url: str, username: str, password: str) -> str:
    """A fresh access token for the user."""
    session = HttpSession(url, None)
    try:
        body = {"username": username, "password": password}
        data = session.send("POST", "/api/v1/auth/login", body=body)
    finally:
        session.close()
    token: str = data["access_token"]
    return token


def whoami(url: str, credential: str) -> dict[str, Any]:
    """The server's view of a credential (raises ``NotAuthenticatedError`` if refused)."""
    session = HttpSession(url, credential)
    try:
        data: dict[str, Any] = session.send("GET", "/api/v1/auth/me")
    finally:
        session.close()
    return data


def logout(url: str, credential: str) -> None:
    """Revoke the user's tokens on the server (a no-op for API keys)."""
    session = HttpSession(url, credential)
    try:
        session.send("POST", "/api/v1/auth/logout")
    finally:
        session.close()
