"""The workspace server's link to the Resource Manager: the HTTP client it logs in with
(:func:`connect`), the step-resource service built on it (:func:`pair`), and what it knows about
each request's project and run (:class:`ServerRequests`, :func:`scope_of`).

Invariants:
- the server reaches the RM only through its client interface
  (:mod:`wharf.resource_manager.contract`), as the one RM principal of its token, and decides
  itself which of its callers may see or change which request;
- without a Resource Manager the server is still paired: every request operation fails with
  :data:`NO_RESOURCE_MANAGER` (a queued step asking for resources fails at creation), while
  steps without a request never touch it;
- the RM's refusal of the server's own credentials is the server's outage
  (``StoreUnavailableError``, 503, :func:`server_credentials`), never the caller's 401.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.combining import Combiner
from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import (
    IllegalOperationError,
    StoreError,
    StoreUnavailableError,
    WharfError,
)

if TYPE_CHECKING:
    from wharf.resource_manager.contract.models import (
        ExplanationInfo,
        Page,
        PageRequest,
        RenewalItem,
        RequestFilter,
        ResourceRequestCreate,
        ResourceRequestInfo,
    )
    from wharf.resource_manager.contract.protocol import RequestsClient, ResourceManagerClient
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
MAX_COALESCED = 1000
"""Most renewals per bulk call (the RM's ``MAX_RENEWALS``); more queued wait for the next."""


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
    scope of every request it sees and mapping the RM's refusal of the server's credentials.

    A request's scope (project and run, from its subject chain) never changes, so it is cached
    per process once seen: renewing a request costs one RM call, not a read and a write.
    """

    def __init__(self, client: ResourceManagerClient | None) -> None:
        self._client = client
        self._scopes: dict[UUID, RequestScope] = {}
        self.requests = _Remembering(self)
        """What the step-resource service and the routes call (refusing without an RM)."""

    @property
    def configured(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> ResourceManagerClient:
        """The RM client itself, for the routes that show the team's pools (read only)."""
        if self._client is None:
            raise IllegalOperationError(NO_RESOURCE_MANAGER)
        return self._client

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


class RenewalCoalescer(Combiner["RenewalItem"]):
    """Concurrent renewals sent as bulk renewals (a :class:`wharf.combining.Combiner`).

    Every step heartbeat renews its request, and heartbeats are served on the thread pool: the
    first caller sends whatever is queued, the others sleep until their own answer is in. A lone
    caller sends its renewal alone, at once, so coalescing adds no latency where there is nothing
    to combine. A coalesced renewal answers its caller exactly as a single one would: the
    request, or the same error raised in the caller's thread (an item's not found / forbidden
    fails that item alone; a failure of the whole bulk call fails each of its callers).

    ``single`` renews one request (its errors raised), ``bulk`` many (an answer or an error per
    item, errors of the whole call raised). Renewals with an idempotency key are never coalesced
    (the bulk call takes none)."""

    def __init__(
        self,
        single: Callable[[RenewalItem], ResourceRequestInfo],
        bulk: Callable[[Sequence[RenewalItem]], list[ResourceRequestInfo | WharfError]],
        max_batch: int = MAX_COALESCED,
    ) -> None:
        super().__init__(max_batch)
        self._single = single
        self._bulk = bulk

    def renew(self, item: RenewalItem) -> ResourceRequestInfo:
        renewed: ResourceRequestInfo = self.submit(item)
        return renewed

    def run_batch(
        self, operations: list[RenewalItem]
    ) -> Sequence[ResourceRequestInfo | BaseException]:
        if len(operations) == 1:
            return [self._single(operations[0])]
        answers = self._bulk_or_singles(operations)
        if len(answers) != len(operations):
            raise StoreError("The Resource Manager answered a bulk renewal partly.")
        return answers

    def _bulk_or_singles(
        self, items: list[RenewalItem]
    ) -> Sequence[ResourceRequestInfo | BaseException]:
        try:
            return self._bulk(items)
        except StoreUnavailableError:
            raise
        except StoreError:
            # An RM older than this server has no bulk route (405): renew one by one.
            return [self._single_or_error(item) for item in items]

    def _single_or_error(self, item: RenewalItem) -> ResourceRequestInfo | BaseException:
        try:
            return self._single(item)
        except WharfError as error:
            return error


class _Remembering:
    """A ``RequestsClient`` that notes the scope of each request passing through it, and
    coalesces concurrent renewals without an idempotency key (:class:`RenewalCoalescer`)."""

    def __init__(self, owner: ServerRequests) -> None:
        self._owner = owner
        self._renewals = RenewalCoalescer(self._renew_one, self._renew_bulk)

    @property
    def _inner(self) -> RequestsClient:
        """The RM's requests client (IllegalOperationError: the server has no RM)."""
        return self._owner.client.requests

    def _renew_one(self, item: RenewalItem) -> ResourceRequestInfo:
        return self._inner.renew(item.id, item.lease_seconds, item.runtime_state)

    def _renew_bulk(self, items: Sequence[RenewalItem]) -> list[ResourceRequestInfo | WharfError]:
        return self._inner.renew_many(items)

    def _seen(self, info: ResourceRequestInfo) -> ResourceRequestInfo:
        self._owner.remember(info)
        return info

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        with server_credentials():
            return self._seen(self._inner.create(spec, idempotency_key=idempotency_key))

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        with server_credentials():
            return self._seen(self._inner.get(request_id))

    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        with server_credentials():
            if idempotency_key is not None:
                renewed = self._inner.renew(
                    request_id, lease_seconds, runtime_state, idempotency_key=idempotency_key
                )
            else:
                renewed = self._renewals.renew(
                    _renewal_item(request_id, lease_seconds, runtime_state)
                )
        return self._seen(renewed)

    def renew_many(self, renewals: Sequence[RenewalItem]) -> list[ResourceRequestInfo | WharfError]:
        with server_credentials():
            answers = self._inner.renew_many(renewals)
        for answer in answers:
            if not isinstance(answer, WharfError):
                self._owner.remember(answer)
        return answers

    def release(
        self, request_id: UUID, *, idempotency_key: str | None = None, by: str | None = None
    ) -> ResourceRequestInfo:
        with server_credentials():
            released = self._inner.release(request_id, idempotency_key=idempotency_key, by=by)
        return self._seen(released)

    def cancel(
        self, request_id: UUID, *, idempotency_key: str | None = None, by: str | None = None
    ) -> ResourceRequestInfo:
        with server_credentials():
            return self._seen(
                self._inner.cancel(request_id, idempotency_key=idempotency_key, by=by)
            )

    def explain(self, request_id: UUID) -> ExplanationInfo:
        with server_credentials():
            return self._inner.explain(request_id)

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]:
        with server_credentials():
            found = self._inner.list(query, page)
        for info in found.items:
            self._owner.remember(info)
        return found


