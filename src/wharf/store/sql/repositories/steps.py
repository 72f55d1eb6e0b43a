"""Step runs with their input and output artifact links, and the cache lookup.

Entry points: ``SqlStepRunRepository`` and the connection-level functions (``insert_step``,
``update_in``, ``find_cached_in``), the single source of these rules, which the batch operations
(:mod:`.batches`) compose inside their own transactions; heartbeats and the lost-heartbeat sweep
are in :mod:`.step_heartbeats`.

Invariants:
- A step run is unique per (run, name, attempt) and takes its project from its run; a stopping
  or stopped run gets no new step runs (``RunStoppingError``).
- ``update`` only adds outputs; status changes are checked by ``wharf.core.transitions`` with
  the row locked; ``heartbeat_deadline`` is cleared when the status becomes final.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from sqlalchemy import Connection, bindparam, select

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityExistsError, IllegalOperationError, RunStoppingError
from wharf.core.ids import new_id
from wharf.core.transitions import check_step_initial, check_step_transition
from wharf.sql import exact
from wharf.sql.direct import DirectStatement
from wharf.sql.engine import Database
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.sql.types import as_utc
from wharf.store.answers import HeartbeatResponse
from wharf.store.models import (
    Page,
    PageRequest,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    fetch_page,
    first_missing,
    id_prefix_condition,
    not_found,
    status_times,
    to_page,
)
from wharf.store.sql.repositories.step_heartbeats import FINAL_STATUSES, beat, fail_lost
from wharf.store.sql.repositories.step_links import link_rows, load_links, step_record

T = TypeVar("T")
_S = t.step_run
_IN = t.step_run_input
_OUT = t.step_run_output
DEFAULT_FILTER = StepRunFilter()

_RUN_STATE = DirectStatement(
    select(t.pipeline_run.c.project_id, t.pipeline_run.c.status).where(
        t.pipeline_run.c.id == bindparam("run_id")
    )
)
_STOP_STATUSES = frozenset({ExecutionStatus.STOPPING.value, ExecutionStatus.STOPPED.value})
_LOCK_STEP = DirectStatement(select(_S).where(_S.c.id == bindparam("step_id")).with_for_update())
_GET_STEP = DirectStatement(select(_S).where(_S.c.id == bindparam("step_id")))
_UPDATE_STEP = DirectStatement(_S.update().where(_S.c.id == bindparam("step_id")))
_INSERT_STEP = DirectStatement(_S.insert())
_FIND_CACHED = DirectStatement(
    select(_S)
    .where(
        _S.c.project_id == bindparam("project_id"),
        exact.equals(_S.c.cache_key, bindparam("cache_key")),
        _S.c.status == ExecutionStatus.COMPLETED.value,
        _S.c.cache_expires_at.is_(None) | (_S.c.cache_expires_at > bindparam("now")),
    )
    .order_by(_S.c.created.desc(), _S.c.id.desc())
    .limit(1)
)
_INSERT_INPUTS = DirectStatement(_IN.insert())
_INSERT_OUTPUTS = DirectStatement(_OUT.insert())


def find_cached_in(
    conn: Connection, project_id: UUID, cache_key: str, now: datetime
) -> StepRunRecord | None:
    """``find_cached`` on an open connection (the batch operations read more in the same
    transaction): the newest completed step run of the project with ``cache_key`` that has not
    expired at ``now``, served by the ``(project_id, cache_key, status, created, id)`` index."""
    params = {"project_id": project_id, "cache_key": cache_key, "now": as_utc(now)}
    row = _FIND_CACHED.first(conn, params)
    if row is None:
        return None
    inputs, outputs = load_links(conn, [row["id"]])[row["id"]]
    return step_record(row, inputs, outputs)


def step_values(step: StepRunCreate, now: datetime) -> dict[str, Any]:
    """The row ``create`` inserts for ``step`` (``project_id`` is filled from the run by
    :func:`insert_step`). ``spec`` is stored as ``StepSpec.model_dump(mode="json")`` (NULL when
    absent) and read back with ``model_validate``, so a step read in another process carries an
    equal spec. Its name and its links' names follow the stored-name rule (no edge whitespace:
    MariaDB's unique keys would take ``'x '`` for ``'x'``)."""
    check_step_initial(step.status)
    check_name(step.name, "step")
    check_link_names(step.inputs, "step input")
    check_link_names(step.outputs, "step output")
    values: dict[str, Any] = {
        "id": step.id or new_id(),
        "project_id": None,
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
        "resource_request_id": step.resource_request_id,
        "runtime": None if step.runtime is None else step.runtime.value,
        "calls": None if step.calls is None else {str(k): v for k, v in step.calls.items()},
        "created": now,
        "updated": now,
    }
    values.update(status_times(step.status, None, None, now))
    return values


