"""Pipeline runs: creation, status updates, placeholder replacement (``get_or_create``), deletion.

Invariants:
- A run is unique per (snapshot, orchestrator run id); the orchestrator run id is set at most
  once and never changed.
- Every status change is checked by ``wharf.core.transitions`` while the run's row is locked
  (``SELECT ... FOR UPDATE``; ``BEGIN IMMEDIATE`` on SQLite), so concurrent updates apply one
  after the other and an illegal one changes nothing; ``start_time`` is set when the run first
  becomes running (also when created running), ``end_time`` when it first finishes.
- A create repeated under the id its caller chose answers the run it wrote, and is refused
  (``EntityExistsError``) if it asks for another (``run_repeats``).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, Row, bindparam, case, delete, select, update

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus, MetadataResourceType
from wharf.core.errors import EntityExistsError, IllegalOperationError, StoreError
from wharf.core.transitions import check_run_initial, check_run_transition
from wharf.sql import exact
from wharf.sql.engine import MAX_CONFLICT_RETRIES
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.store.answers import LostRun, RunHeartbeatResponse
from wharf.store.models import (
    OrchestratorProcess,
    Page,
    PageRequest,
    PipelineRunRecord,
    RunCreate,
    RunFilter,
    RunStart,
    RunUpdate,
)
from wharf.store.sql import tables as t
from wharf.store.sql.repositories import run_liveness, run_metadata, run_records, run_repeats
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    chunks,
    first_missing,
    id_prefix_condition,
    list_page,
    not_found,
    status_times,
)
from wharf.store.sql.repositories.run_records import Recorded, run_values

_R = t.pipeline_run
_PLACEHOLDERS = (ExecutionStatus.INITIALIZING.value, ExecutionStatus.PROVISIONING.value)
DEFAULT_FILTER = RunFilter()


def _record(row: Row[Any] | Mapping[str, Any]) -> PipelineRunRecord:
    data = row._asdict() if isinstance(row, Row) else row
    return PipelineRunRecord.model_validate(data)


_STATUS = select(_R.c.status).where(_R.c.id == bindparam("run_id"))


class SqlRunRepository(SqlRepository):
    def create(self, run: RunCreate) -> PipelineRunRecord:
        return self.create_with_metadata(run, {})

    def create_with_metadata(self, run: RunCreate, metadata: dict[str, Any]) -> PipelineRunRecord:
        check_run_initial(run.status)
        run_metadata.check_values(metadata)

        def write(conn: Connection) -> PipelineRunRecord:
            created = self._insert(conn, run)
            kind = MetadataResourceType.PIPELINE_RUN  # the metadata dated as the run
            run_metadata.insert_values(conn, created.created, kind, created.id, metadata)
            return created

        try:
            return self._db.write(write)
        except UniqueViolationError:
            repeated = run_repeats.repeated_run(self._db, run)  # its answer lost: the run written
            if repeated is not None:
                return repeated
            raise EntityExistsError(
                f"A run of snapshot {run.snapshot_id} with orchestrator run id "
                f"'{run.orchestrator_run_id}' already exists."
            ) from None
        except ForeignKeyViolationError as exc:
            raise self._missing_reference(run) or exc from None

    def get(self, run_id: UUID) -> PipelineRunRecord:
        stmt = select(_R).where(_R.c.id == run_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("pipeline run", run_id)
        return _record(row)

    def get_status(self, run_id: UUID) -> ExecutionStatus:
        row = self._db.read(lambda c: c.execute(_STATUS, {"run_id": run_id}).first())
        if row is None:
            raise not_found("pipeline run", run_id)
        return ExecutionStatus(row[0])

    def list(
        self, filter: RunFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[PipelineRunRecord]:
        conditions = []
        for field in ("project_id", "pipeline_id", "snapshot_id"):
            value = getattr(filter, field)
            if value is not None:
                conditions.append(_R.c[field] == value)
        for field in ("name", "orchestrator_run_id"):
            text = getattr(filter, field)
            if text is not None:
                conditions.append(exact.equals(_R.c[field], text))
        if filter.status is not None:
            conditions.append(_R.c.status == filter.status.value)
        if filter.id_prefix is not None:
            conditions.append(id_prefix_condition(_R, filter.id_prefix))
        return list_page(self._db, _R, conditions, page, _record)

    def update(self, run_id: UUID, update: RunUpdate) -> PipelineRunRecord:
        def apply(conn: Connection) -> PipelineRunRecord:
            row = conn.execute(select(_R).where(_R.c.id == run_id).with_for_update()).first()
            if row is None:
                raise not_found("pipeline run", run_id)
            current = row._asdict()
            now = self._db.now()  # one instant per change: start/end time equal ``updated``
            values: dict[str, Any] = {}
            if update.status is not None and update.status.value != current["status"]:
                check_run_transition(ExecutionStatus(current["status"]), update.status)
                values["status"] = update.status.value
                values.update(
                    status_times(update.status, current["start_time"], current["end_time"], now)
                )
                values.update(
                    run_liveness.ended_values(update.status, current["heartbeat_deadline"])
                )
            if update.status_reason is not None:
                values["status_reason"] = update.status_reason
            status = values.get("status", current["status"])
            if (
                update.stop_forced
                and not current["stop_forced"]
                and status == ExecutionStatus.STOPPING.value
            ):
                values["stop_forced"] = True
            new_orid = update.orchestrator_run_id
            if new_orid is not None and new_orid != current["orchestrator_run_id"]:
                if current["orchestrator_run_id"] is not None:
                    raise IllegalOperationError(
                        f"Pipeline run {run_id}: the orchestrator run id is already set to "
                        f"'{current['orchestrator_run_id']}'; it cannot become '{new_orid}'."
                    )
                values["orchestrator_run_id"] = new_orid
            if not values:
                return _record(current)
            values["updated"] = now
            conn.execute(_R.update().where(_R.c.id == run_id).values(values))
            return _record({**current, **values})

        try:
            return self._db.write(apply)
        except UniqueViolationError:
            raise EntityExistsError(
                f"Another run of the same snapshot already has orchestrator run id "
                f"'{update.orchestrator_run_id}'."
            ) from None

    def get_or_create(self, run: RunCreate) -> tuple[PipelineRunRecord, bool]:
        """The rules of ``RunRepository.get_or_create``. The placeholder preference (matching
        orchestrator run id first, then NULL, then oldest) is an explicit ``CASE`` in ``ORDER
        BY``, never the backends' different NULL orderings. Replacing a placeholder counts as
        creating the run (``created`` is True): the caller turned it into the real run.
        Concurrent callers are reconciled by the unique constraint: a loser's transaction rolls
        back and it starts over, finding the winner's run."""
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                return self._db.write(lambda c: self._get_or_create_once(c, run))
            except UniqueViolationError:
                # A repeat under the id its caller chose finds the run it wrote (another run
                # there: EntityExistsError, never a retry that cannot succeed); else a
                # concurrent caller inserted or claimed (snapshot, orchestrator run id) first:
                # our transaction rolled back, and the next pass finds their run.
                repeated = run_repeats.repeated_run(self._db, run)
                if repeated is not None:
                    return repeated, False
                continue
            except ForeignKeyViolationError as exc:
                raise self._missing_reference(run) or exc from None
        raise StoreError(
            f"Could not get or create a run of snapshot {run.snapshot_id} after "
            f"{MAX_CONFLICT_RETRIES} conflicting attempts."
        )

    def record(
        self,
        project_id: UUID,
        pipeline_name: str,
        stack_id: UUID | None,
        spec: PipelineSpec,
        run: RunStart,
    ) -> Recorded:
        return run_records.record(self._db, project_id, pipeline_name, stack_id, spec, run)

    def finish(
        self, run_id: UUID, status: ExecutionStatus, reason: str | None
    ) -> PipelineRunRecord:
        return run_records.finish(self._db, run_id, status, reason)

    def issue_token(self, run_id: UUID) -> str | None:
        return None  # a run's processes open the database themselves

    def update_heartbeat(self, run_id: UUID, process: OrchestratorProcess) -> RunHeartbeatResponse:
        return run_liveness.beat(self._db, run_id, process)

    def list_sweep_candidates(
        self, now: datetime, host: str | None = None
    ) -> builtins.list[PipelineRunRecord]:
        return run_liveness.candidates(self._db, now, host)

    def fail_lost_orchestrators(
        self, now: datetime, orphaned: Sequence[UUID] = (), spared: Sequence[UUID] = ()
    ) -> builtins.list[LostRun]:
        return run_liveness.fail_lost(self._db, now, orphaned, spared)

    def delete(self, run_id: UUID) -> None:
        s = t.step_run

        def remove(conn: Connection) -> None:
            found = conn.execute(select(_R.c.id).where(_R.c.id == run_id).with_for_update())
            if found.first() is None:
                raise not_found("pipeline run", run_id)
            step_ids = list(conn.execute(select(s.c.id).where(s.c.run_id == run_id)).scalars())
            # Detach everything that points at the run's steps (cached steps of other runs,
            # artifact versions they produced), then delete children before parents. Explicit
            # statements rather than ON DELETE rules: MySQL cannot cascade through the
            # self-reference of step_run.
            for chunk in chunks(step_ids):
                conn.execute(
                    update(s).where(s.c.original_step_run_id.in_(chunk)),
                    {"original_step_run_id": None},
                )
                av = t.artifact_version
                conn.execute(
                    update(av).where(av.c.producer_step_run_id.in_(chunk)),
                    {"producer_step_run_id": None},
                )
                for link in (t.step_run_input, t.step_run_output):
                    conn.execute(delete(link).where(link.c.step_run_id.in_(chunk)))
                md = t.run_metadata
                conn.execute(
                    delete(md).where(
                        md.c.resource_type == MetadataResourceType.STEP_RUN.value,
                        md.c.resource_id.in_(chunk),
                    )
                )
            conn.execute(delete(s).where(s.c.run_id == run_id))
            conn.execute(
                delete(t.run_metadata).where(
                    t.run_metadata.c.resource_type == MetadataResourceType.PIPELINE_RUN.value,
                    t.run_metadata.c.resource_id == run_id,
                )
            )
            conn.execute(delete(_R).where(_R.c.id == run_id))

        self._db.write(remove)

    # ----------------------------------------------------------------- internals

    def _insert(self, conn: Connection, run: RunCreate) -> PipelineRunRecord:
        values = run_values(run, self._db.now())
        conn.execute(_R.insert(), values)
        return _record(values)

    def _get_or_create_once(
        self, conn: Connection, run: RunCreate
    ) -> tuple[PipelineRunRecord, bool]:
        orid = run.orchestrator_run_id
        if orid is not None:
            existing = conn.execute(
                select(_R).where(
                    _R.c.snapshot_id == run.snapshot_id,
                    exact.equals(_R.c.orchestrator_run_id, orid),
                )
            ).first()
            # A placeholder holding this id is left to step 2 when ``run`` may replace it.
            if existing is not None and (
                existing.status not in _PLACEHOLDERS or run.is_placeholder
            ):
                return _record(existing), False
        if not run.is_placeholder:
            placeholder = self._lock_placeholder(conn, run)
            if placeholder is not None:
                return self._replace(conn, placeholder, run), True
        check_run_initial(run.status)
        return self._insert(conn, run), True

    def _lock_placeholder(self, conn: Connection, run: RunCreate) -> Row[Any] | None:
        orid = run.orchestrator_run_id
        id_matches = (
            _R.c.orchestrator_run_id.is_(None)
            if orid is None
            else (_R.c.orchestrator_run_id == orid) | _R.c.orchestrator_run_id.is_(None)
        )
        preference = case((_R.c.orchestrator_run_id.is_(None), 1), else_=0)
        stmt = (
            select(_R)
            .where(
                _R.c.snapshot_id == run.snapshot_id,
                _R.c.pipeline_id == run.pipeline_id,
                _R.c.project_id == run.project_id,
                _R.c.status.in_(_PLACEHOLDERS),
                id_matches,
            )
            .order_by(preference, _R.c.created, _R.c.id)
            .limit(1)
            .with_for_update()
        )
        return conn.execute(stmt).first()

    def _replace(
        self, conn: Connection, placeholder: Row[Any], run: RunCreate
    ) -> PipelineRunRecord:
        current = placeholder._asdict()
        check_run_transition(ExecutionStatus(current["status"]), run.status)
        now = self._db.now()
        values: dict[str, Any] = {
            "status": run.status.value,
            "name": run.name,
            "orchestrator_run_id": run.orchestrator_run_id,
            "updated": now,
        }
        if run.status_reason is not None:
            values["status_reason"] = run.status_reason
        values.update(status_times(run.status, current["start_time"], current["end_time"], now))
        values.update(run_liveness.liveness_values(run.orchestrator, now))
        conn.execute(_R.update().where(_R.c.id == current["id"]).values(values))
        return _record({**current, **values})

    def _missing_reference(self, run: RunCreate) -> Exception | None:
        return first_missing(
            self._db,
            [
                ("project", t.project, [run.project_id]),
                ("pipeline", t.pipeline, [run.pipeline_id]),
                ("pipeline snapshot", t.pipeline_snapshot, [run.snapshot_id]),
                ("user", t.user_account, [run.user_id]),
            ],
        )