def _renewal_item(
    request_id: UUID, lease_seconds: int, runtime_state: ResourceRequestRuntimeState | None
) -> RenewalItem:
    """The renewal as a bulk item, validated here so a bad lease fails its own caller (with
    the InputError a single renewal raises)."""
    from wharf.resource_manager.contract.models import RenewalItem
    from wharf.resource_manager.domain import load

    renewal = {"id": request_id, "lease_seconds": lease_seconds, "runtime_state": runtime_state}
    return load(RenewalItem, renewal)


@contextmanager
def server_credentials() -> Iterator[None]:
    """Turns the RM's 401 (the server's token is wrong) into an outage of the server."""
    from wharf.resource_manager.contract import AuthenticationError

    try:
        yield
    except AuthenticationError as error:
        raise StoreUnavailableError(
            "The Resource Manager refused the workspace server's credentials "
            f"(--resource-manager-token): {error}"
        ) from None


def pair(state: ServerState, requests: ServerRequests) -> None:
    """Give the state the step-resource application service its step routes write step runs
    through (:mod:`wharf.server.step_resources`; requests are made for the user each run
    records), and keep ``requests`` on the state for the request routes."""
    from wharf.server.step_resources import StepResourceService

    step_runs = StepResourceService(state.store, requests.requests)
    state.step_runs = step_runs
    state.release_ended = step_runs.release_ended
    state.resource_requests = requests
