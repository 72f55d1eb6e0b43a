"""Artifacts (named per project) and their numbered versions.

Invariants:
- An artifact is unique per (project, name) and is created by the first version written for it.
- Versions of an artifact are numbered 1, 2, ... without gaps or duplicates, also with
  concurrent writers in several processes (:func:`_lookup`; the unique (artifact, version)
  constraint backs it up).
- ``ArtifactVersionRecord.name`` is the artifact's name, joined in on read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from sqlalchemy import Connection, Row, bindparam, func, select

from wharf.core.errors import StoreError
from wharf.core.ids import new_id
from wharf.sql import exact
from wharf.sql.direct import DirectStatement
from wharf.sql.engine import MAX_CONFLICT_RETRIES, Database
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.store.models import (
    ArtifactFilter,
    ArtifactRecord,
    ArtifactVersionCreate,
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    Page,
    PageRequest,
)
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    fetch_page,
    first_missing,
    id_prefix_condition,
    list_page,
    not_found,
    to_page,
)

T = TypeVar("T")
_A = t.artifact
_V = t.artifact_version
DEFAULT_FILTER = ArtifactFilter()
DEFAULT_VERSION_FILTER = ArtifactVersionFilter()

_ARTIFACT_KEY = (_A.c.project_id == bindparam("project_id"), _A.c.name == bindparam("name"))
_LOCK_ARTIFACT = DirectStatement(select(_A.c.id).where(*_ARTIFACT_KEY).with_for_update())
_MAX_VERSION = DirectStatement(
    select(func.max(_V.c.version).label("top")).where(_V.c.artifact_id == bindparam("artifact_id"))
)
_ARTIFACT_AND_MAX = DirectStatement(
    select(
        _A.c.id,
        select(func.max(_V.c.version))
        .where(_V.c.artifact_id == _A.c.id)
        .scalar_subquery()
        .label("top"),
    ).where(*_ARTIFACT_KEY)
)
_INSERT_ARTIFACT = DirectStatement(_A.insert())
_INSERT_VERSION = DirectStatement(_V.insert())
_VERSION_FROM = _V.join(_A, _V.c.artifact_id == _A.c.id)
_SELECT_VERSION = select(_V, _A.c.name).select_from(_VERSION_FROM)
_GET_VERSION = _SELECT_VERSION.where(_V.c.id == bindparam("version_id"))


def _version(row: Row[Any]) -> ArtifactVersionRecord:
    return ArtifactVersionRecord.model_validate(row._asdict())


def _artifact(row: Row[Any]) -> ArtifactRecord:
    return ArtifactRecord.model_validate(row._asdict())


def insert_versions(
    conn: Connection, versions: Sequence[ArtifactVersionCreate], now: datetime
) -> list[dict[str, Any]]:
    """Insert ``versions`` in the caller's write transaction, numbered per artifact in the
    order given; artifacts are created on first use and locked in sorted (project, name)
    order, so two writers never deadlock on each other. The rows written, in order."""
    keys = sorted({(v.project_id, v.name) for v in versions}, key=lambda k: (str(k[0]), k[1]))
    ids: dict[tuple[UUID, str], UUID] = {}
    latest: dict[tuple[UUID, str], int] = {}
    for project_id, name in keys:
        key = {"project_id": project_id, "name": name}
        artifact_id, top = _lookup(conn, key)
        if artifact_id is None:
            artifact_id = new_id()
            _INSERT_ARTIFACT.execute(conn, {"id": artifact_id, **key, "created": now})
        ids[(project_id, name)] = artifact_id
        latest[(project_id, name)] = top or 0
    rows = []
    for version in versions:
        name_key = (version.project_id, version.name)
        latest[name_key] += 1
        rows.append(
            {
                "id": new_id(),
                "artifact_id": ids[name_key],
                "project_id": version.project_id,
                "version": latest[name_key],
                "uri": version.uri,
                "data_type": version.data_type,
                "materializer": version.materializer,
                "content_hash": version.content_hash,
                "producer_step_run_id": version.producer_step_run_id,
                "artifact_store_id": version.artifact_store_id,
                "created": now,
            }
        )
    if rows:
        _INSERT_VERSION.execute_many(conn, rows)
    return rows


def _lookup(conn: Connection, key: dict[str, Any]) -> tuple[UUID | None, int | None]:
    """The artifact's id (locked) and its highest version; Nones if it does not exist.

    The artifact row is locked (``SELECT ... FOR UPDATE``) and only then is the highest version
    read in a *separate* statement: under READ COMMITTED (PostgreSQL, and MySQL as configured)
    that statement sees the previous lock holder's committed version. On SQLite the transaction
    already holds the database write lock (``BEGIN IMMEDIATE``), so lookup and maximum are one
    statement there (this is on the engine's per-step hot path).
    """
    if conn.dialect.name == "sqlite":  # the transaction holds the file's write lock
        row = _ARTIFACT_AND_MAX.first(conn, key)
        return (None, None) if row is None else (row["id"], row["top"])
    locked = _LOCK_ARTIFACT.first(conn, key)
    if locked is None:
        return None, None
    latest = _MAX_VERSION.first(conn, {"artifact_id": locked["id"]})
    return locked["id"], None if latest is None else latest["top"]


def write_versions(
    db: Database,
    fn: Callable[[Connection], T],
    versions: Sequence[ArtifactVersionCreate],
    linked: Iterable[UUID] = (),
) -> T:
    """Run ``fn`` (which inserts ``versions``, and may link versions ``linked`` to a step) in a
    write transaction: a conflict on a new artifact (two writers creating it) runs it again from
    scratch, a missing reference becomes not found."""
    for version in versions:
        check_name(version.name, "artifact")
    for _ in range(MAX_CONFLICT_RETRIES):
        try:
            return db.write(fn)
        except UniqueViolationError:
            continue  # another writer created one of the artifacts first: lock it now
        except ForeignKeyViolationError as exc:
            raise (
                first_missing(
                    db,
                    [
                        ("project", t.project, [v.project_id for v in versions]),
                        ("step run", t.step_run, [v.producer_step_run_id for v in versions]),
                        ("artifact version", t.artifact_version, list(linked)),
                    ],
                )
                or exc
            ) from None
    raise StoreError(
        f"Could not create {len(versions)} artifact version(s) after "
        f"{MAX_CONFLICT_RETRIES} conflicting attempts."
    )


def version_records(
    rows: Sequence[dict[str, Any]], versions: Sequence[ArtifactVersionCreate]
) -> list[ArtifactVersionRecord]:
    return [
        ArtifactVersionRecord.model_validate({**row, "name": v.name})
        for row, v in zip(rows, versions, strict=True)
    ]


class SqlArtifactRepository(SqlRepository):
    def create_version(self, version: ArtifactVersionCreate) -> ArtifactVersionRecord:
        versions = [version]
        rows = write_versions(
            self._db,
            lambda conn: insert_versions(conn, versions, self._db.now()),
            versions,
        )
        return version_records(rows, versions)[0]

    def get_version(self, version_id: UUID) -> ArtifactVersionRecord:
        row = self._db.read(lambda c: c.execute(_GET_VERSION, {"version_id": version_id}).first())
        if row is None:
            raise not_found("artifact version", version_id)
        return _version(row)

    def list_versions(
        self,
        filter: ArtifactVersionFilter = DEFAULT_VERSION_FILTER,
        page: PageRequest = DEFAULT_PAGE,
    ) -> Page[ArtifactVersionRecord]:
        conditions = []
        if filter.project_id is not None:
            conditions.append(_V.c.project_id == filter.project_id)
        if filter.artifact_id is not None:
            conditions.append(_V.c.artifact_id == filter.artifact_id)
        if filter.name is not None:
            conditions.append(exact.equals(_A.c.name, filter.name))
        if filter.producer_step_run_id is not None:
            conditions.append(_V.c.producer_step_run_id == filter.producer_step_run_id)
        if filter.id_prefix is not None:
            conditions.append(id_prefix_condition(_V, filter.id_prefix))

        def query(conn: Connection) -> Page[ArtifactVersionRecord]:
            rows, total = fetch_page(
                conn, _SELECT_VERSION, _V, conditions, page, from_=_VERSION_FROM
            )
            return to_page([_version(r) for r in rows], total, page)

        return self._db.read(query)

    def get(self, artifact_id: UUID) -> ArtifactRecord:
        stmt = select(_A).where(_A.c.id == artifact_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("artifact", artifact_id)
        return _artifact(row)

    def list(
        self, filter: ArtifactFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[ArtifactRecord]:
        conditions = []
        if filter.project_id is not None:
            conditions.append(_A.c.project_id == filter.project_id)
        if filter.name is not None:
            conditions.append(exact.equals(_A.c.name, filter.name))
        if filter.id_prefix is not None:
            conditions.append(id_prefix_condition(_A, filter.id_prefix))
        return list_page(self._db, _A, conditions, page, _artifact)