def check_link_names(names: Iterable[str], what: str) -> None:
    """InputError if one of a step run's ``what`` ("step input", "step output") ``names``
    breaks the stored-name rule (:func:`check_name`)."""
    for name in names:
        check_name(name, what)


def refuse_stopping(run_id: UUID, status: str, step_name: str) -> None:
    """Raise ``RunStoppingError`` if a run in ``status`` may not get new step runs."""
    if status in _STOP_STATUSES:
        raise RunStoppingError(f"Run {run_id} is {status}: step '{step_name}' was not started.")


def insert_step(conn: Connection, step: StepRunCreate, values: dict[str, Any]) -> None:
    """Insert ``values`` (from :func:`step_values`) and the step's links, in the caller's write
    transaction. The run is read in the same transaction: a missing run is not found, a
    stopping or stopped one refuses the step, and a stop committed before this transaction is
    always seen (so a stop takes effect at the next step boundary without a read of its own).
    Input and output links are rows of ``step_run_input`` / ``step_run_output`` keyed by (step
    run, name), each naming an existing artifact version (foreign key)."""
    run = _RUN_STATE.first(conn, {"run_id": step.run_id})
    if run is None:
        raise not_found("pipeline run", step.run_id)
    refuse_stopping(step.run_id, run["status"], step.name)
    values["project_id"] = run["project_id"]
    _INSERT_STEP.execute(conn, values)
    if step.inputs:
        _INSERT_INPUTS.execute_many(conn, link_rows(values["id"], step.inputs))
    if step.outputs:
        _INSERT_OUTPUTS.execute_many(conn, link_rows(values["id"], step.outputs))


def inserted_record(step: StepRunCreate, values: dict[str, Any]) -> StepRunRecord:
    """The record of a step run inserted from ``values``, without reading it back."""
    if step.spec is not None:
        values = {**values, "spec": step.spec}  # the caller's instance: no JSON round trip
    return step_record(values, dict(step.inputs), dict(step.outputs))


