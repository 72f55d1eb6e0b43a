"""``ResourceManagerService``: the Resource Manager over one SQL database, as a sync Python API.

It wires the parts together; each part owns its rules: :mod:`.config_service` (descriptors,
pools, policies), :mod:`.request_service` (requests), :mod:`.batch` (scheduling transactions),
:mod:`.cycle` (expire, schedule, apply).

Invariants: the clock is injected and is the only time source (clients send durations); every
method takes the calling :class:`~.principal.Principal` where it matters, so the API layer can
pass the authenticated caller; nothing is created at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from wharf.resource_manager.service.batch import BatchRunner, Beat
from wharf.resource_manager.service.config_service import (
    DescriptorService,
    PolicyService,
    PoolService,
)
from wharf.resource_manager.service.options import ServiceOptions
from wharf.resource_manager.service.request_ops import Sweep
from wharf.resource_manager.service.request_service import RequestService
from wharf.resource_manager.service.schema import ensure_schema
from wharf.sql.engine import Database, create_sql_engine, mask_url


class ResourceManagerService:
    """The Resource Manager on SQLite, PostgreSQL or MySQL/MariaDB. Create with :meth:`open`.

    Open it on its own database (team mode, one or more replicas on PostgreSQL or
    MySQL/MariaDB) or on the embedded SQLite file next to the workspace store (the RM's tables
    and migration history are its own). Any number of processes may open the same database:
    one scheduling transaction runs at a time (the scheduling lock), and whichever process
    needs a decision runs the cycle, so no daemon is required. Where a timer exists (the API
    server), call :meth:`sweep` every ``ServiceOptions.sweep_interval`` so lapsed leases are
    expired even when nobody asks (without one, the next cycle or renewal finds them), and
    :meth:`beat` before serving and every ``ServiceOptions.liveness_interval``.
    """

    descriptors: DescriptorService
    pools: PoolService
    policies: PolicyService
    requests: RequestService

    def __init__(self, db: Database, options: ServiceOptions | None = None) -> None:
        self._db = db
        self.options = options or ServiceOptions()
        self._runner = BatchRunner(db, self.options)
        self.descriptors = DescriptorService(db, self._runner)
        self.pools = PoolService(db, self._runner)
        self.policies = PolicyService(db, self._runner)
        self.requests = RequestService(db, self._runner, self.options)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        clock: Callable[[], datetime] | None = None,
        options: ServiceOptions | None = None,
    ) -> ResourceManagerService:
        """Connect to the RM database at ``url`` and make sure its RM schema is this code's.

        ``url``: as for the workspace store (``sqlite:///path``, ``postgresql://...``,
        ``mysql://...``/``mariadb://...``). ``migrate``: upgrade an empty or older RM schema to
        head (otherwise ``SchemaVersionError``). ``clock``: the only time source (aware UTC).
        Raises ``StoreUnavailableError`` if the database cannot be reached and
        ``SchemaVersionError`` if its RM schema is newer than this code.
        """
        db = Database(create_sql_engine(url), mask_url(url), clock)
        try:
            ensure_schema(db, migrate=migrate)
        except BaseException:
            db.dispose()
            raise
        return cls(db, options)

    @property
    def instance_id(self) -> str:
        """This process's identity as scheduling leader (recorded in ``rm_state``)."""
        return self._runner.instance_id

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return self._db.masked_url

    @property
    def dialect(self) -> str:
        return self._db.engine.dialect.name

    def now(self) -> datetime:
        """The service's clock (aware UTC)."""
        return self._db.now()

    def sweep(self) -> None:
        """Run a cycle now: expire lapsed leases, schedule, forget old idempotency keys."""
        self._runner.submit(Sweep())

    def beat(self) -> None:
        """Record that this instance serves (when the record is old) and take over where one is
        due: call it once before serving and then every ``options.liveness_interval`` (the API
        server's timer), so that time without any serving instance, a restart or a database
        outage, never counts against lease holders (see :mod:`.leader`)."""
        self._runner.submit(Beat())

    def sweep_if_due(self) -> bool:
        """Sweep if this process ran no cycle for a sweep interval; True if it swept."""
        last = self._runner.last_cycle
        if last is not None and self._db.now() - last < self.options.sweep_interval:
            return False
        self.sweep()
        return True

    def close(self) -> None:
        """Close every pooled connection; the service must not be used afterwards."""
        self._db.dispose()

    def __enter__(self) -> ResourceManagerService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResourceManagerService({self.url!r})"
