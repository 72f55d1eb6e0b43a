"""The CLI's read-only commands on the embedded SQLite store, over the stdlib's ``sqlite3``.

Answers ``runs list``/``show``, ``steps list``, ``pipelines list`` and ``artifacts list
[--versions]`` without importing SQLAlchemy (start-up time; see docs/benchmarks.md), with the
:mod:`wharf.store.models` records that ``Client`` returns. Entry point: :meth:`QuickReads.open`.

Invariants: it only reads an existing file, opened read-only, and never writes; it gives the
same answers as the SQL repositories and ``Client`` (``tests/cli/test_quick_reads.py`` compares
both paths); :data:`SCHEMA_REVISION` is the revision the queries were written for, kept equal to
``wharf.store.sql.schema.HEAD_REVISION`` by a test, so each new migration brings a review here.
It imports no SQLAlchemy, SDK or engine.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast
from uuid import UUID

from pydantic import BaseModel

from wharf.cli.lost_run_check import needs_sweep, open_read_only, sqlite_path, sqlite_time
from wharf.config.flavors import RESOURCE_MANAGERS
from wharf.config.global_config import WharfConfig
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityNotFoundError
from wharf.core.ids import (
    MAX_ID_CANDIDATES,
    id_prefix_bounds,
    only_match,
    parse_id_prefix,
    parse_uuid,
    run_not_found,
)
from wharf.core.suggestions import did_you_mean
from wharf.store.models import (
    MAX_PAGE_SIZE,
    ArtifactRecord,
    ArtifactVersionRecord,
    Page,
    PageRequest,
    PipelineRecord,
    PipelineRunRecord,
    SnapshotRecord,
    StepRunRecord,
)

M = TypeVar("M", bound=BaseModel)

SCHEMA_REVISION = "0007"  # see the module docstring
DEFAULT_PROJECT = "default"  # ``store.defaults``' (which imports the ports); a test compares
_UUID_COLUMNS = frozenset(
    {"id", "project_id", "pipeline_id", "snapshot_id", "user_id", "run_id", "artifact_id"}
    | {"stack_id"}
    | {"original_step_run_id", "resource_request_id", "producer_step_run_id", "artifact_store_id"}
)
_TIME_COLUMNS = frozenset({"created", "updated", "start_time", "end_time", "cache_expires_at"})
_TIME_COLUMNS |= {"last_heartbeat", "heartbeat_deadline"}
_JSON_COLUMNS = frozenset({"parameters", "spec", "calls"})
_LINK_CHUNK = 500  # ``repositories._base.IN_CHUNK``: the same chunks give the same order


class QuickReadError(Exception):
    """The SQLite driver failed; read through the normal store instead.

    Reads have no side effects, so the caller repeats them on the normal store, which reports
    real problems in its own words.
    """


def _decoder(column: str) -> Callable[[Any], Any] | None:
    if column in _UUID_COLUMNS:
        return UUID
    if column in _TIME_COLUMNS:
        return sqlite_time
    return json.loads if column in _JSON_COLUMNS else None


def _columns(model: type[BaseModel], prefix: str = "", *derived: str) -> str:
    """The record's fields as columns of its table, but for those read from other tables."""
    return ", ".join(f"{prefix}{name}" for name in model.model_fields if name not in derived)