def update_in(
    conn: Connection, now: datetime, step_run_id: UUID, update: StepRunUpdate
) -> StepRunRecord:
    """``update`` in the caller's write transaction (``now``: the store's time of the change).

    The step row is locked before the transition is checked; ``start_time`` is set when the step
    first becomes running, ``end_time`` when it first finishes or is retried (a final status),
    and ``heartbeat_deadline`` is cleared when the status becomes final (``last_heartbeat`` is
    kept). Outputs are only added: re-adding the same link is a no-op, pointing an existing name
    elsewhere is refused.
    """
    current = _LOCK_STEP.first(conn, {"step_id": step_run_id})
    if current is None:
        raise not_found("step run", step_run_id)
    values: dict[str, Any] = {}
    if update.status is not None and update.status.value != current["status"]:
        check_step_transition(ExecutionStatus(current["status"]), update.status)
        values["status"] = update.status.value
        values.update(status_times(update.status, current["start_time"], current["end_time"], now))
        if update.status in FINAL_STATUSES and current["end_time"] is None:
            values["end_time"] = now  # a retried attempt (retrying) has ended too
        if update.status in FINAL_STATUSES and current["heartbeat_deadline"] is not None:
            values["heartbeat_deadline"] = None
    if update.status_reason is not None:
        values["status_reason"] = update.status_reason
    if update.cache_key is not None:
        values["cache_key"] = update.cache_key
    if update.cache_expires_at is not None:
        values["cache_expires_at"] = as_utc(update.cache_expires_at)
    if update.logs_uri is not None:
        values["logs_uri"] = update.logs_uri
    if update.pid is not None:
        values["pid"] = update.pid
        values["pid_host"] = update.pid_host
        values["pid_start"] = update.pid_start
    if update.resource_request_id is not None:
        values["resource_request_id"] = update.resource_request_id
    check_link_names(update.outputs or (), "step output")
    inputs, outputs = load_links(conn, [step_run_id])[step_run_id]
    new_outputs = _new_outputs(step_run_id, outputs, update.outputs or {})
    if values or new_outputs:
        values["updated"] = now
        _UPDATE_STEP.execute(conn, {"step_id": step_run_id, **values})
    if new_outputs:
        _INSERT_OUTPUTS.execute_many(conn, link_rows(step_run_id, new_outputs))
        outputs.update(new_outputs)
    current.update(values)
    return step_record(current, inputs, outputs)


def _new_outputs(
    step_run_id: UUID, existing: dict[str, UUID], added: dict[str, UUID]
) -> dict[str, UUID]:
    new = {}
    for name, version_id in added.items():
        linked = existing.get(name)
        if linked is None:
            new[name] = version_id
        elif linked != version_id:
            raise IllegalOperationError(
                f"Step run {step_run_id} already has output '{name}' "
                f"(artifact version {linked}); it cannot be relinked to {version_id}."
            )
    return new


def missing_reference(
    db: Database,
    artifact_version_ids: Iterable[UUID],
    original_step_run_ids: Iterable[UUID | None] = (),
    run_ids: Iterable[UUID | None] = (),
) -> Exception | None:
    """What a foreign-key violation of a step-run write was about, read after the fact."""
    return first_missing(
        db,
        [
            ("pipeline run", t.pipeline_run, list(run_ids)),
            ("artifact version", t.artifact_version, list(artifact_version_ids)),
            ("step run", t.step_run, list(original_step_run_ids)),
        ],
    )


def written_before(conn: Connection, step: StepRunCreate) -> StepRunRecord | None:
    """The step run a repeated create of ``step`` wrote already: the one stored under
    ``step.id`` for the same run, name and attempt (a retry whose first answer was lost), or
    None (no id, none stored, or another step's)."""
    if step.id is None:
        return None
    row = _GET_STEP.first(conn, {"step_id": step.id})
    if row is None or (row["run_id"], row["name"], row["attempt"]) != (
        step.run_id,
        step.name,
        step.attempt,
    ):
        return None
    inputs, outputs = load_links(conn, [step.id])[step.id]
    return step_record(row, inputs, outputs)


def finished_before(
    conn: Connection, step_run_id: UUID, update: StepRunUpdate, names: Iterable[str]
) -> StepRunRecord | None:
    """The step run a repeated finish of ``step_run_id`` completed already (a retry whose
    answer was lost: its replica was killed, or its connection dropped, after the commit):
    completed, as ``update`` completes it, with outputs ``names`` and ``update.outputs``
    linked; else None (the finish goes on, and its rules refuse what is not a repeat)."""
    if update.status is not ExecutionStatus.COMPLETED:
        return None
    row = _GET_STEP.first(conn, {"step_id": step_run_id})
    if row is None or row["status"] != ExecutionStatus.COMPLETED.value:
        return None
    inputs, outputs = load_links(conn, [step_run_id])[step_run_id]
    linked = update.outputs or {}
    if any(n not in outputs for n in names) or any(outputs.get(n) != v for n, v in linked.items()):
        return None
    return step_record(row, inputs, outputs)


