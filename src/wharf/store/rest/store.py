"""``RestStore``: the :class:`~wharf.store.ports.Store` bundle over a workspace server.

Each repository is a thin client of one resource, all sharing one :class:`HttpSession`
(connection pool, credentials: an access token, a run token or an API key, sent as
``Authorization: Bearer``). Invariants: nothing is contacted before the first call; a combined
call of the ports is one request where the server has a route for it (the step runs' and
artifacts'), else the plain calls composed (a run's records and end). Its steps' resource
requests are not the store's (:class:`wharf.execution.resources.team.WorkspaceRequests`).
"""

from __future__ import annotations

import copy

import httpx

from wharf.store.ports import (
    ArtifactRepository,
    PipelineRepository,
    ProjectRepository,
    RunMetadataRepository,
    RunRepository,
    ScheduleRepository,
    SnapshotRepository,
    StackRepository,
    StepRunRepository,
    Store,
    UserRepository,
)
from wharf.store.rest.accounts import RestProjectRepository, RestUserRepository
from wharf.store.rest.artifacts import RestArtifactRepository
from wharf.store.rest.http import DEFAULT_TIMEOUT_SECONDS, HttpSession
from wharf.store.rest.metadata import RestRunMetadataRepository, RestScheduleRepository
from wharf.store.rest.pipelines import RestPipelineRepository, RestSnapshotRepository
from wharf.store.rest.runs import RestRunRepository
from wharf.store.rest.stacks import RestStackRepository
from wharf.store.rest.steps import RestStepRunRepository


class RestStore:
    users: UserRepository
    projects: ProjectRepository
    stacks: StackRepository
    pipelines: PipelineRepository
    snapshots: SnapshotRepository
    runs: RunRepository
    steps: StepRunRepository
    artifacts: ArtifactRepository
    run_metadata: RunMetadataRepository
    schedules: ScheduleRepository

    def __init__(
        self,
        url: str,
        credential: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._build(HttpSession(url, credential, timeout=timeout, transport=transport))

    def _build(self, http: HttpSession) -> None:
        self.http = http
        self.users = RestUserRepository(self.http)
        self.projects = RestProjectRepository(self.http)
        self.stacks = RestStackRepository(self.http)
        self.pipelines = RestPipelineRepository(self.http)
        self.snapshots = RestSnapshotRepository(self.http)
        self.run_metadata = RestRunMetadataRepository(self.http)
        self.runs = RestRunRepository(self.http, self.run_metadata)
        self.steps = RestStepRunRepository(self.http)
        self.artifacts = RestArtifactRepository(self.http)
        self.schedules = RestScheduleRepository(self.http)

    def with_credential(self, credential: str) -> RestStore:
        """This store as ``credential`` sees it, over the same connections (closing it leaves
        them to this store): how a run's orchestrating process switches to the run's token."""
        store = copy.copy(self)
        store._build(self.http.with_credential(credential))
        return store

    @property
    def url(self) -> str:
        """The server's URL (credentials are never part of it)."""
        return self.http.url

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RestStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RestStore({self.url!r})"


def _conforms(store: RestStore) -> Store:
    return store  # mypy proves that RestStore implements the Store protocol