class QuickReads:
    """The read-only commands' queries on one SQLite connection. Build with :meth:`open`.

    Same answers as the SQL repositories and ``Client``: filters (project; pipeline or run by id,
    name or id prefix), order (``created`` then ``id``, in the page's direction), paging,
    ``COUNT`` totals, one transaction per call, values decoded as the repositories' column types
    decode them.
    """

    def __init__(self, conn: sqlite3.Connection, project_id: UUID) -> None:
        self._conn = conn
        self.project_id = project_id

    @classmethod
    def open(cls, config: WharfConfig) -> QuickReads | None:
        """Quick reads of ``config``'s workspace; None where the normal store must answer.

        None (and the caller uses the normal store, which creates, migrates or refuses as
        always) unless the normal path would only read: no server, a plain ``sqlite:///PATH``
        URL naming an existing file, a known Resource Manager mode, an existing project and
        exactly :data:`SCHEMA_REVISION` (so a newer schema gets the normal store's one-line
        ``SchemaVersionError`` and an older one gets migrated). Also None when a run's
        orchestrating process is gone (``lost_run_check.needs_sweep``): the normal path's
        ``Client`` sweeps such runs before it reads. The file is opened with ``mode=ro`` and
        ``PRAGMA query_only``; as the last connection to close, it leaves SQLite's
        ``-wal``/``-shm`` files in place.
        """
        path = sqlite_path(config)
        mode = config.resource_manager  # an unknown mode is the normal path's error to report
        if path is None or (mode != "none" and mode not in RESOURCE_MANAGERS):
            return None
        if not path.is_file():  # the normal path creates it
            return None
        try:
            conn = open_read_only(path)  # transactions are begun explicitly (``_read``)
        except sqlite3.Error:
            return None
        revisions: list[Any] = []
        try:
            revisions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
            name = config.project or DEFAULT_PROJECT
            row = conn.execute("SELECT id FROM project WHERE name = ?", (name,)).fetchone()
        except sqlite3.Error:  # e.g. no alembic_version table: an empty, unmigrated file
            row = None
        if row is None or revisions != [(SCHEMA_REVISION,)] or needs_sweep(conn):
            conn.close()  # the normal path migrates, refuses, creates the project or sweeps
            return None
        return cls(conn, UUID(row[0]))

    def close(self) -> None:
        self._conn.close()

    # The methods below answer as ``Client``'s of the same names, with the arguments the CLI
    # passes (``Client`` also takes others, and a ``sort`` direction).

    def list_pipelines(self, *, page: int = 1, size: int = 50) -> Page[PipelineRecord]:
        return self._page(PipelineRecord, "pipeline", self._in_project(), _desc(page, size))

    def get_pipeline(self, name_or_id: str | UUID) -> PipelineRecord:
        unnamed = "No pipeline named '{}'."
        try:
            return self._get(PipelineRecord, "pipeline", "pipeline", name_or_id, unnamed)
        except EntityNotFoundError as missing:
            if str(missing) != unnamed.format(name_or_id):
                raise  # an id no pipeline has
            names = [p.name for p in self.list_pipelines(size=MAX_PAGE_SIZE).items]
            hint = did_you_mean(str(name_or_id), names) or "."
            raise EntityNotFoundError(f"No pipeline named '{name_or_id}'{hint}") from None

    def list_pipeline_runs(
        self,
        *,
        pipeline: str | UUID | None = None,
        status: ExecutionStatus | str | None = None,
        page: int = 1,
        size: int = 50,
    ) -> Page[PipelineRunRecord]:
        pipeline_id = self.get_pipeline(pipeline).id.hex if pipeline is not None else None
        status_value = ExecutionStatus(status).value if status else None
        where = self._in_project(pipeline_id=pipeline_id, status=status_value)
        return self._page(PipelineRunRecord, "pipeline_run", where, _desc(page, size))

    def get_pipeline_run(self, name_or_id: str | UUID) -> PipelineRunRecord:
        unnamed = "No pipeline run with id or name '{}'."
        try:
            return self._get(PipelineRunRecord, "pipeline_run", "pipeline run", name_or_id, unnamed)
        except EntityNotFoundError:
            if isinstance(name_or_id, UUID) or parse_uuid(name_or_id) is not None:
                raise
            text = str(name_or_id)
            where = self._in_project(name=text)
            pipelines = self._page(PipelineRecord, "pipeline", where, _desc(1, 1)).total
            raise run_not_found(text, names_a_pipeline=pipelines > 0) from None

    def list_run_steps(
        self, run: str | UUID, *, page: int = 1, size: int = 50
    ) -> Page[StepRunRecord]:
        where = self._in_project(run_id=self.get_pipeline_run(run).id.hex)
        columns = _columns(StepRunRecord, "", "inputs", "outputs")
        request = PageRequest(index=page, size=size, sort="asc")  # in the order they started
        return self._page(StepRunRecord, "step_run", where, request, columns, links=True)

    def get_snapshot(self, snapshot_id: UUID) -> SnapshotRecord:
        with self._read() as conn:
            sql = f"SELECT {_columns(SnapshotRecord)} FROM pipeline_snapshot WHERE id = ?"
            rows = _decoded(conn.execute(sql, [snapshot_id.hex]))
        if not rows:
            raise EntityNotFoundError(f"No pipeline snapshot with id {snapshot_id}.")
        return SnapshotRecord.model_validate(rows[0])

    def get_snapshot_stack_ids(self, snapshot_ids: Sequence[UUID]) -> dict[UUID, UUID | None]:
        ids = list(dict.fromkeys(i.hex for i in snapshot_ids))
        found: dict[UUID, UUID | None] = {}
        with self._read() as conn:
            for start in range(0, len(ids), _LINK_CHUNK):
                chunk = ids[start : start + _LINK_CHUNK]
                marks = ", ".join("?" * len(chunk))
                sql = f"SELECT id, stack_id FROM pipeline_snapshot WHERE id IN ({marks})"
                for snapshot_id, stack_id in conn.execute(sql, chunk):
                    found[UUID(snapshot_id)] = None if stack_id is None else UUID(stack_id)
        return found

    def get_stack_name(self, stack_id: UUID) -> str | None:
        with self._read() as conn:
            row = conn.execute("SELECT name FROM stack WHERE id = ?", [stack_id.hex]).fetchone()
        return None if row is None else str(row[0])

    def get_step_run(self, step_run_id: str | UUID) -> StepRunRecord:
        """By id in any project, else by id prefix in the project (as ``Client``)."""
        uid = step_run_id if isinstance(step_run_id, UUID) else parse_uuid(step_run_id)
        columns = _columns(StepRunRecord, "", "inputs", "outputs")
        if uid is not None:
            where = [("id = ?", uid.hex)]
            found = self._page(StepRunRecord, "step_run", where, _desc(1, 1), columns, links=True)
            if not found.items:
                raise EntityNotFoundError(f"No step run with id {uid}.")
            return found.items[0]
        step = self._by_prefix(StepRunRecord, "step_run", "step run", str(step_run_id), columns)
        if step is None:
            raise EntityNotFoundError(f"No step run with id or id prefix '{step_run_id}'.")
        return step

    def list_artifacts(
        self, *, name: str | None = None, page: int = 1, size: int = 50
    ) -> Page[ArtifactRecord]:
        return self._page(
            ArtifactRecord, "artifact", self._in_project(name=name), _desc(page, size)
        )

    def list_artifact_versions(
        self, *, name: str | None = None, page: int = 1, size: int = 50
    ) -> Page[ArtifactVersionRecord]:
        where = [("v.project_id = ?", self.project_id.hex)]
        if name is not None:
            where.append(("a.name = ?", name))
        table = "artifact_version AS v JOIN artifact AS a ON v.artifact_id = a.id"
        columns = f"{_columns(ArtifactVersionRecord, 'v.', 'name')}, a.name"
        request = _desc(page, size)
        return self._page(ArtifactVersionRecord, table, where, request, columns, prefix="v.")

    def _in_project(self, **equal: str | None) -> list[tuple[str, str]]:
        where = [("project_id = ?", self.project_id.hex)]
        return where + [(f"{column} = ?", v) for column, v in equal.items() if v is not None]

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a deferred ``BEGIN``: it never waits for writers)."""
        try:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise QuickReadError(str(exc)) from exc

    def _get(
        self, model: type[M], table: str, kind: str, name_or_id: str | UUID, unnamed: str
    ) -> M:
        """By id in any project (as the repositories' ``get``), else the newest of that name in
        the project (as ``Client``)."""
        uid = name_or_id if isinstance(name_or_id, UUID) else parse_uuid(name_or_id)
        if uid is None:
            where = self._in_project(name=str(name_or_id))
            found = self._page(model, table, where, _desc(1, 1)).items
            by_prefix = found[0] if found else self._by_prefix(model, table, kind, str(name_or_id))
            if by_prefix is None:
                raise EntityNotFoundError(unnamed.format(name_or_id))
            return by_prefix
        with self._read() as conn:
            cursor = conn.execute(f"SELECT {_columns(model)} FROM {table} WHERE id = ?", [uid.hex])
            rows = _decoded(cursor)
        if not rows:
            raise EntityNotFoundError(f"No {kind} with id {uid}.")
        return model.model_validate(rows[0])

    def _by_prefix(
        self, model: type[M], table: str, kind: str, text: str, columns: str | None = None
    ) -> M | None:
        """As ``Client``: the project's one record whose id starts with ``text``, if any."""
        prefix = parse_id_prefix(text)
        if prefix is None:
            return None
        low, high = id_prefix_bounds(prefix)
        where = [*self._in_project(), ("id >= ?", low.hex), ("id <= ?", high.hex)]
        request = _desc(1, MAX_ID_CANDIDATES + 1)
        links = columns is not None  # step runs: their inputs and outputs are other tables'
        matches = self._page(model, table, where, request, columns, links=links).items
        found: M | None = only_match(kind, text, cast("list[Any]", matches))
        return found

    def _page(
        self,
        model: type[M],
        table: str,
        where: Sequence[tuple[str, str]],
        page: PageRequest,
        columns: str | None = None,
        *,
        prefix: str = "",
        links: bool = False,
    ) -> Page[M]:
        """``fetch_page`` of the SQL repositories: the COUNT, then the page's rows (none past
        the end) ordered by creation time and id in the page's direction, in one transaction."""
        condition = " AND ".join(sql for sql, _ in where)
        params = [value for _, value in where]
        size = min(page.size, MAX_PAGE_SIZE)
        offset = (page.index - 1) * size
        direction = "ASC" if page.sort == "asc" else "DESC"
        sql = (
            f"SELECT {columns or _columns(model)} FROM {table} WHERE {condition} "
            f"ORDER BY {prefix}created {direction}, {prefix}id {direction} LIMIT ? OFFSET ?"
        )
        rows: list[dict[str, Any]] = []
        with self._read() as conn:
            count = conn.execute(f"SELECT count(*) FROM {table} WHERE {condition}", params)
            total = int(count.fetchone()[0])
            if offset < total:
                rows = _decoded(conn.execute(sql, [*params, size, offset]))
            if links:
                found = _links(conn, [row["id"] for row in rows])
                rows = [{**row, **found[row["id"]]} for row in rows]
        items = [model.model_validate(row) for row in rows]
        return Page(items=items, index=page.index, size=page.size, total=total)


def _desc(page: int, size: int) -> PageRequest:
    """Newest first, as ``Client`` lists everything but steps."""
    return PageRequest(index=page, size=size, sort="desc")


def _decoded(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    columns = [(column[0], _decoder(column[0])) for column in cursor.description]
    return [
        {n: v if v is None or d is None else d(v) for (n, d), v in zip(columns, row, strict=True)}
        for row in cursor
    ]


def _links(conn: sqlite3.Connection, step_ids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """Inputs and outputs of the steps, queried as ``step_links.load_links`` queries them (the
    same ``UNION ALL`` over the same chunks, so the links come in the same order)."""
    links: dict[UUID, dict[str, Any]] = {i: {"inputs": {}, "outputs": {}} for i in step_ids}
    for start in range(0, len(step_ids), _LINK_CHUNK):
        hexes = [i.hex for i in step_ids[start : start + _LINK_CHUNK]]
        marks = ", ".join("?" * len(hexes))
        sql = " UNION ALL ".join(
            f"SELECT '{kind}' AS kind, step_run_id, name, artifact_version_id FROM {table} "
            f"WHERE step_run_id IN ({marks})"
            for kind, table in (("inputs", "step_run_input"), ("outputs", "step_run_output"))
        )
        for kind, step_id, name, version_id in conn.execute(sql, hexes + hexes):
            links[UUID(step_id)][kind][name] = UUID(version_id)
    return links
