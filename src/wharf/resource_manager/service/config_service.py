"""The configuration part of the service API: descriptors, pools (with queue and allocations)
and policies.

Inputs are wire models or plain mappings (validated here: ``InputError`` on bad input).

Reads run in read transactions (pool queues too: :mod:`.whatif`); every change is a batched
operation (:mod:`.config_ops`) that runs in a scheduling transaction with a cycle. Every
mutating method accepts an ``idempotency_key``: a retry with the same key returns the first
result and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from wharf.resource_manager.contract.models import (
    DescriptorUpdate,
    PolicyCreate,
    PolicyUpdate,
    PoolAllocation,
    PoolCreate,
    PoolUpdate,
    QueueEntry,
)
from wharf.resource_manager.domain import Policy, Pool, ResourceDescriptor, load
from wharf.resource_manager.service import config_ops, queries, whatif
from wharf.resource_manager.service import config_store as store
from wharf.resource_manager.service.batch import BatchRunner
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.principal import Principal
from wharf.sql.engine import Database


def _key(
    principal: Principal, operation: str, key: str | None, payload: Any
) -> IdempotencyKey | None:
    return IdempotencyKey.of(principal.name, operation, key, payload)


def _ref(ref: str | UUID) -> str:
    return str(ref)


class DescriptorService:
    def __init__(self, db: Database, runner: BatchRunner) -> None:
        self._db = db
        self._runner = runner

    def get(self, name: str) -> ResourceDescriptor:
        def query(conn: Any) -> ResourceDescriptor:
            found = store.find_descriptor(conn, name)
            if found is None:
                raise store.descriptor_not_found(conn, name)
            return found[0]

        return self._db.read(query)

    def create(
        self,
        principal: Principal,
        descriptor: ResourceDescriptor | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> ResourceDescriptor:
        model = load(ResourceDescriptor, descriptor)
        payload = model.model_dump(mode="json")
        operation = config_ops.CreateDescriptor(
            principal, model, _key(principal, "descriptors.create", idempotency_key, payload)
        )
        result: ResourceDescriptor = self._runner.submit(operation)
        return result

    def update(
        self,
        principal: Principal,
        name: str,
        update: DescriptorUpdate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> ResourceDescriptor:
        update = load(DescriptorUpdate, update)
        payload = {"name": name, **update.model_dump(mode="json", exclude_unset=True)}
        key = _key(principal, "descriptors.update", idempotency_key, payload)
        result: ResourceDescriptor = self._runner.submit(
            config_ops.UpdateDescriptor(principal, name, update, key)
        )
        return result

    def delete(
        self, principal: Principal, name: str, *, idempotency_key: str | None = None
    ) -> None:
        key = _key(principal, "descriptors.delete", idempotency_key, {"name": name})
        self._runner.submit(config_ops.DeleteDescriptor(principal, name, key))

    def list(self) -> list[ResourceDescriptor]:
        return self._db.read(store.list_descriptors)


class PoolService:
    def __init__(self, db: Database, runner: BatchRunner) -> None:
        self._db = db
        self._runner = runner
        self._budget = runner.options.route_search_budget

    def get(self, pool: str | UUID) -> Pool:
        def query(conn: Any) -> Pool:
            found = store.find_pool(conn, pool)
            if found is None:
                raise store.pool_not_found(conn, pool)
            return found

        return self._db.read(query)

    def create(
        self,
        principal: Principal,
        spec: PoolCreate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Pool:
        spec = load(PoolCreate, spec)
        key = _key(principal, "pools.create", idempotency_key, spec.model_dump(mode="json"))
        result: Pool = self._runner.submit(config_ops.CreatePool(principal, spec, key))
        return result

    def update(
        self,
        principal: Principal,
        pool: str | UUID,
        update: PoolUpdate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Pool:
        update = load(PoolUpdate, update)
        payload = {"pool": _ref(pool), **update.model_dump(mode="json", exclude_unset=True)}
        key = _key(principal, "pools.update", idempotency_key, payload)
        result: Pool = self._runner.submit(config_ops.UpdatePool(principal, pool, update, key))
        return result

    def delete(
        self, principal: Principal, pool: str | UUID, *, idempotency_key: str | None = None
    ) -> None:
        key = _key(principal, "pools.delete", idempotency_key, {"pool": _ref(pool)})
        self._runner.submit(config_ops.DeletePool(principal, pool, key))

    def queue(self, pool: str | UUID) -> list[QueueEntry]:
        """Pending requests queued in ``pool``, in the order the next cycle would see them
        (read-only: the scheduler runs on the committed state and decides nothing)."""
        now, view, budget = self._db.now(), self._runner.cache.view, self._budget
        return self._db.read(lambda conn: whatif.pool_queue(conn, view, pool, now, budget))

    def queue_lengths(self) -> dict[UUID, int]:
        """Pool id -> pending requests queued there (one read-only cycle for every pool)."""
        now, view, budget = self._db.now(), self._runner.cache.view, self._budget
        return self._db.read(lambda conn: whatif.queue_lengths(conn, view, now, budget))

    def allocations(self, pool: str | UUID) -> list[PoolAllocation]:
        """Allocations of allocated or preempting requests in ``pool``, oldest first."""
        return self._db.read(lambda conn: queries.pool_allocations(conn, pool))

    def list(self) -> list[Pool]:
        return self._db.read(store.list_pools)


class PolicyService:
    def __init__(self, db: Database, runner: BatchRunner) -> None:
        self._db = db
        self._runner = runner

    def get(self, policy: str | UUID) -> Policy:
        def query(conn: Any) -> Policy:
            found = store.find_policy(conn, policy)
            if found is None:
                raise store.policy_not_found(conn, policy)
            return found

        return self._db.read(query)

    def create(
        self,
        principal: Principal,
        spec: PolicyCreate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Policy:
        spec = load(PolicyCreate, spec)
        payload = spec.model_dump(mode="json", by_alias=True)
        key = _key(principal, "policies.create", idempotency_key, payload)
        result: Policy = self._runner.submit(config_ops.CreatePolicy(principal, spec, key))
        return result

    def update(
        self,
        principal: Principal,
        policy: str | UUID,
        update: PolicyUpdate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Policy:
        update = load(PolicyUpdate, update)
        payload = {
            "policy": _ref(policy),
            **update.model_dump(mode="json", by_alias=True, exclude_unset=True),
        }
        key = _key(principal, "policies.update", idempotency_key, payload)
        result: Policy = self._runner.submit(
            config_ops.UpdatePolicy(principal, policy, update, key)
        )
        return result

    def delete(
        self, principal: Principal, policy: str | UUID, *, idempotency_key: str | None = None
    ) -> None:
        key = _key(principal, "policies.delete", idempotency_key, {"policy": _ref(policy)})
        self._runner.submit(config_ops.DeletePolicy(principal, policy, key))

    def list(self, pool: str | UUID | None = None) -> list[Policy]:
        def query(conn: Any) -> list[Policy]:
            if pool is None:
                return store.list_policies(conn)
            found = store.find_pool(conn, pool)
            if found is None:
                raise store.pool_not_found(conn, pool)
            return store.list_policies(conn, found.id)

        return self._db.read(query)
