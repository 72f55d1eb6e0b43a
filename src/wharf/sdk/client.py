"""``Client``: read and steer what the metadata store records (runs, steps, artifacts,
schedules, resource requests) within one project. Reading artifact values is
``wharf.sdk.artifact_reads``'s, finding a run's step by name ``wharf.sdk.run_steps``'s: the
client's methods call them.

Invariant: reads and stops of runs first sweep the runs whose orchestrating process is gone
(``wharf.store.lost_runs``; at most once every :data:`SWEEP_EVERY_SECONDS` per client), so a run
whose process died is shown failed, never running forever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from uuid import UUID

from wharf.config.global_config import WharfConfig
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityNotFoundError, IllegalOperationError
from wharf.core.ids import (
    MAX_ID_CANDIDATES,
    only_match,
    parse_id_prefix,
    parse_uuid,
    run_not_found,
)
from wharf.core.paging import MAX_PAGE_SIZE
from wharf.core.suggestions import did_you_mean
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    ArtifactFilter,
    ArtifactRecord,
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    Page,
    PageRequest,
    PipelineFilter,
    PipelineRecord,
    PipelineRunRecord,
    RunFilter,
    ScheduleFilter,
    ScheduleRecord,
    SnapshotRecord,
    StepRunFilter,
    StepRunRecord,
)
from wharf.store.ports import Store

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import ResourceRequestInfo
    from wharf.resource_manager.contract.protocol import RequestsLink, ResourceManagerClient
    from wharf.resource_manager.contract.values import Pool

Sort = Literal["asc", "desc"]
R = TypeVar("R", PipelineRecord, PipelineRunRecord, ScheduleRecord, StepRunRecord)

logger = logging.getLogger(__name__)

SWEEP_EVERY_SECONDS = 1.0
"""How often a client's run reads sweep runs whose orchestrator is gone (at most)."""


