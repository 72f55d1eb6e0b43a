"""What the workspace server opens on its database: the store and the account repositories,
sharing one :class:`Database` (one engine, one clock).

Opening is :meth:`SqlStore.open`'s: one revision query, an upgrade when asked. Nothing is global;
the server builds this at start-up and closes it at shutdown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from wharf.sql.engine import Database, create_sql_engine, mask_url
from wharf.store.account_ports import (
    AccountStore,
    ApiKeyRepository,
    CredentialRepository,
    MembershipRepository,
    ServiceAccountRepository,
)
from wharf.store.sql.repositories.credentials import SqlCredentialRepository
from wharf.store.sql.repositories.memberships import SqlMembershipRepository
from wharf.store.sql.repositories.service_accounts import (
    SqlApiKeyRepository,
    SqlServiceAccountRepository,
)
from wharf.store.sql.schema import ensure_schema
from wharf.store.sql.store import SqlStore


class SqlAccountStore:
    """The account repositories (``wharf.store.account_ports.AccountStore``) on one database."""

    credentials: CredentialRepository
    service_accounts: ServiceAccountRepository
    api_keys: ApiKeyRepository
    memberships: MembershipRepository

    def __init__(self, db: Database) -> None:
        self.credentials = SqlCredentialRepository(db)
        self.service_accounts = SqlServiceAccountRepository(db)
        self.api_keys = SqlApiKeyRepository(db)
        self.memberships = SqlMembershipRepository(db)


@dataclass(frozen=True)
class ServerStores:
    store: SqlStore
    accounts: SqlAccountStore
    db: Database

    def close(self) -> None:
        self.store.close()


def open_server_stores(
    url: str, *, migrate: bool = True, clock: Callable[[], datetime] | None = None
) -> ServerStores:
    """Open the database at ``url`` (see :meth:`SqlStore.open` for URLs, errors and ``clock``)."""
    db = Database(create_sql_engine(url), mask_url(url), clock)
    try:
        ensure_schema(db, migrate=migrate)
    except BaseException:
        db.dispose()
        raise
    store = SqlStore(db)
    return ServerStores(store, SqlAccountStore(db), db)


def _conforms(accounts: SqlAccountStore) -> AccountStore:
    return accounts  # mypy proves that SqlAccountStore implements the AccountStore protocol
