"""The :class:`~wharf.sdk.client.Client`'s reads of artifact values: an artifact version by id
or id prefix, its Python value (loaded from the artifact store that wrote it), the value a step
of a run produced, and the artifact store of a run.

Invariant: a name that matches nothing (a step of the run, an output of the step) is refused
with an error that lists what there is and suggests the close spelling
(``wharf.core.suggestions``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import EntityNotFoundError
from wharf.core.ids import MAX_ID_CANDIDATES, only_match, parse_id_prefix, parse_uuid
from wharf.core.suggestions import unmatched
from wharf.store.models import (
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    PageRequest,
    StepRunRecord,
)

if TYPE_CHECKING:
    from wharf.sdk.client import Client


def get_artifact_version(client: Client, version_id: str | UUID) -> ArtifactVersionRecord:
    """An artifact version by id or id prefix (an artifact's name is refused, saying how to
    get its latest version)."""
    if not isinstance(version_id, str | UUID):
        raise TypeError(
            "get_artifact_version takes an artifact version's id (a UUID, or a str: the id "
            f"or an id prefix), not a {type(version_id).__name__}."
        )
    uid = version_id if isinstance(version_id, UUID) else parse_uuid(version_id)
    if uid is not None:
        return client.store.artifacts.get_version(uid)
    prefix = parse_id_prefix(str(version_id))
    found = None
    if prefix is not None:
        query = ArtifactVersionFilter(project_id=client.project_id, id_prefix=prefix)
        page = PageRequest(size=MAX_ID_CANDIDATES + 1)
        matches = client.store.artifacts.list_versions(query, page).items
        found = only_match("artifact version", str(version_id), matches)
    if found is None:
        text = str(version_id)  # an artifact's name, as `wharf artifacts load` takes?
        named = prefix is None and client.list_artifact_versions(name=text, size=1).total
        raise EntityNotFoundError(
            f"'{text}' is an artifact's name, not a version's id: its latest version is "
            f"list_artifact_versions(name='{text}').items[0]."
            if named
            else f"No artifact version with id or id prefix '{text}'."
        )
    return found


def load_artifact(client: Client, version: ArtifactVersionRecord | str | UUID) -> Any:
    """The Python value of an artifact version (a record, or its id or id prefix)."""
    from wharf.artifacts import load_artifact as load

    if not isinstance(version, ArtifactVersionRecord | str | UUID):
        raise TypeError(
            "load_artifact takes an artifact version (ArtifactVersionRecord) or its id "
            f"(a UUID, or a str: the id or an id prefix), not a {type(version).__name__}."
        )
    if not isinstance(version, ArtifactVersionRecord):
        version = get_artifact_version(client, version)
    workspace = client.workspace
    if version.artifact_store_id is not None:  # the store that wrote it, wherever it is
        from wharf.execution.components import instantiate_component

        record = client.store.stacks.get_component(version.artifact_store_id)
        artifact_store = instantiate_component(record)
    else:
        stack = workspace.active_stack()
        artifact_store = workspace.component_instance(stack, ComponentType.ARTIFACT_STORE)
    return load(artifact_store, version.uri, version.data_type, version.materializer)


def run_artifact_store(client: Client, run_id: UUID) -> Any:
    """The artifact store of the stack the run ran on (it may not be the active one). Once that
    stack was deleted, the store its steps' artifact versions record they were written to (its
    component outlives the stack); with none recorded, an error says the store is unknown
    (never the active stack's store: the run's files are not there)."""
    from wharf.execution.components import instantiate_component

    store = client.store
    run = store.runs.get(run_id)
    snapshot = store.snapshots.get(run.snapshot_id)
    if snapshot.stack_id is None:
        component_id = _written_to(client, run_id)
        if component_id is None:
            raise EntityNotFoundError(
                f"Run '{run.name}' ran on a stack that has since been deleted, and none of its "
                "steps recorded the artifact store it wrote to: its artifact store (and so its "
                "steps' logs) is unknown."
            )
        return instantiate_component(store.stacks.get_component(component_id))
    stack = store.stacks.get_stack(snapshot.stack_id)
    component_id = stack.components.get(ComponentType.ARTIFACT_STORE)
    if component_id is not None:
        return instantiate_component(store.stacks.get_component(component_id))
    workspace = client.workspace
    return workspace.component_instance(workspace.active_stack(), ComponentType.ARTIFACT_STORE)


def _written_to(client: Client, run_id: UUID) -> UUID | None:
    """The artifact store (component id, still registered) that an artifact version produced by
    one of the run's steps records it was written to; None if none does."""
    from wharf.store.models import StepRunFilter

    store = client.store
    steps = store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=1000)).items
    for step in steps:
        query = ArtifactVersionFilter(producer_step_run_id=step.id)
        for version in store.artifacts.list_versions(query, PageRequest(size=50)).items:
            if version.artifact_store_id is None:
                continue
            try:
                store.stacks.get_component(version.artifact_store_id)
            except EntityNotFoundError:
                continue
            return version.artifact_store_id
    return None


def load_step_output(
    client: Client, run: str | UUID, step_name: str, output: str | None = None
) -> Any:
    """The value a step of a run produced (its only output unless ``output`` is named)."""
    step = client.get_run_step(run, step_name)
    return load_artifact(client, output_version(step, output))


def output_version(step: StepRunRecord, output: str | None) -> UUID:
    """The artifact version of a step run's output ``output`` (its only one if None); an
    output it does not have is refused, saying why it has none or which it has."""
    if not step.outputs:  # nothing to name: say why there is nothing
        produced = step.status in (ExecutionStatus.COMPLETED, ExecutionStatus.CACHED)
        why = "" if produced else f": it is {step.status.value}"
        wanted = "no outputs" if output is None else f"no output '{output}'"
        raise EntityNotFoundError(f"Step '{step.name}' has {wanted}{why}.")
    if output is None:
        if len(step.outputs) != 1:
            raise EntityNotFoundError(
                f"Step '{step.name}' has outputs {sorted(step.outputs)}; name one."
            )
        (version_id,) = step.outputs.values()
        return version_id
    if output not in step.outputs:
        raise EntityNotFoundError(
            f"Step '{step.name}' has no output '{output}'"
            + unmatched(output, sorted(step.outputs), "outputs")
        )
    return step.outputs[output]
