"""Pairing a store with a Resource Manager: who requests.

Owns the account resolvers (:func:`fixed_account` for embedded mode, :func:`recorded_user` for
the workspace server). The requests made for that account are made by :mod:`.requester`;
the embedded port is made by :mod:`.embedded`, the server's service by
:mod:`wharf.server.step_resources`.
"""

from __future__ import annotations

from wharf.core.errors import IllegalOperationError, WharfError
from wharf.execution.resources.requester import AccountOf
from wharf.store.models import PipelineRunRecord, UserRecord
from wharf.store.ports import Store


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
