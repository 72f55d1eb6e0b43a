"""Where the orchestrator pod's steps ask for their allocations (:func:`step_resources`).

Invariant: the same Resource Manager a client's run on the same store asks (``Workspace.open``
makes that choice for a client): the workspace server's, through the server, when the store is
REST; else the one the config names beside the SQL store, for the run's user.
"""

from __future__ import annotations

from wharf.config.global_config import WharfConfig
from wharf.execution.resources.embedded import connect_configured
from wharf.execution.resources.port import StepResources
from wharf.store.models import PipelineRunRecord
from wharf.store.ports import Store


def step_resources(
    store: Store, config: WharfConfig, run: PipelineRunRecord
) -> StepResources | None:
    """Where the run's steps ask for their allocations: the workspace server's Resource Manager
    through the server (the pod's store is REST), as a client's run there does; else the one
    the config names beside the SQL store (embedded by default), for the run's user."""
    from wharf.store.rest.store import RestStore

    if isinstance(store, RestStore):
        from wharf.execution.resources.team import TeamStepResources, WorkspaceRequests

        return TeamStepResources(WorkspaceRequests(store.http, run.project_id))
    user = store.users.get(run.user_id) if run.user_id else None
    return connect_configured(store, config, user, user.name if user else "default")
