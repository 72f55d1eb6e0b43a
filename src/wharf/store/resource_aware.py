"""The workspace side of step resources: requests, lease renewal on heartbeats, release.

:class:`ResourceAwareStepRuns` wraps a store's step-run repository. Everything is delegated,
with three additions:

- ``create`` of a *queued* step run whose spec asks for resources creates a Resource Manager
  request enriched with its context (subjects: account with ``is_superuser``, project ->
  pipeline -> pipeline run -> step run, each stack component; metadata: names and ids; the
  pipeline run as preemption group) and stores only the request id on the step run;
- ``update_heartbeat`` renews the request's lease for the liveness timeout (runtime state
  running) and turns a request that is being reclaimed, gone, or otherwise over into a
  ``cancelling`` step, which the heartbeat worker then interrupts;
- ``update`` to a finished or retrying status releases the request, whatever the outcome.

RM errors on renewal are logged and the step keeps running while its lease is valid; the
same wrapper serves embedded mode (in-process RM) and the workspace server (HTTP RM).
"""

from __future__ import annotations

import builtins
import logging
import math
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.config.flavors import resource_manager_connector
from wharf.config.global_config import WharfConfig
from wharf.config.spec import StepSpec
from wharf.core.enums import (
    ComponentType,
    ExecutionStatus,
    ResourceRequestRuntimeState,
    ResourceRequestStatus,
    StepRuntime,
)
from wharf.core.errors import EntityNotFoundError, IllegalTransitionError, WharfError
from wharf.store.lazy_requests import LazyRequests
from wharf.store.models import (
    HeartbeatResponse,
    Page,
    PageRequest,
    StepRunCreate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
    UserRecord,
)
from wharf.store.ports import StepRunRepository, Store

if TYPE_CHECKING:  # the RM's models load only when a step actually asks for resources
    from wharf.resource_manager.client.protocol import RequestsClient, ResourceManagerClient
    from wharf.resource_manager.domain import SubjectChain


def attach_resource_manager(
    store: Store, connect: Callable[[], RequestsClient], user: UserRecord | None
) -> None:
    """Pair ``store`` with a Resource Manager: steps that ask for resources get requests,
    heartbeats renew them, finished steps release them."""
    if isinstance(store.steps, ResourceAwareStepRuns):
        return  # already paired (several workspaces may share one store)
    requests = LazyRequests(connect)
    store.steps = ResourceAwareStepRuns(store.steps, store, requests, user)
    store.resource_requests = requests


logger = logging.getLogger(__name__)

RECLAIMED = frozenset(
    {
        ResourceRequestStatus.PREEMPTING,
        ResourceRequestStatus.PREEMPTED,
        ResourceRequestStatus.CANCELLED,
        ResourceRequestStatus.REJECTED,
        ResourceRequestStatus.RELEASED,
        ResourceRequestStatus.EXPIRED,
    }
)
_ALL_STEPS = StepRunFilter()
_FIRST_PAGE = PageRequest()
PENDING_LEASE_SECONDS = 60
"""First lease of a new request: the launcher's renew-polling extends it while it waits."""


def wants_resources(spec: StepSpec | None) -> bool:
    resources = spec.config.resources if spec is not None else None
    return resources is not None and bool(resources.canonical_demands())


