"""``SqlStore``: the :class:`~wharf.store.ports.Store` bundle over one SQL database.

It only wires the repositories to one :class:`Database` (engine + clock); each aggregate's rules
live in its own module under ``repositories/``, and every combined call of the ports is one
transaction (``repositories/batches.py``, ``repositories/run_records.py``). Invariants: opening
builds the engine, checks the schema revision with one query and migrates only when asked;
nothing here is global (build stores at entry points and pass them down).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from wharf.sql.engine import Database, create_sql_engine, mask_url
from wharf.store.ports import (
    ArtifactRepository,
    PipelineRepository,
    ProjectRepository,
    RunMetadataRepository,
    RunRepository,
    ScheduleRepository,
    SnapshotRepository,
    StackRepository,
    StepRunRepository,
    Store,
    UserRepository,
)
from wharf.store.sql.repositories.batches import SqlArtifacts, SqlStepRuns
from wharf.store.sql.repositories.pipelines import SqlPipelineRepository
from wharf.store.sql.repositories.projects import SqlProjectRepository
from wharf.store.sql.repositories.run_metadata import SqlRunMetadataRepository
from wharf.store.sql.repositories.runs import SqlRunRepository
from wharf.store.sql.repositories.schedules import SqlScheduleRepository
from wharf.store.sql.repositories.snapshots import SqlSnapshotRepository
from wharf.store.sql.repositories.stacks import SqlStackRepository
from wharf.store.sql.repositories.users import SqlUserRepository
from wharf.store.sql.schema import ensure_schema


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
    """Set by whoever pairs this store with a Resource Manager (the embedded workspace)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.users = SqlUserRepository(db)
        self.projects = SqlProjectRepository(db)
        self.stacks = SqlStackRepository(db)
        self.pipelines = SqlPipelineRepository(db)
        self.snapshots = SqlSnapshotRepository(db)
        self.runs = SqlRunRepository(db)
        self.steps = SqlStepRuns(db)
        self.artifacts = SqlArtifacts(db)
        self.run_metadata = SqlRunMetadataRepository(db)
        self.schedules = SqlScheduleRepository(db)

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