def write_step(db: Database, step: StepRunCreate, fn: Callable[[Connection], T]) -> T:
    """Run ``fn`` (which inserts ``step``) in a write transaction; constraint violations
    become the repository's errors."""
    try:
        return db.write(fn)
    except UniqueViolationError:
        raise EntityExistsError(
            f"Run {step.run_id} already has a step run '{step.name}' (attempt {step.attempt})."
        ) from None
    except ForeignKeyViolationError as exc:
        missing = missing_reference(
            db,
            [*step.inputs.values(), *step.outputs.values()],
            [step.original_step_run_id],
            [step.run_id],
        )
        raise missing or exc from None


class SqlStepRunRepository(SqlRepository):
    """The step runs of the engine's per-step hot path: statements are built once per module and
    each call costs the fewest round trips (create = run read + inserts; update = locked read +
    update + link read, + output insert), with records assembled from values already in hand."""

    def create(self, step: StepRunCreate) -> StepRunRecord:
        """A step run created with an id that is stored already for the same step (a retry
        whose answer was lost) is answered as stored, not created twice."""
        values = step_values(step, self._db.now())
        try:
            write_step(self._db, step, lambda conn: insert_step(conn, step, values))
        except (EntityExistsError, RunStoppingError):  # written already by a lost try?
            existing = self._db.read(lambda conn: written_before(conn, step))
            if existing is None:
                raise
            return existing
        return inserted_record(step, values)

    def get(self, step_run_id: UUID) -> StepRunRecord:
        def get(conn: Connection) -> StepRunRecord | None:
            row = _GET_STEP.first(conn, {"step_id": step_run_id})
            if row is None:
                return None
            inputs, outputs = load_links(conn, [step_run_id])[step_run_id]
            return step_record(row, inputs, outputs)

        record = self._db.read(get)
        if record is None:
            raise not_found("step run", step_run_id)
        return record

    def list(
        self, filter: StepRunFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[StepRunRecord]:
        conditions = []
        if filter.project_id is not None:
            conditions.append(_S.c.project_id == filter.project_id)
        if filter.run_id is not None:
            conditions.append(_S.c.run_id == filter.run_id)
        if filter.names is not None:
            conditions.append(exact.equals_any(_S.c.name, filter.names))
        if filter.status is not None:
            conditions.append(_S.c.status == filter.status.value)
        if filter.statuses is not None:
            conditions.append(_S.c.status.in_([status.value for status in filter.statuses]))
        if filter.cache_key is not None:
            conditions.append(exact.equals(_S.c.cache_key, filter.cache_key))
        if filter.id_prefix is not None:
            conditions.append(id_prefix_condition(_S, filter.id_prefix))

        def query(conn: Connection) -> Page[StepRunRecord]:
            rows, total = fetch_page(conn, select(_S), _S, conditions, page)
            links = load_links(conn, [r.id for r in rows]) if rows else {}
            return to_page([step_record(r._asdict(), *links[r.id]) for r in rows], total, page)

        return self._db.read(query)

    def update(self, step_run_id: UUID, update: StepRunUpdate) -> StepRunRecord:
        try:
            # One instant per change: start/end time equal ``updated``.
            return self._db.write(lambda conn: update_in(conn, self._db.now(), step_run_id, update))
        except ForeignKeyViolationError as exc:
            missing = missing_reference(self._db, (update.outputs or {}).values())
            raise missing or exc from None

    def find_cached(self, project_id: UUID, cache_key: str, now: datetime) -> StepRunRecord | None:
        return self._db.read(lambda conn: find_cached_in(conn, project_id, cache_key, now))

    def update_heartbeat(
        self, step_run_id: UUID, liveness_timeout_seconds: float
    ) -> HeartbeatResponse:
        return beat(self._db, step_run_id, liveness_timeout_seconds)

    def fail_lost_heartbeats(
        self, now: datetime, run_id: UUID | None = None
    ) -> builtins.list[StepRunRecord]:
        return fail_lost(self._db, now, run_id)
