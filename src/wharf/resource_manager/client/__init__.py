"""The Resource Manager's HTTP client (team and production modes), over ``httpx``.

Owns: :class:`~wharf.resource_manager.client.http.HttpResourceManager` (the
:class:`~wharf.resource_manager.contract.ResourceManagerClient` over the RM's HTTP API), its
transport (login, token cache, idempotency keys, retries, error mapping) and its wire.

Invariant: this package speaks only the shared contract (:mod:`wharf.resource_manager.contract`:
wire models, errors, the client interface); it never imports the RM service, API, scheduler or
the embedded mode (import-linter). Importing its modules needs ``httpx`` (the ``server`` extra),
so nothing is re-exported here: the engine must be importable without it.
"""
