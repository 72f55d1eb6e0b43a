"""Contract: ``ensure_defaults`` creates the default admin user and project once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from wharf.store.defaults import ensure_defaults
from wharf.store.sql import SqlStore


def test_ensure_defaults_is_idempotent(backend: SqlStore) -> None:
    user, project = ensure_defaults(backend)
    assert (user.name, user.is_admin, project.name) == ("default", True, "default")
    assert ensure_defaults(backend) == (user, project)
    assert backend.users.list().total == 1 and backend.projects.list().total == 1


def test_ensure_defaults_concurrently(backend: SqlStore) -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: ensure_defaults(backend), range(4)))
    assert len(set(results)) == 1
    assert backend.users.list().total == 1 and backend.projects.list().total == 1