class Client:
    """Reads and steers the records of the workspace's project; a context manager.

    Every list method is paged (``page`` is 1-based, ``size`` ≤ 1000) and returns a
    :class:`~wharf.store.models.Page`. Runs, pipelines and schedules are looked up by id or
    name within the project; where a full id is accepted, so is a short one: the first digits
    of its hex form (at least four; ``wharf.core.ids``), when they match one record of the
    project (several raise ``AmbiguousIdError`` naming them). A name that exists wins over a
    prefix.
    """

    def __init__(self, config: WharfConfig | None = None, store: Store | None = None) -> None:
        self._workspace = Workspace.open(config, store)
        self._swept_at: float | None = None
        self._sweep_failing = False
        self.swept: set[UUID] = set()
        """The runs this client's sweeps ended (each said as a warning when it was)."""

    @property
    def _release(self) -> Callable[[StepRunRecord], None] | None:
        """What releases the requests of the steps this client ends (embedded mode)."""
        from wharf.execution.resources.port import releaser

        return releaser(self._workspace.step_resources)

    def _sweep_lost_runs(self, *, now: bool = False) -> set[UUID]:
        """Sweep runs whose orchestrator is gone (unless done within the last second and not
        ``now``); the ids of the runs it ended."""
        from wharf.store.lost_runs import sweep_lost_runs

        at = time.monotonic()
        if not now and self._swept_at is not None and at - self._swept_at < SWEEP_EVERY_SECONDS:
            return set()
        self._swept_at = at
        try:
            swept = {lost.run.id for lost in sweep_lost_runs(self.store, release=self._release)}
        except Exception as exc:  # a read must not fail because the sweep did
            # said once per outage: a follower polling through one would repeat it each time
            level = logging.DEBUG if self._sweep_failing else logging.WARNING
            logger.log(level, "Could not sweep lost runs: %s", exc)
            self._sweep_failing = True
            return set()
        self._sweep_failing = False
        self.swept |= swept
        return swept

    @property
    def store(self) -> Store:
        return self._workspace.store

    @property
    def project_id(self) -> UUID:
        return self._workspace.project.id

    @property
    def workspace(self) -> Workspace:
        return self._workspace

    def close(self) -> None:
        self._workspace.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _by_prefix(
        self,
        kind: str,
        text: str | UUID,
        list_: Callable[[Any, PageRequest], Page[R]],
        filter_type: Callable[..., Any],
    ) -> list[R]:
        """The project's record whose id starts with ``text`` (as a one-item list), [] if none
        or if ``text`` is no id prefix; several raise ``AmbiguousIdError``."""
        prefix = parse_id_prefix(str(text))
        if prefix is None:
            return []
        query = filter_type(project_id=self.project_id, id_prefix=prefix)
        matches = list_(query, PageRequest(size=MAX_ID_CANDIDATES + 1)).items
        found = only_match(kind, str(text), matches)
        return [] if found is None else [found]

    # ------------------------------------------------------------------ pipelines

    def list_pipelines(
        self, *, name: str | None = None, page: int = 1, size: int = 50, sort: Sort = "desc"
    ) -> Page[PipelineRecord]:
        return self.store.pipelines.list(
            PipelineFilter(project_id=self.project_id, name=name),
            PageRequest(index=page, size=size, sort=sort),
        )

    def get_pipeline(self, name_or_id: str | UUID) -> PipelineRecord:
        uid = name_or_id if isinstance(name_or_id, UUID) else parse_uuid(name_or_id)
        if uid is not None:
            return self.store.pipelines.get(uid)
        found = self.list_pipelines(name=str(name_or_id), size=1).items
        if not found:
            found = self._by_prefix(
                "pipeline", name_or_id, self.store.pipelines.list, PipelineFilter
            )
        if not found:
            names = [p.name for p in self.list_pipelines(size=MAX_PAGE_SIZE).items]
            hint = did_you_mean(str(name_or_id), names) or "."
            raise EntityNotFoundError(f"No pipeline named '{name_or_id}'{hint}")
        return found[0]

    def get_snapshot(self, snapshot_id: UUID) -> SnapshotRecord:
        """A run's compiled pipeline (its steps, their upstream steps and settings)."""
        return self.store.snapshots.get(snapshot_id)

    def get_snapshot_stack_ids(self, snapshot_ids: Sequence[UUID]) -> dict[UUID, UUID | None]:
        """Snapshot id -> the id of the stack its runs ran on (None once that stack is deleted),
        for each snapshot that exists (``runs list`` names a page of runs' stacks)."""
        found: dict[UUID, UUID | None] = {}
        for snapshot_id in dict.fromkeys(snapshot_ids):
            try:
                found[snapshot_id] = self.store.snapshots.get(snapshot_id).stack_id
            except EntityNotFoundError:
                continue
        return found

    def get_stack_name(self, stack_id: UUID) -> str | None:
        """The name of stack ``stack_id``; None if there is no such stack (deleted)."""
        try:
            return self.store.stacks.get_stack(stack_id).name
        except EntityNotFoundError:
            return None

    # ------------------------------------------------------------------ runs

    def list_pipeline_runs(
        self,
        *,
        pipeline: str | UUID | None = None,
        status: ExecutionStatus | str | None = None,
        name: str | None = None,
        page: int = 1,
        size: int = 50,
        sort: Sort = "desc",
    ) -> Page[PipelineRunRecord]:
        pipeline_id = self.get_pipeline(pipeline).id if pipeline is not None else None
        self._sweep_lost_runs()
        return self.store.runs.list(
            RunFilter(
                project_id=self.project_id,
                pipeline_id=pipeline_id,
                status=ExecutionStatus(status) if status else None,
                name=name,
            ),
            PageRequest(index=page, size=size, sort=sort),
        )

    def get_pipeline_run(self, name_or_id: str | UUID) -> PipelineRunRecord:
        uid = name_or_id if isinstance(name_or_id, UUID) else parse_uuid(name_or_id)
        self._sweep_lost_runs()
        if uid is not None:
            return self.store.runs.get(uid)
        found = self.list_pipeline_runs(name=str(name_or_id), size=1).items
        if not found:
            found = self._by_prefix("pipeline run", name_or_id, self.store.runs.list, RunFilter)
        if not found:
            text = str(name_or_id)
            pipelines = self.list_pipelines(name=text, size=1).total
            raise run_not_found(text, names_a_pipeline=pipelines > 0)
        return found[0]

    def stop_run(self, name_or_id: str | UUID, *, force: bool = False) -> PipelineRunRecord:
        """Ask a run to stop gracefully: no new steps start, running steps are interrupted at
        their next safe point (at once where the run's orchestrating process runs on this
        machine as this user: it is woken; else at their next heartbeat) and end stopped (one
        that finishes before then keeps its result; the Kubernetes orchestrator's step pods
        are not interrupted: they finish), then the run ends stopped. ``force`` also asks the
        backend of each isolated step (by the flavor of the run's orchestrator or step
        operator) to end it at once where it can from here (local processes: only those this
        machine started, never a reused pid), and the run's orchestrating process to end the others
        through the backends that started them. A run whose orchestrating process is gone
        ends failed at once ("orchestrator lost") and is returned so; a forced stop of a run
        that no process beats for (recorded before runs had a liveness record) ends it
        stopped at once, with its steps."""
        from wharf.sdk.run_stopping import request_stop

        ended = self._sweep_lost_runs(now=True)
        run = self.get_pipeline_run(name_or_id)
        if run.id in ended:
            return run
        if run.status.is_finished:
            raise IllegalOperationError(
                f"Run '{run.name}' has already finished ({run.status.value})."
            )
        return request_stop(self._workspace, run, force=force, release=self._release)

    def step_logs(self, step: str | UUID | StepRunRecord, *, run: str | UUID | None = None) -> str:
        """The captured stdout/stderr of a step run ("" if it has none yet: a step's output is
        stored when it ends). ``step`` is a step run (record, id or id prefix), or with ``run``
        the name of one of that run's steps (its last attempt)."""
        from wharf.execution.log_capture import read_log

        if not isinstance(step, StepRunRecord):
            step = self.find_step_run(step, run=run)
        if step.logs_uri is None:
            return ""
        from wharf.sdk.artifact_reads import run_artifact_store

        artifact_store = run_artifact_store(self, step.run_id)
        if not artifact_store.exists(step.logs_uri):
            return ""
        return read_log(artifact_store, step.logs_uri)

    # ------------------------------------------------------------------ schedules

    def list_schedules(
        self,
        *,
        pipeline: str | UUID | None = None,
        name: str | None = None,
        page: int = 1,
        size: int = 50,
        sort: Sort = "desc",
    ) -> Page[ScheduleRecord]:
        """The project's schedules, newest first."""
        pipeline_id = self.get_pipeline(pipeline).id if pipeline is not None else None
        return self.store.schedules.list(
            ScheduleFilter(project_id=self.project_id, pipeline_id=pipeline_id, name=name),
            PageRequest(index=page, size=size, sort=sort),
        )

    def get_schedule(self, name_or_id: str | UUID) -> ScheduleRecord:
        uid = name_or_id if isinstance(name_or_id, UUID) else parse_uuid(name_or_id)
        if uid is not None:
            return self.store.schedules.get(uid)
        found = self.list_schedules(name=str(name_or_id), size=1).items
        if not found:
            found = self._by_prefix(
                "schedule", name_or_id, self.store.schedules.list, ScheduleFilter
            )
        if not found:
            names = [s.name for s in self.list_schedules(size=MAX_PAGE_SIZE).items]
            hint = did_you_mean(str(name_or_id), names) or "."
            raise EntityNotFoundError(f"No schedule named '{name_or_id}'{hint}")
        return found[0]

    def set_schedule_active(self, name_or_id: str | UUID, active: bool) -> ScheduleRecord:
        """Pause (``active=False``) or resume a schedule; runs it started are unaffected."""
        return self.store.schedules.set_active(self.get_schedule(name_or_id).id, active)

    def delete_schedule(self, name_or_id: str | UUID) -> ScheduleRecord:
        """Delete a schedule (runs it started stay); the schedule as it was."""
        schedule = self.get_schedule(name_or_id)
        self.store.schedules.delete(schedule.id)
        return schedule

    # ------------------------------------------------------------------ resources

    @property
    def resource_manager(self) -> ResourceManagerClient:
        """The Resource Manager client (pools, policies, requests) of this workspace."""
        return self._workspace.resource_manager()

    def ensure_resource_pool(
        self,
        name: str,
        capacity: dict[str, int | str],
        *,
        reclaimable: str = "never",
        priority: int = 0,
    ) -> Pool:
        """Create or update a one-class pool (``{"license": 2}``) that admits this user."""
        from wharf.sdk.pools import ensure_pool

        return ensure_pool(
            self.resource_manager,
            name,
            capacity,
            account=self._workspace.user.name,
            reclaimable=reclaimable,
            priority=priority,
        )

    def _requests(self) -> RequestsLink:
        requests = self._workspace.requests
        if requests is None:
            raise IllegalOperationError("This workspace has no Resource Manager.")
        return requests

    def list_resource_requests(
        self, *, status: str | None = None, page: int = 1, size: int = 50
    ) -> Page[ResourceRequestInfo]:
        """This workspace's resource requests, newest first."""
        from wharf.core.enums import ResourceRequestStatus
        from wharf.resource_manager.contract.models import RequestFilter

        query = RequestFilter(status=(ResourceRequestStatus(status),) if status else None)
        return self._requests().list(query, PageRequest(index=page, size=size))

    def get_resource_request(self, request_id: UUID) -> ResourceRequestInfo:
        """One of this workspace's resource requests (a step run's ``resource_request_id``)."""
        return self._requests().get(request_id)

    # ------------------------------------------------------------------ steps

    def list_run_steps(
        self,
        run: str | UUID | None = None,
        *,
        names: list[str] | None = None,
        status: ExecutionStatus | str | None = None,
        page: int = 1,
        size: int = 50,
        sort: Sort = "asc",
    ) -> Page[StepRunRecord]:
        run_id = self.get_pipeline_run(run).id if run is not None else None
        return self.store.steps.list(
            StepRunFilter(
                project_id=self.project_id,
                run_id=run_id,
                names=tuple(names) if names else None,
                status=ExecutionStatus(status) if status else None,
            ),
            PageRequest(index=page, size=size, sort=sort),
        )

    def get_step_run(self, step_run_id: str | UUID) -> StepRunRecord:
        uid = step_run_id if isinstance(step_run_id, UUID) else parse_uuid(step_run_id)
        if uid is not None:
            return self.store.steps.get(uid)
        found = self._by_prefix("step run", step_run_id, self.store.steps.list, StepRunFilter)
        if not found:
            raise EntityNotFoundError(f"No step run with id or id prefix '{step_run_id}'.")
        return found[0]

    def find_step_run(self, step: str | UUID, *, run: str | UUID | None = None) -> StepRunRecord:
        """A step run by id (or id prefix), or with ``run`` by name within that run (its last
        attempt)."""
        if run is None:
            return self.get_step_run(step)
        from wharf.sdk.run_steps import no_step

        found = self.get_pipeline_run(run)
        if not isinstance(step, UUID):
            named = self.list_run_steps(found.id, names=[step], sort="desc", size=1).items
            if named:
                return named[0]
            if parse_uuid(step) is None and parse_id_prefix(step) is None:
                raise no_step(self, found, step)
        record = self.get_step_run(step)
        if record.run_id != found.id:
            raise EntityNotFoundError(f"Step run {record.id} is not a step of run '{found.name}'.")
        return record

    def get_run_step(self, run: str | UUID, step_name: str) -> StepRunRecord:
        """The latest step run of that name in the run (the last retry attempt); a name that
        is none of the run's steps is refused listing them (and the close spelling)."""
        from wharf.sdk.run_steps import step_named

        return step_named(self, self.get_pipeline_run(run), step_name)

    # ------------------------------------------------------------------ artifacts

    def list_artifacts(
        self, *, name: str | None = None, page: int = 1, size: int = 50, sort: Sort = "desc"
    ) -> Page[ArtifactRecord]:
        return self.store.artifacts.list(
            ArtifactFilter(project_id=self.project_id, name=name),
            PageRequest(index=page, size=size, sort=sort),
        )

    def list_artifact_versions(
        self,
        *,
        name: str | None = None,
        producer_step_run_id: UUID | None = None,
        page: int = 1,
        size: int = 50,
        sort: Sort = "desc",
    ) -> Page[ArtifactVersionRecord]:
        return self.store.artifacts.list_versions(
            ArtifactVersionFilter(
                project_id=self.project_id, name=name, producer_step_run_id=producer_step_run_id
            ),
            PageRequest(index=page, size=size, sort=sort),
        )

    def get_artifact_version(self, version_id: str | UUID) -> ArtifactVersionRecord:
        """An artifact version by id or id prefix."""
        from wharf.sdk.artifact_reads import get_artifact_version

        return get_artifact_version(self, version_id)

    def load_artifact(self, version: ArtifactVersionRecord | str | UUID) -> Any:
        """The Python value of an artifact version (a record, or its id or id prefix)."""
        from wharf.sdk.artifact_reads import load_artifact

        return load_artifact(self, version)

    def load_step_output(self, run: str | UUID, step_name: str, output: str | None = None) -> Any:
        """The value a step of a run produced (its only output unless ``output`` is named); a
        step or output name that matches none is refused listing those there are."""
        from wharf.sdk.artifact_reads import load_step_output

        return load_step_output(self, run, step_name, output)
