"""Batched writes of step runs and artifact versions, and the combined per-step calls.

Implements the optional ``StepRunBatchOperations`` / ``ArtifactBatchOperations`` capabilities of
``wharf.store.ports`` on SQL, for the workspace server (one HTTP request, one transaction).

Invariants:
- ``create_many`` / ``create_versions`` are one transaction each: on any error nothing of the
  batch is stored. The records they build are the ones ``create`` / ``create_version`` build
  for the same input (a test compares them field by field: keep ``_step_values`` in step with
  ``SqlStepRunRepository.create``), and those repositories' invariants hold unchanged: unique
  (run, name, attempt); versions numbered 1, 2, ... per artifact without gaps, also under
  concurrent writers. Artifacts are locked in sorted (project, name) order, so two batches
  never deadlock on each other; a conflict (two writers creating one artifact) restarts the
  whole batch.
- ``find_cached_or_create`` and ``finish`` compose the plain repository calls (the step and
  version repositories stay the single source of their rules); they save HTTP round trips, not
  transactions. A cache hit also answers the found step's output versions (immutable, so
  reading them after the lookup is as good as in its transaction) and, when asked, records
  the hit: a cache hit from a process that knows nothing of the found step is one request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, bindparam, func, select, tuple_

from wharf.core.errors import EntityExistsError, InputError, StoreError
from wharf.core.ids import new_id
from wharf.core.transitions import check_step_initial
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    CachedOrCreated,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import ArtifactRepository, StepRunRepository
from wharf.store.sql import tables as t
from wharf.store.sql.engine import MAX_CONFLICT_RETRIES, Database
from wharf.store.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.store.sql.repositories._base import (
    check_name,
    chunks,
    first_missing,
    not_found,
    status_times,
)
from wharf.store.sql.repositories.steps import find_cached_in
from wharf.store.sql.types import as_utc

_S = t.step_run
_A = t.artifact
_V = t.artifact_version
MAX_BATCH = 1000
"""Most records one batch may hold."""

_ARTIFACT_KEY = (_A.c.project_id == bindparam("project_id"), _A.c.name == bindparam("name"))
_LOCK_ARTIFACT = select(_A.c.id).where(*_ARTIFACT_KEY).with_for_update()
_MAX_VERSION = select(func.max(_V.c.version)).where(_V.c.artifact_id == bindparam("artifact_id"))
_SELECT_VERSIONS = select(_V, _A.c.name).select_from(_V.join(_A, _V.c.artifact_id == _A.c.id))


def _check_size(items: Sequence[Any], what: str) -> None:
    if len(items) > MAX_BATCH:
        raise InputError(f"At most {MAX_BATCH} {what} per batch, got {len(items)}.")


def _step_values(step: StepRunCreate, project_id: UUID, now: datetime) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": new_id(),
        "project_id": project_id,
        "run_id": step.run_id,
        "name": step.name,
        "status": step.status.value,
        "status_reason": step.status_reason,
        "attempt": step.attempt,
        "cache_key": step.cache_key,
        "cache_expires_at": as_utc(step.cache_expires_at),
        "original_step_run_id": step.original_step_run_id,
        "code_hash": step.code_hash,
        "source_code": step.source_code,
        "docstring": step.docstring,
        "parameters": step.parameters,
        "start_time": None,
        "end_time": None,
        "last_heartbeat": None,
        "heartbeat_deadline": None,
        "spec": None if step.spec is None else step.spec.model_dump(mode="json"),
        "logs_uri": step.logs_uri,
        "pid": None,
        "resource_request_id": None,
        "runtime": None if step.runtime is None else step.runtime.value,
        "created": now,
        "updated": now,
    }
    values.update(status_times(step.status, None, None, now))
    return values


def _links(step_id: UUID, links: Mapping[str, UUID]) -> list[dict[str, Any]]:
    return [{"step_run_id": step_id, "name": n, "artifact_version_id": v} for n, v in links.items()]


def _outputs(conn: Connection, step: StepRunRecord) -> dict[str, ArtifactVersionRecord]:
    """The output versions of ``step`` (one query); a version deleted meanwhile is left out,
    for the caller to find missing."""
    ids = list(step.outputs.values())
    if not ids:
        return {}
    rows = conn.execute(_SELECT_VERSIONS.where(_V.c.id.in_(ids))).all()
    by_id = {row.id: ArtifactVersionRecord.model_validate(row._asdict()) for row in rows}
    return {name: by_id[v] for name, v in step.outputs.items() if v in by_id}


class SqlBatchOperations:
    """Batches and combined calls over one database and its step and artifact repositories."""

    def __init__(
        self, db: Database, steps: StepRunRepository, artifacts: ArtifactRepository
    ) -> None:
        self._db = db
        self._steps = steps
        self._artifacts = artifacts

    # ----------------------------------------------------------------- step runs

    def create_many(self, steps: Sequence[StepRunCreate]) -> list[StepRunRecord]:
        _check_size(steps, "step runs")
        seen: set[tuple[UUID, str, int]] = set()
        for step in steps:
            check_step_initial(step.status)
            key = (step.run_id, step.name, step.attempt)
            if key in seen:
                raise EntityExistsError(
                    f"The batch holds step run '{step.name}' (attempt {step.attempt}) of run "
                    f"{step.run_id} twice."
                )
            seen.add(key)
        if not steps:
            return []

        def insert(conn: Connection) -> list[dict[str, Any]]:
            now = self._db.now()
            run_ids = list(dict.fromkeys(s.run_id for s in steps))
            projects: dict[UUID, UUID] = {}
            for chunk in chunks(run_ids):
                stmt = select(t.pipeline_run.c.id, t.pipeline_run.c.project_id).where(
                    t.pipeline_run.c.id.in_(chunk)
                )
                projects.update({row.id: row.project_id for row in conn.execute(stmt)})
            for run_id in run_ids:
                if run_id not in projects:
                    raise not_found("pipeline run", run_id)
            rows = [_step_values(s, projects[s.run_id], now) for s in steps]
            conn.execute(_S.insert(), rows)
            inputs = [
                link for s, r in zip(steps, rows, strict=True) for link in _links(r["id"], s.inputs)
            ]
            outputs = [
                link
                for s, r in zip(steps, rows, strict=True)
                for link in _links(r["id"], s.outputs)
            ]
            if inputs:
                conn.execute(t.step_run_input.insert(), inputs)
            if outputs:
                conn.execute(t.step_run_output.insert(), outputs)
            return rows

        try:
            rows = self._db.write(insert)
        except UniqueViolationError:
            raise self._existing_step(steps) from None
        except ForeignKeyViolationError as exc:
            raise (
                first_missing(
                    self._db,
                    [
                        (
                            "artifact version",
                            t.artifact_version,
                            [v for s in steps for v in (*s.inputs.values(), *s.outputs.values())],
                        ),
                        ("step run", t.step_run, [s.original_step_run_id for s in steps]),
                    ],
                )
                or exc
            ) from None
        records = []
        for step, values in zip(steps, rows, strict=True):
            record = {**values, "inputs": dict(step.inputs), "outputs": dict(step.outputs)}
            if step.spec is not None:
                record["spec"] = step.spec
            records.append(StepRunRecord.model_validate(record))
        return records

    def _existing_step(self, steps: Sequence[StepRunCreate]) -> EntityExistsError:
        keys = [(s.run_id, s.name, s.attempt) for s in steps]
        stmt = select(_S.c.run_id, _S.c.name, _S.c.attempt).where(
            tuple_(_S.c.run_id, _S.c.name, _S.c.attempt).in_(keys)
        )
        found = self._db.read(lambda c: [tuple(r) for r in c.execute(stmt)])
        if found:
            run_id, name, attempt = found[0]
            return EntityExistsError(
                f"Run {run_id} already has a step run '{name}' (attempt {attempt})."
            )
        return EntityExistsError("A step run of the batch already exists.")

    def find_cached_or_create(
        self, step: StepRunCreate, project_id: UUID, now: datetime, *, record_hit: bool = False
    ) -> CachedOrCreated:
        if step.cache_key is None:
            raise InputError("find_cached_or_create needs a step run with a cache key.")
        key = step.cache_key

        def look_up(
            conn: Connection,
        ) -> tuple[StepRunRecord | None, dict[str, ArtifactVersionRecord]]:
            cached = find_cached_in(conn, project_id, key, now)
            return cached, ({} if cached is None else _outputs(conn, cached))

        cached, outputs = self._db.read(look_up)  # one read transaction, hit or miss
        if cached is None:
            return CachedOrCreated(step=self._steps.create(step), created=True)
        recorded = self._steps.create(step.reusing(cached)) if record_hit else None
        return CachedOrCreated(step=cached, created=False, outputs=outputs, recorded=recorded)

    def finish(
        self,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        names = list(outputs)
        versions = dict(zip(names, self.create_versions([outputs[n] for n in names]), strict=True))
        if versions:
            links = {**(update.outputs or {}), **{n: v.id for n, v in versions.items()}}
            update = update.model_copy(update={"outputs": links})
        return self._steps.update(step_run_id, update), versions

    # ----------------------------------------------------------------- artifact versions

    def create_versions(
        self, versions: Sequence[ArtifactVersionCreate]
    ) -> list[ArtifactVersionRecord]:
        _check_size(versions, "artifact versions")
        for version in versions:
            check_name(version.name, "artifact")
        if not versions:
            return []
        keys = sorted({(v.project_id, v.name) for v in versions}, key=lambda k: (str(k[0]), k[1]))

        def insert(conn: Connection) -> list[dict[str, Any]]:
            now = self._db.now()
            ids: dict[tuple[UUID, str], UUID] = {}
            latest: dict[tuple[UUID, str], int] = {}
            for project_id, name in keys:
                params = {"project_id": project_id, "name": name}
                artifact_id = conn.execute(_LOCK_ARTIFACT, params).scalar()
                if artifact_id is None:
                    artifact_id = new_id()
                    conn.execute(_A.insert(), {"id": artifact_id, **params, "created": now})
                    top = None
                else:
                    top = conn.execute(_MAX_VERSION, {"artifact_id": artifact_id}).scalar()
                ids[(project_id, name)] = artifact_id
                latest[(project_id, name)] = top or 0
            rows = []
            for version in versions:
                key = (version.project_id, version.name)
                latest[key] += 1
                rows.append(
                    {
                        "id": new_id(),
                        "artifact_id": ids[key],
                        "project_id": version.project_id,
                        "version": latest[key],
                        "uri": version.uri,
                        "data_type": version.data_type,
                        "materializer": version.materializer,
                        "content_hash": version.content_hash,
                        "producer_step_run_id": version.producer_step_run_id,
                        "artifact_store_id": version.artifact_store_id,
                        "created": now,
                    }
                )
            conn.execute(_V.insert(), rows)
            return rows

        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                rows = self._db.write(insert)
            except UniqueViolationError:
                continue  # another writer created one of the artifacts first: lock it now
            except ForeignKeyViolationError as exc:
                raise (
                    first_missing(
                        self._db,
                        [
                            ("project", t.project, [v.project_id for v in versions]),
                            ("step run", t.step_run, [v.producer_step_run_id for v in versions]),
                        ],
                    )
                    or exc
                ) from None
            return [
                ArtifactVersionRecord.model_validate({**row, "name": v.name})
                for row, v in zip(rows, versions, strict=True)
            ]
        raise StoreError(
            f"Could not create {len(versions)} artifact versions after "
            f"{MAX_CONFLICT_RETRIES} conflicting attempts."
        )
