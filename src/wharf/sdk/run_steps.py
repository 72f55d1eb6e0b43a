"""Finding a step of a run by name for the :class:`~wharf.sdk.client.Client`: its latest step
run (the last retry attempt), or an error that says what the run has instead.

Invariant: a name that is none of the run's steps is refused naming the run, suggesting the
close spelling and listing its steps (capped: ``wharf.core.suggestions``); a step of the run's
pipeline that has no step run yet is said to be not reached (yet), not missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wharf.core.errors import EntityNotFoundError
from wharf.core.suggestions import unmatched
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter, StepRunRecord

if TYPE_CHECKING:
    from wharf.sdk.client import Client

NAMES_READ_PAGES = 10
"""Most pages (of 1,000 step runs, the oldest first) read to list a run's step names."""
_PAGE_SIZE = 1000


def step_named(client: Client, run: PipelineRunRecord, name: str) -> StepRunRecord:
    """The latest step run named ``name`` of ``run``; else :func:`no_step`'s error."""
    query = StepRunFilter(project_id=client.project_id, run_id=run.id, names=(name,))
    found = client.store.steps.list(query, PageRequest(size=1, sort="desc")).items
    if not found:
        raise no_step(client, run, name)
    return found[0]


def no_step(client: Client, run: PipelineRunRecord, name: str) -> EntityNotFoundError:
    """The error for a step ``name`` of which ``run`` has no step run: one its pipeline has
    but the run has not reached (yet), or else none of its steps (listed, with a suggestion)."""
    planned = list(client.get_snapshot(run.snapshot_id).spec.steps)
    if name in planned:
        if run.status.is_finished:
            return EntityNotFoundError(
                f"Run '{run.name}' never ran its step '{name}' (the run is {run.status.value})."
            )
        return EntityNotFoundError(
            f"Run '{run.name}' has not started its step '{name}' yet "
            f"(the run is {run.status.value})."
        )
    names = list(dict.fromkeys([*planned, *_step_run_names(client, run)]))
    return EntityNotFoundError(
        f"Run '{run.name}' has no step '{name}'" + unmatched(name, names, "steps")
    )


def _step_run_names(client: Client, run: PipelineRunRecord) -> list[str]:
    """The names of the run's step runs in the order they were made (a dynamic run's are not
    all in its snapshot), reading at most :data:`NAMES_READ_PAGES` pages."""
    query = StepRunFilter(project_id=client.project_id, run_id=run.id)
    names: dict[str, None] = {}
    for index in range(1, NAMES_READ_PAGES + 1):
        page = client.store.steps.list(query, PageRequest(index=index, size=_PAGE_SIZE, sort="asc"))
        names.update(dict.fromkeys(s.name for s in page.items))
        if index * _PAGE_SIZE >= page.total:
            break
    return list(names)
