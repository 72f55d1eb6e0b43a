"""The workspace server's link to the Resource Manager: the HTTP client it logs in with, the
pairing of its store with it, and what it knows about each request's project and run.

Owns: :func:`connect` (the client of ``ServerSettings.resource_manager_*``, or None),
:func:`pair` (the server's step runs and batch calls become resource-aware, for the user each
run records), :class:`RequestScope` / :func:`scope_of`, and :class:`ServerRequests`.

Invariants:
- the server reaches the RM only through its client (:mod:`wharf.resource_manager.client`);
  it creates, renews and releases every request of its steps as the one RM principal of its
  token, and decides itself which of its callers may see or change which request;
- without a Resource Manager the server is still paired: every request operation fails with
  :data:`NO_RESOURCE_MANAGER` (a queued step asking for resources fails at creation, saying
  so) while steps without a request never touch it;
- the RM's refusal of the server's own credentials is the server's outage, reported as
  ``StoreUnavailableError`` (503), never as the caller's authentication failure (401);
- a request's scope (project and run, from its subject chain) never changes, so it is cached
  per process once seen: renewing a request costs one RM call, not a read and a write.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import IllegalOperationError, StoreUnavailableError
from wharf.store.lazy_requests import LazyRequests
from wharf.store.resource_aware import ResourceAwareBatches, pair_store, recorded_user

if TYPE_CHECKING:
    from wharf.resource_manager.client.models import (
        ExplanationInfo,
        Page,
        PageRequest,
        RequestFilter,
        ResourceRequestCreate,
        ResourceRequestInfo,
    )
    from wharf.resource_manager.client.protocol import RequestsClient, ResourceManagerClient
    from wharf.server.settings import ServerSettings
    from wharf.server.state import ServerState

NO_RESOURCE_MANAGER = (
    "This workspace server has no Resource Manager, so it cannot handle resource requests: "
    "start it with --resource-manager-url and --resource-manager-token, or run the step "
    "without resources."
)
TIMEOUT_SECONDS = 5.0
"""Per attempt. A heartbeat waits for its lease renewal, so a hung RM must not hold it up
beyond the REST client's own timeout (30 s): three attempts and their backoff stay well under."""
RETRY_ATTEMPTS = 3
RETRY_BACKOFF_SECONDS = 0.1
MAX_RETRY_BACKOFF_SECONDS = 1.0
SCOPE_CACHE_SIZE = 50_000


def connect(settings: ServerSettings) -> ResourceManagerClient | None:
    """The HTTP client of the configured Resource Manager (it logs in on first use)."""
    if settings.resource_manager_url is None or settings.resource_manager_token is None:
        return None
    from wharf.resource_manager.client.http import HttpResourceManager
    from wharf.resource_manager.client.http_transport import RetryPolicy

    return HttpResourceManager(
        settings.resource_manager_url,
        api_key=settings.resource_manager_token.get_secret_value(),
        timeout=TIMEOUT_SECONDS,
        retry=RetryPolicy(
            attempts=RETRY_ATTEMPTS,
            backoff_seconds=RETRY_BACKOFF_SECONDS,
            max_backoff_seconds=MAX_RETRY_BACKOFF_SECONDS,
        ),
    )


@dataclass(frozen=True, slots=True)
class RequestScope:
    """Where a request belongs in the workspace; None where its subjects do not say."""

    project_id: UUID | None
    run_id: UUID | None


def _uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


def scope_of(info: ResourceRequestInfo) -> RequestScope:
    """The project and run of the first subject chain that starts at a project (the chain the
    server writes: project -> pipeline -> pipeline run -> step run)."""
    from wharf.resource_manager.domain import SubjectType

    for chain in info.subjects:
        if not chain.nodes or chain.nodes[0].subject_type is not SubjectType.PROJECT:
            continue
        run_id = next(
            (
                _uuid(node.subject_id)
                for node in chain.nodes
                if node.subject_type is SubjectType.PIPELINE_RUN
            ),
            None,
        )
        return RequestScope(_uuid(chain.nodes[0].subject_id), run_id)
    return RequestScope(None, None)


class ServerRequests:
    """The server's requests client: the RM's (or, without one, a refusal), remembering the
    scope of every request it sees and mapping the RM's refusal of the server's credentials."""

    def __init__(self, client: ResourceManagerClient | None) -> None:
        self._client = client
        self._scopes: dict[UUID, RequestScope] = {}
        self.requests = LazyRequests(self._connect)
        """What the store and the routes call (connected on first use)."""

    @property
    def configured(self) -> bool:
        return self._client is not None

    def _connect(self) -> RequestsClient:
        if self._client is None:
            raise IllegalOperationError(NO_RESOURCE_MANAGER)
        return _Remembering(self._client.requests, self)

    def scope(self, request_id: UUID) -> RequestScope | None:
        """The request's scope if this process has seen it."""
        return self._scopes.get(request_id)

    def remember(self, info: ResourceRequestInfo) -> RequestScope:
        scope = self._scopes.get(info.id)
        if scope is None:
            scope = scope_of(info)
            if len(self._scopes) >= SCOPE_CACHE_SIZE:
                self._scopes.clear()
            self._scopes[info.id] = scope
        return scope


class _Remembering:
    """A ``RequestsClient`` that notes the scope of each request passing through it."""

    def __init__(self, inner: RequestsClient, owner: ServerRequests) -> None:
        self._inner = inner
        self._owner = owner

    def _seen(self, info: ResourceRequestInfo) -> ResourceRequestInfo:
        self._owner.remember(info)
        return info

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        with _server_credentials():
            return self._seen(self._inner.create(spec, idempotency_key=idempotency_key))

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        with _server_credentials():
            return self._seen(self._inner.get(request_id))

    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        with _server_credentials():
            renewed = self._inner.renew(
                request_id, lease_seconds, runtime_state, idempotency_key=idempotency_key
            )
        return self._seen(renewed)

    def release(
        self, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        with _server_credentials():
            return self._seen(self._inner.release(request_id, idempotency_key=idempotency_key))

    def cancel(
        self, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        with _server_credentials():
            return self._seen(self._inner.cancel(request_id, idempotency_key=idempotency_key))

    def explain(self, request_id: UUID) -> ExplanationInfo:
        with _server_credentials():
            return self._inner.explain(request_id)

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]:
        with _server_credentials():
            found = self._inner.list(query, page)
        for info in found.items:
            self._owner.remember(info)
        return found


@contextmanager
def _server_credentials() -> Iterator[None]:
    """Turns the RM's 401 (the server's token is wrong) into an outage of the server."""
    from wharf.resource_manager.client import AuthenticationError

    try:
        yield
    except AuthenticationError as error:
        raise StoreUnavailableError(
            "The Resource Manager refused the workspace server's credentials "
            f"(--resource-manager-token): {error}"
        ) from None


def pair(state: ServerState, requests: ServerRequests) -> None:
    """Make the server's step runs and batch calls resource-aware (requests are made for the
    user each run records) and keep ``requests`` on the state for the routes."""
    steps = pair_store(state.store, requests.requests, recorded_user(state.store))
    if not isinstance(state.batches, ResourceAwareBatches):
        state.batches = ResourceAwareBatches(state.batches, steps)
    state.resource_requests = requests
