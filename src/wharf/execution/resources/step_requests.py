"""What a step's Resource Manager request says: its subjects, demands, lease and metadata.

Owns :func:`step_request` and :class:`RunSubjects`. Invariants: the pipeline run is the
preemption group, so a run never preempts its own steps; the RM's allocation-wait deadline is
one pending lease later than the launcher's, so the launcher's timeout message is the one users
see; the RM's models load only when a step actually asks for resources (imported inside).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.core.enums import ComponentType, StepRuntime
from wharf.core.errors import InputError
from wharf.core.validation import describe_errors
from wharf.store.models import PipelineRunRecord, StepRunCreate, UserRecord
from wharf.store.ports import Store

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import ResourceRequestCreate
    from wharf.resource_manager.contract.values import SubjectChain, SubjectNode

PENDING_LEASE_SECONDS = 60
"""First lease of a new request: the launcher's renew-polling extends it while it waits."""


@dataclass(frozen=True)
class RunSubjects:
    """What every request of one run's steps shares: read once per run (names as of the run's
    first request), so a step's request costs no store reads."""

    run_id: UUID
    account: SubjectChain
    path: tuple[SubjectNode, ...]
    """project -> pipeline -> pipeline run (the step run's node is appended per step)."""
    orchestrator: SubjectChain | None
    """The stack's orchestrator: the subject of every step that names no step operator."""
    step_operators: dict[str, SubjectChain]
    """The stack's step operator(s) by name: the subject of the steps that name one."""
    metadata: dict[str, str]

    def launcher_of(self, step_operator: str | None) -> SubjectChain | None:
        """The component that launches a step naming ``step_operator`` (None: the
        orchestrator)."""
        if step_operator is not None:
            return self.step_operators.get(step_operator)
        return self.orchestrator


def run_subjects(store: Store, run: PipelineRunRecord, user: UserRecord) -> RunSubjects:
    from wharf.resource_manager.contract.values import SubjectChain, SubjectNode, SubjectType

    pipeline = store.pipelines.get(run.pipeline_id)
    project = store.projects.get(run.project_id)
    account = SubjectNode(
        subject_type=SubjectType.ACCOUNT,
        subject_id=user.name,
        attributes={"name": user.name, "is_superuser": user.is_admin},
    )
    path = (
        SubjectNode(
            subject_type=SubjectType.PROJECT,
            subject_id=str(project.id),
            attributes={"name": project.name},
        ),
        SubjectNode(
            subject_type=SubjectType.PIPELINE,
            subject_id=str(pipeline.id),
            attributes={"name": pipeline.name},
        ),
        SubjectNode(
            subject_type=SubjectType.PIPELINE_RUN,
            subject_id=str(run.id),
            attributes={"name": run.name},
        ),
    )
    components = component_chains(store, run.snapshot_id)
    return RunSubjects(
        run_id=run.id,
        account=SubjectChain(nodes=(account,)),
        path=path,
        orchestrator=next(
            (c for type_, _, c in components if type_ is ComponentType.ORCHESTRATOR), None
        ),
        step_operators={
            name: c for type_, name, c in components if type_ is ComponentType.STEP_OPERATOR
        },
        metadata={
            "pipeline_run_name": run.name,
            "pipeline_run_id": str(run.id),
            "project": project.name,
            "project_id": str(project.id),
            "user": user.name,
        },
    )


def step_request(
    subjects: RunSubjects, step_id: UUID, step: StepRunCreate
) -> ResourceRequestCreate:
    """The Resource Manager request of a queued step that asks for resources, made before its
    step run ``step_id`` is written.

    Subjects: the account (``is_superuser`` from ``is_admin``), project -> pipeline ->
    pipeline run -> step run, and the stack component that launches the step: its step
    operator if it names one, else the orchestrator (the other components do not run it, so
    policies on them must not apply). Metadata: step and run names and ids, project name and
    id, user.

    InputError (naming the step and what is wrong) if the RM would refuse the request: its
    settings hold something only the RM checks (a selector, more demands than it takes)."""
    from pydantic import ValidationError

    from wharf.resource_manager.contract.models import ResourceRequestCreate
    from wharf.resource_manager.contract.values import (
        SubjectChain,
        SubjectNode,
        SubjectSelector,
        SubjectType,
    )

    spec = step.spec
    assert spec is not None and spec.config.resources is not None
    settings = spec.config.resources
    runtime = step.runtime or StepRuntime.INLINE
    step_node = SubjectNode(
        subject_type=SubjectType.STEP_RUN,
        subject_id=str(step_id),
        attributes={"name": step.name},
    )
    demands = tuple(settings.canonical_demands())  # the one demand model: sent as it is
    launcher = subjects.launcher_of(spec.config.step_operator)
    try:
        return ResourceRequestCreate(
            subjects=(
                subjects.account,
                SubjectChain(nodes=(*subjects.path, step_node)),
                *(() if launcher is None else (launcher,)),
            ),
            demands=demands,
            reclaim_tolerance=settings.effective_reclaim_tolerance(runtime),
            lease_seconds=PENDING_LEASE_SECONDS,
            # The launcher gives up at the timeout and says why; the RM's own deadline only
            # cleans up after a launcher that died, so it comes a little later.
            allocation_wait_timeout_seconds=settings.allocation_wait_timeout_seconds
            + PENDING_LEASE_SECONDS,
            metadata={
                "step_name": step.name,
                "step_run_id": str(step_id),
                **subjects.metadata,
            },
            preemption_group=SubjectSelector(
                subject_type=SubjectType.PIPELINE_RUN, subject_id=str(subjects.run_id)
            ),
        )
    except ValidationError as error:
        raise InputError(
            f"The resources of step '{step.name}' cannot be requested from the Resource "
            f"Manager: {describe_errors(error.errors())}."
        ) from None


def component_chains(
    store: Store, snapshot_id: UUID
) -> list[tuple[ComponentType, str, SubjectChain]]:
    """(type, name, chain) of each component of the snapshot's stack that can launch a step."""
    from wharf.resource_manager.contract.values import SubjectChain, SubjectNode, SubjectType

    snapshot = store.snapshots.get(snapshot_id)
    if snapshot.stack_id is None:
        return []
    stack = store.stacks.get_stack(snapshot.stack_id)
    chains = []
    for type_, component_id in stack.components.items():
        if type_ not in (ComponentType.ORCHESTRATOR, ComponentType.STEP_OPERATOR):
            continue
        component = store.stacks.get_component(component_id)
        chains.append(
            (
                component.type,
                component.name,
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
                ),
            )
        )
    return chains
