"""Starting a pipeline run that was recorded as a placeholder, and taking over a started one.

Owns :func:`start_run` (a placeholder, initializing, replaced with the real run through
``get_or_create``), :class:`Resumption` with :func:`latest_step_runs` (what a process taking
over a run reads of its steps) and :func:`replay_differs`; the run's end is ``runs.finish``
(``wharf.core.transitions.run_end``). Invariant: a taken-over run's finished steps are not run
again and its attempts in flight are taken over, never started twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.store.models import (
    MAX_PAGE_SIZE,
    OrchestratorProcess,
    PageRequest,
    PipelineRunRecord,
    RunCreate,
    StepRunFilter,
    StepRunRecord,
)
from wharf.store.ports import Store

IN_FLIGHT_STATUSES = frozenset(
    {ExecutionStatus.RUNNING, ExecutionStatus.STOPPING, ExecutionStatus.CANCELLING}
)
"""Statuses of a step run whose attempt has (or had) a process executing it."""


@dataclass(frozen=True)
class Resumption:
    """What a process taking over a started run knows of its steps.

    A run whose orchestrating process died mid-run may be taken over by another process of the
    same orchestrator run (e.g. a Kubernetes orchestrator pod restarted by its Job). A dynamic
    pipeline's run is taken over by running its function again: a step call goes on from the
    earlier step run of its invocation id only when it is the same call
    (:func:`replay_differs`), so a function that takes another path never gets an earlier
    call's outputs."""

    steps: Mapping[str, StepRunRecord]
    """The latest step run (highest attempt) of each step started so far, by step name."""
    adoptable: frozenset[UUID] = field(default_factory=frozenset)
    """Step runs in flight whose attempt the orchestrator's step backend takes over when it
    is submitted again (e.g. a Kubernetes step Job that still runs). Any other step run in
    flight lost its process with the earlier orchestrator: it ends failed (stopped if the run
    is stopping), as an attempt whose process ended without a result does."""


def replay_differs(record: StepRunRecord, spec: StepSpec, inputs: Mapping[str, UUID]) -> str | None:
    """How the step call ``spec`` with input versions ``inputs`` (by input name), made by a
    dynamic pipeline's function replayed after a restart, differs from ``record``, the step
    run of the same invocation id an earlier process created; None: it is the same call.
    The whole recorded spec is compared (step function and code, parameters, settings, where
    its inputs come from), not the cache key: a cache policy may leave parameters or inputs
    out of the key, and its file digests or cache function may change between processes."""
    if record.spec is None:
        return "its earlier step run records no spec to compare with"
    earlier = record.spec.model_dump(mode="json")
    now = spec.model_dump(mode="json")
    for key, what in (
        ("source", "another step function"),
        ("code_hash", "other step code"),
        ("parameters", "other parameters"),
        ("inputs", "inputs from other steps"),
    ):
        if earlier.get(key) != now.get(key):
            return what
    if earlier != now:
        return "other step settings"
    if dict(record.inputs) != dict(inputs):
        return "other input artifact versions"
    return None


def start_run(
    store: Store,
    placeholder: PipelineRunRecord,
    orchestrator_run_id: str,
    orchestrator: OrchestratorProcess | None = None,
) -> PipelineRunRecord:
    """Replace ``placeholder`` with the run started (running) by the process ``orchestrator``
    (recorded with a first heartbeat: ``wharf.execution.run_heartbeat``). An orchestrator
    that starts the run at once, in this process, has it recorded running from the start
    (``runs.record``) and needs no placeholder."""
    run, _created = store.runs.get_or_create(
        RunCreate(
            project_id=placeholder.project_id,
            pipeline_id=placeholder.pipeline_id,
            snapshot_id=placeholder.snapshot_id,
            name=placeholder.name,
            status=ExecutionStatus.RUNNING,
            orchestrator_run_id=orchestrator_run_id,
            user_id=placeholder.user_id,
            orchestrator=orchestrator,
        )
    )
    return run


def latest_step_runs(store: Store, run_id: UUID) -> dict[str, StepRunRecord]:
    """The latest step run (highest attempt) of each step of run ``run_id``, by name: one
    list call per thousand step runs."""
    latest: dict[str, StepRunRecord] = {}
    index = 1
    while True:
        page = store.steps.list(
            StepRunFilter(run_id=run_id), PageRequest(index=index, size=MAX_PAGE_SIZE, sort="asc")
        )
        for record in page.items:
            known = latest.get(record.name)
            if known is None or record.attempt > known.attempt:
                latest[record.name] = record
        if index >= page.total_pages:
            return latest
        index += 1
