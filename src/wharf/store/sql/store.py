"""``SqlStore``: the :class:`~wharf.store.ports.Store` bundle over one SQL database.

It only wires the repositories to one :class:`Database` (engine + clock); each aggregate's rules
live in its own module under ``repositories/``. Opening a store builds the engine (no connection
pool work happens before the first query), checks the schema revision with one query and
migrates when asked to. Build stores at entry points and pass them down: nothing here is global.

``steps`` and ``artifacts`` also offer the optional batch capabilities of ``wharf.store.ports``
(``StepRunBatchOperations``, ``ArtifactBatchOperations``) through ``SqlBatchOperations``, so the
engine takes the same path on this store as over REST.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from uuid import UUID

from wharf.sql.engine import Database, create_sql_engine, mask_url
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    CachedOrCreated,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import (
    ArtifactRepository,
    PipelineRepository,
    ProjectRepository,
    ResourceRequestRepository,
    RunMetadataRepository,
    RunRepository,
    ScheduleRepository,
    SnapshotRepository,
    StackRepository,
    StepRunRepository,
    Store,
    UserRepository,
)
from wharf.store.sql.repositories.artifacts import SqlArtifactRepository
from wharf.store.sql.repositories.batches import SqlBatchOperations
from wharf.store.sql.repositories.pipelines import SqlPipelineRepository
from wharf.store.sql.repositories.projects import SqlProjectRepository
from wharf.store.sql.repositories.run_metadata import SqlRunMetadataRepository
from wharf.store.sql.repositories.runs import SqlRunRepository
from wharf.store.sql.repositories.schedules import SqlScheduleRepository
from wharf.store.sql.repositories.snapshots import SqlSnapshotRepository
from wharf.store.sql.repositories.stacks import SqlStackRepository
from wharf.store.sql.repositories.steps import SqlStepRunRepository
from wharf.store.sql.repositories.users import SqlUserRepository
from wharf.store.sql.schema import ensure_schema


class SqlStepRuns(SqlStepRunRepository):
    """Step runs plus ``StepRunBatchOperations`` (set ``batches`` before use)."""

    batches: SqlBatchOperations

    def create_many(self, steps: Sequence[StepRunCreate]) -> builtins.list[StepRunRecord]:
        return self.batches.create_many(steps)

    def find_cached_or_create(
        self, step: StepRunCreate, project_id: UUID, now: datetime, *, record_hit: bool = False
    ) -> CachedOrCreated:
        return self.batches.find_cached_or_create(step, project_id, now, record_hit=record_hit)

    def finish(
        self,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        return self.batches.finish(step_run_id, update, outputs)


class SqlArtifacts(SqlArtifactRepository):
    """Artifacts plus ``ArtifactBatchOperations`` (set ``batches`` before use)."""

    batches: SqlBatchOperations

    def create_versions(
        self, versions: Sequence[ArtifactVersionCreate]
    ) -> builtins.list[ArtifactVersionRecord]:
        return self.batches.create_versions(versions)


class SqlStore:
    """The metadata store on SQLite, PostgreSQL or MySQL/MariaDB. Create with :meth:`open`."""

    users: UserRepository
    projects: ProjectRepository
    stacks: StackRepository
    pipelines: PipelineRepository
    snapshots: SnapshotRepository
    runs: RunRepository
    steps: StepRunRepository
    artifacts: ArtifactRepository
    run_metadata: RunMetadataRepository
    schedules: ScheduleRepository
    resource_requests: ResourceRequestRepository | None
    """Set by whoever pairs this store with a Resource Manager (the embedded workspace)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.users = SqlUserRepository(db)
        self.projects = SqlProjectRepository(db)
        self.stacks = SqlStackRepository(db)
        self.pipelines = SqlPipelineRepository(db)
        self.snapshots = SqlSnapshotRepository(db)
        self.runs = SqlRunRepository(db)
        steps, artifacts = SqlStepRuns(db), SqlArtifacts(db)
        steps.batches = artifacts.batches = SqlBatchOperations(db)
        self.steps = steps
        self.artifacts = artifacts
        self.run_metadata = SqlRunMetadataRepository(db)
        self.schedules = SqlScheduleRepository(db)
        self.resource_requests = None

    @classmethod
    def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> SqlStore:
        """Connect to the store at ``url`` and make sure its schema is this code's.

        ``url``: ``sqlite:///path`` (its directory must exist), ``postgresql://...``,
        ``mysql://...`` / ``mariadb://...``, or any explicit ``dialect+driver://`` URL.
        ``migrate``: upgrade an empty or older schema to head (otherwise raise
        ``SchemaVersionError``). ``clock``: the store's only time source (default: aware UTC
        now). Raises ``StoreUnavailableError`` if the database cannot be reached and
        ``SchemaVersionError`` if its schema is newer than this code.
        """
        db = Database(create_sql_engine(url), mask_url(url), clock)
        try:
            ensure_schema(db, migrate=migrate)
        except BaseException:
            db.dispose()
            raise
        return cls(db)

    @property
    def url(self) -> str:
        """The store's URL with any password masked."""
        return self._db.masked_url

    @property
    def dialect(self) -> str:
        """``sqlite``, ``postgresql``, ``mysql`` or ``mariadb``."""
        return self._db.engine.dialect.name

    def close(self) -> None:
        """Close every pooled connection; the store must not be used afterwards."""
        self._db.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"


def _conforms(store: SqlStore) -> Store:
    return store  # mypy proves that SqlStore implements the Store protocol