class ResourceAwareStepRuns:
    """A ``StepRunRepository`` that keeps the Resource Manager in step with step runs."""

    def __init__(
        self,
        inner: StepRunRepository,
        store: Store,
        requests: LazyRequests,
        user: UserRecord | None,
    ) -> None:
        self._inner = inner
        self._store = store
        self._requests = requests
        self._user = user

    # -------------------------------------------------------------- delegated as they are

    def get(self, step_run_id: UUID) -> StepRunRecord:
        return self._inner.get(step_run_id)

    def list(
        self, filter: StepRunFilter = _ALL_STEPS, page: PageRequest = _FIRST_PAGE
    ) -> Page[StepRunRecord]:
        return self._inner.list(filter, page)

    def find_cached(self, project_id: UUID, cache_key: str, now: datetime) -> StepRunRecord | None:
        return self._inner.find_cached(project_id, cache_key, now)

    def fail_lost_heartbeats(
        self, now: datetime, run_id: UUID | None = None
    ) -> builtins.list[StepRunRecord]:
        failed = self._inner.fail_lost_heartbeats(now, run_id)
        for step in failed:
            self._release(step)
        return failed

    # -------------------------------------------------------------- with resources

    def create(self, step: StepRunCreate) -> StepRunRecord:
        record = self._inner.create(step)
        if step.status is not ExecutionStatus.QUEUED or not wants_resources(step.spec):
            return record
        try:
            request_id = self._create_request(record, step)
        except WharfError as exc:
            self._inner.update(
                record.id,
                StepRunUpdate(
                    status=ExecutionStatus.FAILED,
                    status_reason=f"Could not request resources: {exc}",
                ),
            )
            raise
        return self._inner.update(record.id, StepRunUpdate(resource_request_id=request_id))

    def update(self, step_run_id: UUID, update: StepRunUpdate) -> StepRunRecord:
        record = self._inner.update(step_run_id, update)
        if record.status.is_finished or record.status is ExecutionStatus.RETRYING:
            self._release(record)
        return record

    def update_heartbeat(
        self, step_run_id: UUID, liveness_timeout_seconds: float
    ) -> HeartbeatResponse:
        response = self._inner.update_heartbeat(step_run_id, liveness_timeout_seconds)
        request_id = response.resource_request_id
        if response.status is not ExecutionStatus.RUNNING or request_id is None:
            return response
        try:
            request = self._requests.renew(
                request_id,
                math.ceil(liveness_timeout_seconds),
                ResourceRequestRuntimeState.RUNNING,
            )
            reclaimed = request.status in RECLAIMED
            why = f"its resource request {request.id} is {request.status.value}"
        except EntityNotFoundError:
            reclaimed, why = True, f"its resource request {request_id} is gone"
        except WharfError as exc:  # the RM is unreachable: keep running while the lease holds
            logger.warning("Could not renew the lease of step %s: %s", step_run_id, exc)
            return response
        if not reclaimed:
            return response
        try:
            self._inner.update(
                step_run_id,
                StepRunUpdate(
                    status=ExecutionStatus.CANCELLING, status_reason=f"Cancelling: {why}."
                ),
            )
        except IllegalTransitionError:
            return response
        return response.model_copy(update={"status": ExecutionStatus.CANCELLING})

    # -------------------------------------------------------------- internals

    def _release(self, record: StepRunRecord) -> None:
        if record.resource_request_id is None:
            return
        try:
            self._requests.release(record.resource_request_id)
        except WharfError as exc:  # it lapses on its own; never fail a step's bookkeeping
            logger.warning(
                "Could not release resource request %s of step %s: %s",
                record.resource_request_id,
                record.name,
                exc,
            )

    def _create_request(self, record: StepRunRecord, step: StepRunCreate) -> UUID:
        from wharf.resource_manager.client.models import DemandSpec, ResourceRequestCreate
        from wharf.resource_manager.domain import (
            SubjectChain,
            SubjectNode,
            SubjectSelector,
            SubjectType,
        )

        spec = step.spec
        assert spec is not None and spec.config.resources is not None
        settings = spec.config.resources
        runtime = step.runtime or StepRuntime.INLINE
        run = self._store.runs.get(record.run_id)
        pipeline = self._store.pipelines.get(run.pipeline_id)
        project = self._store.projects.get(run.project_id)
        user = self._user
        if user is None:
            raise WharfError("Resource requests need the requesting user.")
        project_node = SubjectNode(
            subject_type=SubjectType.PROJECT,
            subject_id=str(project.id),
            attributes={"name": project.name},
        )
        run_node = SubjectNode(
            subject_type=SubjectType.PIPELINE_RUN,
            subject_id=str(run.id),
            attributes={"name": run.name},
        )
        chains = [
            SubjectChain(
                nodes=(
                    SubjectNode(
                        subject_type=SubjectType.ACCOUNT,
                        subject_id=user.name,
                        attributes={"name": user.name, "is_superuser": user.is_admin},
                    ),
                )
            ),
            SubjectChain(
                nodes=(
                    project_node,
                    SubjectNode(
                        subject_type=SubjectType.PIPELINE,
                        subject_id=str(pipeline.id),
                        attributes={"name": pipeline.name},
                    ),
                    run_node,
                    SubjectNode(
                        subject_type=SubjectType.STEP_RUN,
                        subject_id=str(record.id),
                        attributes={"name": record.name},
                    ),
                )
            ),
            *self._component_chains(run.snapshot_id),
        ]
        demands = tuple(
            DemandSpec.model_validate(d.model_dump(by_alias=True, exclude_none=True))
            for d in settings.canonical_demands()
        )
        request = self._requests.create(
            ResourceRequestCreate(
                subjects=tuple(chains),
                demands=demands,
                reclaim_tolerance=settings.effective_reclaim_tolerance(runtime),
                lease_seconds=PENDING_LEASE_SECONDS,
                # The launcher gives up at the timeout and says why; the RM's own deadline only
                # cleans up after a launcher that died, so it comes a little later.
                allocation_wait_timeout_seconds=settings.allocation_wait_timeout_seconds
                + PENDING_LEASE_SECONDS,
                metadata={
                    "step_name": record.name,
                    "step_run_id": str(record.id),
                    "pipeline_run_name": run.name,
                    "pipeline_run_id": str(run.id),
                    "project": project.name,
                    "user": user.name,
                },
                preemption_group=SubjectSelector(
                    subject_type=SubjectType.PIPELINE_RUN, subject_id=str(run.id)
                ),
            ),
            idempotency_key=f"step-run-{record.id}",
        )
        return request.id

    def _component_chains(self, snapshot_id: UUID) -> builtins.list[SubjectChain]:
        from wharf.resource_manager.domain import SubjectChain, SubjectNode, SubjectType

        snapshot = self._store.snapshots.get(snapshot_id)
        if snapshot.stack_id is None:
            return []
        stack = self._store.stacks.get_stack(snapshot.stack_id)
        chains = []
        for type_, component_id in stack.components.items():
            if type_ is ComponentType.ARTIFACT_STORE:
                continue
            component = self._store.stacks.get_component(component_id)
            chains.append(
                SubjectChain(
                    nodes=(
                        SubjectNode(
                            subject_type=SubjectType.COMPONENT,
                            subject_id=str(component.id),
                            attributes={
                                "name": component.name,
                                "component_type": component.type.value,
                                "flavor": component.flavor,
                            },
                        ),
                    )
                )
            )
        return chains


class ResourceManagerHandle:
    """A Resource Manager client that connects on first use (most runs never need it)."""

    def __init__(self, connect: Callable[[], ResourceManagerClient]) -> None:
        self._connect = connect
        self._client: ResourceManagerClient | None = None

    @property
    def client(self) -> ResourceManagerClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def pair_with_configured_resource_manager(
    store: Store, config: WharfConfig, user: UserRecord | None, account: str
) -> ResourceManagerHandle | None:
    """Attach the Resource Manager ``config`` names (embedded by default) to a SQL store.
    A store reached over REST is paired by its server instead; ``none`` disables requests."""
    if config.resource_manager == "none" or config.server_url:
        return None
    resource_manager_connector(config.resource_manager, load=False)  # fail early on a typo

    def connect() -> ResourceManagerClient:
        connector = resource_manager_connector(config.resource_manager)
        client: ResourceManagerClient = connector(
            config.store_url, account, config.local_step_slots
        )
        return client

    handle = ResourceManagerHandle(connect)
    attach_resource_manager(store, lambda: handle.client.requests, user)
    return handle
