"""The step-resource application service: what the workspace server's step routes do besides
storing a step run.

Owns :func:`step_runs_with_resources`: the step runs of the server's store as its step routes and
its lost-run sweeps write them. A queued step that asks for resources gets its Resource Manager
request (for the user its run records) before its row is written, a heartbeat renews it and turns
a reclaimed request into a ``cancelling`` step, a final status releases it
(:class:`wharf.execution.resources.paired_steps.ResourceAwareStepRuns` does the work).

Invariant: the server's store is never wrapped: ``state.store.steps`` only stores, and every
step write a route makes goes through ``state.step_runs``, so a client's ``resource_request_id``
never reaches the store (only a request the server made for the step does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wharf.execution.resources.paired_steps import ResourceAwareStepRuns
from wharf.execution.resources.pairing import recorded_user
from wharf.store.ports import Store

if TYPE_CHECKING:
    from wharf.execution.resources.embedded import LazyRequests


def step_runs_with_resources(store: Store, requests: LazyRequests) -> ResourceAwareStepRuns:
    """``store``'s step runs, each write paired with the Resource Manager behind ``requests``."""
    return ResourceAwareStepRuns(store.steps, store, requests, recorded_user(store))
