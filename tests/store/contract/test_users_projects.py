"""Contract: users and projects (unique names, lookups, errors)."""

from __future__ import annotations

import uuid
from datetime import UTC

import pytest

from tests.conftest import FakeClock
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.store.sql import SqlStore


def test_create_and_get_user(backend: SqlStore, clock: FakeClock) -> None:
    user = backend.users.create("alice", is_admin=True)
    assert user.name == "alice" and user.is_admin
    assert user.created == clock.now and user.created.tzinfo is UTC
    assert backend.users.get(user.id) == user
    assert backend.users.get_by_name("alice") == user
    assert backend.users.create("bob").is_admin is False


def test_user_errors(backend: SqlStore) -> None:
    backend.users.create("alice")
    with pytest.raises(EntityExistsError, match="user named 'alice' already exists"):
        backend.users.create("alice")
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError) as info:
        backend.users.get(missing)
    assert str(info.value) == f"No user with id {missing}."
    with pytest.raises(EntityNotFoundError, match="No user named 'nobody'"):
        backend.users.get_by_name("nobody")
    with pytest.raises(InputError):
        backend.users.create("x" * 256)
    with pytest.raises(InputError):
        backend.users.create("")


def test_names_are_case_sensitive_and_unicode(backend: SqlStore) -> None:
    # MySQL's default collations are case-insensitive; the store's must not be.
    lower = backend.users.create("alice")
    upper = backend.users.create("Alice")
    assert lower.id != upper.id
    assert backend.users.get_by_name("Alice") == upper
    # a letter outside the BMP (4 bytes in UTF-8, as an emoji): the server's account name rule
    # (wharf.core.names.account_name) takes letters, not symbols
    name = "proj-ünïcødé-\U0002000b"
    assert backend.projects.get_by_name(backend.projects.create(name).name).name == name


def test_create_and_get_project(backend: SqlStore) -> None:
    project = backend.projects.create("research")
    assert backend.projects.get(project.id) == project
    assert backend.projects.get_by_name("research") == project
    with pytest.raises(EntityExistsError, match="project named 'research'"):
        backend.projects.create("research")
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No project with id {missing}"):
        backend.projects.get(missing)
    with pytest.raises(EntityNotFoundError, match="No project named 'x'"):
        backend.projects.get_by_name("x")


def test_list_users_and_projects(backend: SqlStore) -> None:
    users = [backend.users.create(f"u{i}") for i in range(3)]
    projects = [backend.projects.create(f"p{i}") for i in range(2)]
    assert backend.users.list().items == list(reversed(users))
    assert backend.projects.list().total == 2
    assert [p.name for p in backend.projects.list().items] == [p.name for p in projects[::-1]]
