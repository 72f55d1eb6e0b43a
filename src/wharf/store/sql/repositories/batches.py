"""The SQL step-run and artifact repositories with their combined calls (``SqlStepRuns``,
``SqlArtifacts``): the batches and per-step calls of ``wharf.store.ports``, one transaction each.

Invariants: on any error nothing of a call is stored; the records built are the ones
``create`` / ``create_version`` build for the same input, and those repositories' invariants
hold unchanged (they are composed from the connection-level functions of
:mod:`.steps`, the single source of their rules, and the version insertion of the artifacts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, bindparam, select, tuple_

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityExistsError, InputError, RunStoppingError
from wharf.core.transitions import check_step_initial
from wharf.sql.direct import DirectStatement
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.sql.types import as_utc
from wharf.store.answers import CachedOrCreated
from wharf.store.composed import creation_flags
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import chunks, not_found
from wharf.store.sql.repositories.artifacts import (
    SqlArtifactRepository,
    insert_versions,
    version_records,
    write_versions,
)
from wharf.store.sql.repositories.step_links import load_links, step_record
from wharf.store.sql.repositories.steps import (
    SqlStepRunRepository,
    find_cached_in,
    finished_before,
    insert_step,
    inserted_record,
    missing_reference,
    refuse_stopping,
    step_values,
    update_in,
    write_step,
    written_before,
)

_S = t.step_run
_A = t.artifact
_V = t.artifact_version
MAX_BATCH = 1000
"""Most records one batch may hold."""

_OUT = t.step_run_output
_OUTPUT_VERSIONS = DirectStatement(
    select(_V, _A.c.name, _OUT.c.name.label("output_name"))
    .select_from(
        _OUT.join(_V, _OUT.c.artifact_version_id == _V.c.id).join(_A, _V.c.artifact_id == _A.c.id)
    )
    .where(_OUT.c.step_run_id == bindparam("step_id"))
)


def _check_size(items: Sequence[Any], what: str) -> None:
    if len(items) > MAX_BATCH:
        raise InputError(f"At most {MAX_BATCH} {what} per batch, got {len(items)}.")


def _links(step_id: UUID, links: Mapping[str, UUID]) -> list[dict[str, Any]]:
    return [{"step_run_id": step_id, "name": n, "artifact_version_id": v} for n, v in links.items()]


def _outputs(conn: Connection, step_run_id: UUID) -> dict[str, ArtifactVersionRecord]:
    """The output versions of a step run by output name (one query)."""
    outputs = {}
    for values in _OUTPUT_VERSIONS.rows(conn, {"step_id": step_run_id}):
        name = values.pop("output_name")
        outputs[name] = ArtifactVersionRecord.model_validate(values)
    return outputs


def _insert_steps(
    conn: Connection, steps: Sequence[StepRunCreate], rows: Sequence[dict[str, Any]]
) -> None:
    """Insert ``rows`` (``step_values`` of ``steps``) with their links in the caller's write
    transaction: each run read once (a missing run is not found, a stopping one refuses its
    steps), then one multi-row insert per table."""
    if not steps:
        return
    run_ids = list(dict.fromkeys(s.run_id for s in steps))
    runs: dict[UUID, Any] = {}
    for chunk in chunks(run_ids):
        stmt = select(
            t.pipeline_run.c.id, t.pipeline_run.c.project_id, t.pipeline_run.c.status
        ).where(t.pipeline_run.c.id.in_(chunk))
        runs.update({row.id: row for row in conn.execute(stmt)})
    for step in steps:
        run = runs.get(step.run_id)
        if run is None:
            raise not_found("pipeline run", step.run_id)
        refuse_stopping(step.run_id, run.status, step.name)
    for step, row in zip(steps, rows, strict=True):
        row["project_id"] = runs[step.run_id].project_id
    conn.execute(_S.insert(), list(rows))
    inputs = [link for s, r in zip(steps, rows, strict=True) for link in _links(r["id"], s.inputs)]
    outputs = [
        link for s, r in zip(steps, rows, strict=True) for link in _links(r["id"], s.outputs)
    ]
    if inputs:
        conn.execute(t.step_run_input.insert(), inputs)
    if outputs:
        conn.execute(t.step_run_output.insert(), outputs)


def _cached_of_keys(
    conn: Connection, project_id: UUID, keys: Sequence[str], now: datetime
) -> dict[str, StepRunRecord]:
    """``find_cached`` of each of ``keys`` (one query per chunk of keys): the newest completed,
    unexpired step run of the project by cache key; keys without one are left out."""
    newest: dict[str, dict[str, Any]] = {}
    wanted = list(dict.fromkeys(keys))
    for chunk in chunks(wanted):
        stmt = (
            select(_S)
            .where(
                _S.c.project_id == project_id,
                _S.c.cache_key.in_(chunk),
                _S.c.status == ExecutionStatus.COMPLETED.value,
                _S.c.cache_expires_at.is_(None) | (_S.c.cache_expires_at > as_utc(now)),
            )
            .order_by(_S.c.created.desc(), _S.c.id.desc())
        )
        for row in conn.execute(stmt):
            newest.setdefault(row.cache_key, dict(row._mapping))
    links = load_links(conn, [row["id"] for row in newest.values()]) if newest else {}
    return {key: step_record(row, *links[row["id"]]) for key, row in newest.items()}


def _answer_before(conn: Connection, step: StepRunCreate) -> CachedOrCreated | None:
    """The answer of a repeated cache decision of ``step`` that wrote its step run already
    (see ``written_before``): the step run as created, or the hit it was recorded as (the
    cached step run with its outputs, and the record); None if nothing is stored for it."""
    record = written_before(conn, step)
    return None if record is None else _answer_of(conn, record)


def _answers_before(
    conn: Connection, steps: Sequence[StepRunCreate]
) -> list[CachedOrCreated | None]:
    """``_answer_before`` of each of ``steps``, in order (the step runs read together)."""
    stored = _written_before_many(conn, steps) if steps else []
    return [None if record is None else _answer_of(conn, record) for record in stored]


def _answer_of(conn: Connection, record: StepRunRecord) -> CachedOrCreated:
    """The decision whose written step run is ``record``: the hit it records (the cached step
    run read, with its outputs), else the step run created."""
    original = record.original_step_run_id
    if record.status is not ExecutionStatus.CACHED or original is None:
        return CachedOrCreated(step=record, created=True)
    cached = _record_of(conn, original)
    return CachedOrCreated(
        step=cached, created=False, outputs=_outputs(conn, original), recorded=record
    )


def _written_before_many(
    conn: Connection, steps: Sequence[StepRunCreate]
) -> list[StepRunRecord | None]:
    """``written_before`` of each of ``steps``, in order (one query per chunk of ids, one for
    the links): the step run stored under its id for the same run, name and attempt, or None."""
    ids = [s.id for s in steps if s.id is not None]
    rows: dict[UUID, dict[str, Any]] = {}
    for chunk in chunks(ids):
        rows.update(
            {
                row.id: dict(row._mapping)
                for row in conn.execute(select(_S).where(_S.c.id.in_(chunk)))
            }
        )
    same = {
        s.id: rows[s.id]
        for s in steps
        if s.id in rows
        and (rows[s.id]["run_id"], rows[s.id]["name"], rows[s.id]["attempt"])
        == (s.run_id, s.name, s.attempt)
    }
    links = load_links(conn, list(same)) if same else {}
    return [step_record(same[s.id], *links[s.id]) if s.id in same else None for s in steps]


def _partly_written(
    steps: Sequence[StepRunCreate], stored: Sequence[StepRunRecord | None]
) -> EntityExistsError:
    """The refusal of a batch only some of whose step runs are stored under their ids (see
    ``written_before``): it is not a repeat of the batch that wrote them."""
    written = [repr(s.name) for s, r in zip(steps, stored, strict=True) if r is not None]
    others = [repr(s.name) for s, r in zip(steps, stored, strict=True) if r is None]
    return EntityExistsError(
        f"Step run(s) {', '.join(written)} of the batch are stored under their ids already, "
        f"{', '.join(others)} not: a repeated batch must be the one written; nothing was created."
    )


def _record_of(conn: Connection, step_run_id: UUID) -> StepRunRecord:
    row = conn.execute(select(_S).where(_S.c.id == step_run_id)).first()
    if row is None:
        raise not_found("step run", step_run_id)
    return step_record(dict(row._mapping), *load_links(conn, [step_run_id])[step_run_id])


def _recorded_hit(step: StepRunCreate, cached: StepRunRecord) -> StepRunCreate:
    """The step run that records ``step`` reusing ``cached``, under the id ``step`` was given
    (if any), so a repeated decision finds it."""
    return step.reusing(cached).model_copy(update={"id": step.id})


def _outputs_of_many(
    conn: Connection, step_run_ids: Sequence[UUID]
) -> dict[UUID, dict[str, ArtifactVersionRecord]]:
    """The output versions of each of ``step_run_ids`` by output name (one query per chunk)."""
    outputs: dict[UUID, dict[str, ArtifactVersionRecord]] = {i: {} for i in step_run_ids}
    wanted = list(outputs)
    for chunk in chunks(wanted):
        stmt = (
            select(_V, _A.c.name, _OUT.c.name.label("output_name"), _OUT.c.step_run_id)
            .select_from(
                _OUT.join(_V, _OUT.c.artifact_version_id == _V.c.id).join(
                    _A, _V.c.artifact_id == _A.c.id
                )
            )
            .where(_OUT.c.step_run_id.in_(chunk))
        )
        for row in conn.execute(stmt):
            values = dict(row._mapping)
            owner = values.pop("step_run_id")
            name = values.pop("output_name")
            outputs[owner][name] = ArtifactVersionRecord.model_validate(values)
    return outputs


class SqlStepRuns(SqlStepRunRepository):
    """Step runs (``wharf.store.ports.StepRunRepository``) with the combined calls."""

    def create_many(self, steps: Sequence[StepRunCreate]) -> list[StepRunRecord]:
        """Create ``steps`` in one transaction (rows built by ``steps.step_values``, as
        ``create`` builds them): unique per (run, name, attempt), nothing stored on any error.

        Repeated with the ids of step runs it wrote (a retry whose answer was lost), it answers
        them as stored, as ``create`` does, also once their run is stopping; a batch of which
        only some step runs are stored so (it is not the one written) is refused whole."""
        _check_size(steps, "step runs")
        seen: set[tuple[UUID, str, int]] = set()
        ids: set[UUID] = set()
        for step in steps:
            check_step_initial(step.status)
            key = (step.run_id, step.name, step.attempt)
            if key in seen:
                raise EntityExistsError(
                    f"The batch holds step run '{step.name}' (attempt {step.attempt}) of run "
                    f"{step.run_id} twice."
                )
            seen.add(key)
            if step.id is not None:
                if step.id in ids:
                    raise EntityExistsError(f"The batch names step run {step.id} twice.")
                ids.add(step.id)
        if not steps:
            return []
        now = self._db.now()
        rows = [step_values(s, now) for s in steps]

        def insert(conn: Connection) -> None:
            _insert_steps(conn, steps, rows)

        try:
            self._db.write(insert)
        except (UniqueViolationError, RunStoppingError) as exc:  # written already by a lost try?
            stored = self._db.read(lambda conn: _written_before_many(conn, steps)) if ids else []
            if stored and all(record is not None for record in stored):
                return [record for record in stored if record is not None]
            if isinstance(exc, RunStoppingError):
                raise
            if any(record is not None for record in stored):
                raise _partly_written(steps, stored) from None
            raise self._existing_step(steps) from None
        except ForeignKeyViolationError as exc:
            raise (
                missing_reference(
                    self._db,
                    [v for s in steps for v in (*s.inputs.values(), *s.outputs.values())],
                    [s.original_step_run_id for s in steps],
                )
                or exc
            ) from None
        return [inserted_record(s, r) for s, r in zip(steps, rows, strict=True)]

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
        """Find the cached step run of ``step``'s key or create ``step``, in one write transaction.

        The lookup runs in the transaction that creates the step run, so on SQLite (``BEGIN
        IMMEDIATE``) nothing can complete a step with the same key between the two. A hit also
        answers the found step's output versions and, with ``record_hit``, records the hit, so a
        process that knows nothing of the found step needs one request.

        Repeated with the id of a step run it wrote (a retry whose answer was lost), it answers
        what it wrote, whatever the lookup finds now: a miss written is answered created even
        once another run cached its key (answering that hit would leave the step run written
        behind, running or queued for ever). A call that writes learns of the repeat from its
        insert's conflict; one that would write nothing (a hit not recorded) reads the id.
        """
        if step.cache_key is None:
            raise InputError("find_cached_or_create needs a step run with a cache key.")
        key = step.cache_key
        created_at = self._db.now()

        def find_or_create(conn: Connection) -> CachedOrCreated:
            cached = find_cached_in(conn, project_id, key, now)
            if cached is not None and not record_hit:  # nothing to write: written before?
                before = _answer_before(conn, step)
                if before is not None:
                    return before
            if cached is None:
                values = step_values(step, created_at)
                insert_step(conn, step, values)
                return CachedOrCreated(step=inserted_record(step, values), created=True)
            recorded = None
            if record_hit:
                reuse = _recorded_hit(step, cached)
                values = step_values(reuse, created_at)
                insert_step(conn, reuse, values)
                recorded = inserted_record(reuse, values)
            outputs = _outputs(conn, cached.id)
            return CachedOrCreated(step=cached, created=False, outputs=outputs, recorded=recorded)

        try:
            return write_step(self._db, step, find_or_create)
        except (EntityExistsError, RunStoppingError):  # written already by a lost try?
            answer = self._db.read(lambda conn: _answer_before(conn, step))
            if answer is None:
                raise
            return answer

    def find_cached_or_create_many(
        self,
        steps: Sequence[StepRunCreate],
        project_id: UUID,
        now: datetime,
        *,
        record_hit: bool = False,
        create: Sequence[bool] | None = None,
    ) -> list[CachedOrCreated | None]:
        """``find_cached_or_create`` for a batch, in one write transaction of a few statements
        whatever its size: one lookup for all cache keys (per chunk), every step run written
        (created steps and recorded hits) inserted together with each run read once (a stopping
        run refuses the whole batch), and the hits' output versions in one query. Repeated (a
        retry whose answer was lost), each step run it wrote, known by its id, is answered as
        written whatever the lookup finds now (see ``find_cached_or_create``), also once its
        run is stopping, and the others are decided again: a step it would write nothing for
        (a hit not recorded, a miss not created) has its id read in the decision; a write's
        conflict (or its run's refusal) has the whole batch decided again with every id read."""
        flags = creation_flags(steps, create)
        _check_size(steps, "step runs")
        if not steps:
            return []
        created_at = self._db.now()

        def decide(conn: Connection, repeated: bool) -> list[CachedOrCreated | None]:
            found = _cached_of_keys(conn, project_id, [s.cache_key or "" for s in steps], now)
            idle = [
                not (record_hit if found.get(s.cache_key or "") is not None else make)
                for s, make in zip(steps, flags, strict=True)
            ]
            check = [i for i, s in enumerate(steps) if s.id is not None and (repeated or idle[i])]
            answered = _answers_before(conn, [steps[i] for i in check])
            before = dict(zip(check, answered, strict=True))
            writes: list[StepRunCreate] = []
            rows: list[dict[str, Any]] = []
            plan: list[tuple[StepRunRecord | None, int | None]] = []  # (hit, row written)
            for i, step in enumerate(steps):
                cached = found.get(step.cache_key or "")
                if before.get(i) is not None or idle[i]:
                    plan.append((cached, None))  # nothing to write for it
                    continue
                written = step if cached is None else _recorded_hit(step, cached)
                plan.append((cached, len(rows)))
                writes.append(written)
                rows.append(step_values(written, created_at))
            _insert_steps(conn, writes, rows)
            hits = [cached.id for cached, _ in plan if cached is not None]
            outputs = _outputs_of_many(conn, list(dict.fromkeys(hits))) if hits else {}
            answers: list[CachedOrCreated | None] = []
            for i, (cached, index) in enumerate(plan):
                answer = before.get(i)
                if answer is not None:
                    answers.append(answer)
                    continue
                record = None if index is None else inserted_record(writes[index], rows[index])
                if cached is None:
                    answers.append(
                        None if record is None else CachedOrCreated(step=record, created=True)
                    )
                else:
                    answers.append(
                        CachedOrCreated(
                            step=cached, created=False, outputs=outputs[cached.id], recorded=record
                        )
                    )
            return answers

        try:
            try:
                return self._db.write(lambda conn: decide(conn, False))
            except (UniqueViolationError, RunStoppingError):
                if all(s.id is None for s in steps):
                    raise
                return self._db.write(lambda conn: decide(conn, True))  # a repeated batch?
        except UniqueViolationError:
            raise self._existing_step(steps) from None
        except ForeignKeyViolationError as exc:
            raise (
                missing_reference(
                    self._db,
                    [v for s in steps for v in (*s.inputs.values(), *s.outputs.values())],
                    [s.original_step_run_id for s in steps],
                    [s.run_id for s in steps],
                )
                or exc
            ) from None

    def finish(
        self,
        step_run_id: UUID,
        update: StepRunUpdate,
        outputs: Mapping[str, ArtifactVersionCreate],
    ) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
        """Create the output versions and update the step in one write transaction (none if the
        update is refused); a repeat of a finish that completed the step answers what it did."""
        names = list(outputs)
        versions = [outputs[n] for n in names]
        _check_size(versions, "artifact versions")

        def apply(conn: Connection) -> tuple[StepRunRecord, dict[str, ArtifactVersionRecord]]:
            repeated = finished_before(conn, step_run_id, update, names)
            if repeated is not None:
                return repeated, _outputs(conn, step_run_id)
            now = self._db.now()  # the versions' and the update's instant
            rows = insert_versions(conn, versions, now)
            links = {
                **(update.outputs or {}),
                **{n: r["id"] for n, r in zip(names, rows, strict=True)},
            }
            linked = update.model_copy(update={"outputs": links}) if rows else update
            created = dict(zip(names, version_records(rows, versions), strict=True))
            return update_in(conn, now, step_run_id, linked), created

        return write_versions(self._db, apply, versions, (update.outputs or {}).values())


class SqlArtifacts(SqlArtifactRepository):
    """Artifacts (``wharf.store.ports.ArtifactRepository``) with batch creation."""

    def create_versions(
        self, versions: Sequence[ArtifactVersionCreate]
    ) -> list[ArtifactVersionRecord]:
        """Create ``versions`` in one transaction, numbered 1, 2, ... per artifact without gaps
        also under concurrent writers. Artifacts are locked in sorted (project, name) order, so
        two batches never deadlock on each other; a conflict (two writers creating one artifact)
        restarts the whole batch."""
        _check_size(versions, "artifact versions")
        if not versions:
            return []
        rows = write_versions(
            self._db, lambda conn: insert_versions(conn, versions, self._db.now()), versions
        )
        return version_records(rows, versions)
