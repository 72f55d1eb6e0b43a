"""Pairing a store with a Resource Manager: who requests, and how the client is reached.

Owns the account resolvers (:func:`fixed_account` for embedded mode, :func:`recorded_user` for
the workspace server), :func:`pair_store` (wrap a store's step runs, once), and the embedded
default: :func:`pair_with_configured_resource_manager` with its lazily connecting
:class:`ResourceManagerHandle`. What the pairing does to step runs lives in
:mod:`wharf.store.resource_aware`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from wharf.config.flavors import resource_manager_connector
from wharf.config.global_config import WharfConfig
from wharf.core.errors import IllegalOperationError, WharfError
from wharf.store.lazy_requests import LazyRequests
from wharf.store.models import PipelineRunRecord, UserRecord
from wharf.store.ports import Store
from wharf.store.resource_aware import AccountOf, ResourceAwareStepRuns

if TYPE_CHECKING:  # the RM's models load only when a step actually asks for resources
    from wharf.resource_manager.contract.protocol import RequestsClient, ResourceManagerClient


def fixed_account(user: UserRecord | None) -> AccountOf:
    """Every run's requests are ``user``'s (embedded mode: the workspace's user)."""

    def account(run: PipelineRunRecord) -> UserRecord:
        if user is None:
            raise WharfError("Resource requests need the requesting user.")
        return user

    return account


def recorded_user(store: Store) -> AccountOf:
    """Each run's requests are made for the user the run records (the workspace server)."""

    def account(run: PipelineRunRecord) -> UserRecord:
        if run.user_id is None:
            raise IllegalOperationError(
                f"Run '{run.name}' records no user, and resource requests are made for the "
                "run's user: create the run as a user, or name one in its user_id."
            )
        return store.users.get(run.user_id)

    return account


def attach_resource_manager(
    store: Store, connect: Callable[[], RequestsClient], user: UserRecord | None
) -> None:
    """Pair ``store`` with a Resource Manager: steps that ask for resources get requests,
    heartbeats renew them, finished steps release them."""
    pair_store(store, LazyRequests(connect), fixed_account(user))


def pair_store(store: Store, requests: LazyRequests, account: AccountOf) -> ResourceAwareStepRuns:
    """Wrap ``store.steps`` (once: several workspaces may share one store) and expose
    ``requests`` as the store's ``resource_requests``; the wrapped step runs."""
    steps = store.steps
    if not isinstance(steps, ResourceAwareStepRuns):
        steps = ResourceAwareStepRuns(steps, store, requests, account)
        store.steps = steps
        store.resource_requests = requests
    return steps


class ResourceManagerHandle:
    """A Resource Manager client that connects on first use (most runs never need it)."""

    def __init__(self, connect: Callable[[], ResourceManagerClient]) -> None:
        self._connect = connect
        self._client: ResourceManagerClient | None = None

    @property
    def client(self) -> ResourceManagerClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def pair_with_configured_resource_manager(
    store: Store, config: WharfConfig, user: UserRecord | None, account: str
) -> ResourceManagerHandle | None:
    """Attach the Resource Manager ``config`` names (embedded by default) to a SQL store.
    A store reached over REST is paired by its server instead; ``none`` disables requests."""
    if config.resource_manager == "none" or config.server_url:
        return None
    resource_manager_connector(config.resource_manager, load=False)  # fail early on a typo

    def connect() -> ResourceManagerClient:
        connector = resource_manager_connector(config.resource_manager)
        client: ResourceManagerClient = connector(
            config.store_url, account, config.local_step_slots
        )
        return client

    handle = ResourceManagerHandle(connect)
    attach_resource_manager(store, lambda: handle.client.requests, user)
    return handle
