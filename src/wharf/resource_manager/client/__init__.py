"""The Resource Manager's HTTP client (team and production modes): ``HttpResourceManager``
(:mod:`.http`) over its transport (:mod:`.http_transport`) and wire (:mod:`.http_wire`).

Invariants: it speaks only the shared contract (:mod:`wharf.resource_manager.contract`) and
never imports the RM service, API, scheduler or the embedded mode (import-linter); nothing is
re-exported here, since its modules need ``httpx`` (the ``server`` extra) and the engine must
be importable without it.
"""
