"""Contract of the account repositories (credentials, service accounts, API keys, memberships)
on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import FakeClock
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.store.account_models import ProjectRole
from wharf.store.models import PageRequest
from wharf.store.sql import SqlStore
from wharf.store.sql.server_stores import SqlAccountStore

DIGEST = "a" * 64


@pytest.fixture
def accounts(backend: SqlStore) -> SqlAccountStore:
    return SqlAccountStore(backend._db)


def test_credentials(backend: SqlStore, accounts: SqlAccountStore) -> None:
    user = backend.users.create("alice")
    credentials = accounts.credentials
    with pytest.raises(EntityNotFoundError, match="has no credentials"):
        credentials.get(user.id)
    with pytest.raises(EntityNotFoundError, match="No user with id"):
        credentials.set_password(uuid.uuid4(), "h")
    created = credentials.set_password(user.id, "hash-1")
    assert (created.password_hash, created.active, created.token_generation) == ("hash-1", True, 0)
    assert credentials.revoke_tokens(user.id).token_generation == 1
    assert credentials.revoke_tokens(user.id).token_generation == 2
    assert credentials.set_active(user.id, False).active is False
    linked = credentials.link_external(user.id, "ext-1")
    assert credentials.get_by_external_id("ext-1") == linked == credentials.get(user.id)
    assert (linked.password_hash, linked.token_generation, linked.active) == ("hash-1", 2, False)
    bob = backend.users.create("bob")
    with pytest.raises(EntityExistsError, match="ext-1"):
        credentials.link_external(bob.id, "ext-1")
    with pytest.raises(InputError):
        credentials.link_external(bob.id, "")
    with pytest.raises(EntityNotFoundError):
        credentials.get_by_external_id("ext-2")
    assert credentials.set_admin(bob.id, True).is_admin
    assert backend.users.get(bob.id).is_admin
    credentials.set_password(bob.id, "hash-2")
    never = backend.users.create("carol")  # no credential row: not deactivated
    assert credentials.deactivated([user.id, bob.id, never.id, uuid.uuid4()]) == {user.id}
    assert credentials.deactivated([]) == set()


def test_service_accounts_and_keys(accounts: SqlAccountStore, clock: FakeClock) -> None:
    account = accounts.service_accounts.create("ci", description="builds", is_admin=True)
    assert accounts.service_accounts.get(account.id) == account
    assert accounts.service_accounts.get_by_name("ci") == account
    with pytest.raises(EntityExistsError):
        accounts.service_accounts.create("ci")
    assert accounts.service_accounts.set_active(account.id, False).active is False
    assert accounts.service_accounts.list(PageRequest()).total == 1

    keys = accounts.api_keys
    key = keys.create(account.id, "k1", DIGEST)
    with pytest.raises(EntityExistsError):
        keys.create(account.id, "k1", DIGEST)
    with pytest.raises(EntityNotFoundError, match="service account"):
        keys.create(uuid.uuid4(), "k", DIGEST)
    with pytest.raises(InputError):
        keys.create(account.id, "k2", "short")
    found = keys.get_for_auth(key.id)
    assert (found.key, found.key_hash, found.account.name) == (key, DIGEST, "ci")
    assert found.account.active is False

    keys.touch(key.id, 60)
    used = keys.get(key.id).last_used
    assert used == clock.now
    clock.advance(30)
    keys.touch(key.id, 60)
    assert keys.get(key.id).last_used == used  # within the interval: not rewritten
    clock.advance(31)
    keys.touch(key.id, 60)
    assert keys.get(key.id).last_used == clock.now

    revoked = keys.revoke(key.id)
    assert revoked.revoked and keys.revoke(key.id).revoked_at == revoked.revoked_at
    assert [k.id for k in keys.list(account.id).items] == [key.id]
    with pytest.raises(EntityNotFoundError):
        keys.revoke(uuid.uuid4())


def test_memberships(backend: SqlStore, accounts: SqlAccountStore) -> None:
    a, b = backend.projects.create("a"), backend.projects.create("b")
    user = backend.users.create("alice")
    robot = accounts.service_accounts.create("robot")
    members = accounts.memberships
    first = members.set_role(a.id, ProjectRole.VIEWER, user_id=user.id)
    changed = members.set_role(a.id, ProjectRole.MEMBER, user_id=user.id)
    assert changed.id == first.id and changed.role is ProjectRole.MEMBER
    members.set_role(b.id, ProjectRole.ADMIN, user_id=user.id)
    members.set_role(a.id, ProjectRole.VIEWER, service_account_id=robot.id)
    assert members.roles_of(user_id=user.id) == {a.id: ProjectRole.MEMBER, b.id: ProjectRole.ADMIN}
    assert members.role_of(a.id, service_account_id=robot.id) is ProjectRole.VIEWER
    assert members.role_of(b.id, service_account_id=robot.id) is None
    assert members.list(a.id).total == 2
    with pytest.raises(InputError, match="exactly one"):
        members.set_role(a.id, ProjectRole.VIEWER)
    with pytest.raises(InputError, match="exactly one"):
        members.role_of(a.id, user_id=user.id, service_account_id=robot.id)
    with pytest.raises(EntityNotFoundError, match="No project with id"):
        members.set_role(uuid.uuid4(), ProjectRole.VIEWER, user_id=user.id)
    with pytest.raises(EntityNotFoundError, match="No user with id"):
        members.set_role(a.id, ProjectRole.VIEWER, user_id=uuid.uuid4())
    members.remove(a.id, user_id=user.id)
    with pytest.raises(EntityNotFoundError):
        members.remove(a.id, user_id=user.id)
    assert members.roles_of(user_id=user.id) == {b.id: ProjectRole.ADMIN}
