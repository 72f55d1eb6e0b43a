# ruff: noqa: F811  (fixtures imported from the API conftest)
"""The HTTP client's transport against real servers that fail on purpose: retries with backoff,
idempotency keys reused across retries, re-login on 401, token refresh, error mapping.

The gateway is a tiny FastAPI app in front of the real RM: it follows a plan (one action per
call, logins apart), forwards everything else and records what it saw. Every gateway test runs
over both wires (:mod:`wharf.resource_manager.client.http_wire`): ``httpcore`` directly (the
default) and an injected ``httpx.Client``, since both share one retry and error path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI, Request, Response

from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    server,
    sqlite_rm_url,
)
from tests.resource_manager.api.live import ADMIN_KEY, LiveServer, free_socket, start_rm
from wharf.core.enums import ResourceRequestStatus as Status
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
    StoreError,
    StoreUnavailableError,
)
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.client.http_transport import RetryPolicy
from wharf.resource_manager.client.http_wire import CoreWire, HttpxWire
from wharf.resource_manager.contract import AuthenticationError, PermissionDeniedError
from wharf.resource_manager.contract.models import PolicyCreate, PoolCreate, ResourceRequestCreate

LOGIN = "/v1/auth/login"
POOL = PoolCreate.model_validate(
    {"name": "gpus", "classes": [{"name": "a", "capacity": {"GPU": 1}}]}
)
POLICY = PolicyCreate.model_validate(
    {"name": "all", "pool": "gpus", "subject_selector": {"subject_type": "project"}}
)
REQUEST = ResourceRequestCreate.model_validate(
    {
        "subjects": [{"nodes": [{"subject_type": "project", "subject_id": "p"}]}],
        "demands": [{"resource": "GPU", "quantity": 1}],
        "lease_seconds": 60,
    }
)


@dataclass
class Seen:
    method: str
    path: str
    key: str | None
    token: str | None
    peer: int  # the client's port: one per connection


class Gateway:
    """Actions: ``"503"`` (answer that status, ``Retry-After: 0``), ``"lose:502"`` (forward,
    then answer 502 instead of the RM's answer), ``"plain:409:text"`` (a JSON error without
    Wharf's ``error`` field), ``"close"`` (forward, then close the connection), ``"forward"``."""

    def __init__(self, upstream: str, wire: str) -> None:
        self.upstream = upstream
        self.wire = wire
        self.plan: list[str] = []
        self.login_plan: list[str] = []
        """The actions for logins (else forwarded)."""
        self.seen: list[Seen] = []
        self.app = FastAPI()
        self.app.add_api_route(
            "/{path:path}", self.relay, methods=["GET", "POST", "PATCH", "DELETE"]
        )

    def calls(self) -> list[Seen]:
        return [s for s in self.seen if s.path != LOGIN]

    def logins(self) -> int:
        return sum(s.path == LOGIN for s in self.seen)

    async def relay(self, request: Request) -> Response:
        path = request.url.path
        auth = request.headers.get("authorization")
        key = request.headers.get("x-idempotency-key")
        peer = request.client.port if request.client else 0
        self.seen.append(Seen(request.method, path, key, auth, peer))
        plan = self.login_plan if path == LOGIN else self.plan
        action = plan.pop(0) if plan else "forward"
        if action.isdigit():
            return Response(status_code=int(action), headers={"Retry-After": "0"})
        if action.startswith("plain:"):
            _, status, text = action.split(":", 2)
            return Response(f'{{"detail": "{text}"}}', status_code=int(status))
        async with httpx.AsyncClient(base_url=self.upstream) as upstream:
            answer = await upstream.request(
                request.method,
                path,
                params=request.query_params,
                content=await request.body(),
                headers={k: v for k, v in request.headers.items() if k != "host"},
            )
        if action.startswith("lose:"):
            return Response(status_code=int(action.removeprefix("lose:")))
        return Response(
            answer.content,
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
            headers={"Connection": "close"} if action == "close" else None,
        )


@pytest.fixture(params=["httpcore", "httpx"])
def gateway(
    server: LiveServer, request: pytest.FixtureRequest
) -> Iterator[tuple[Gateway, LiveServer]]:
    gate = Gateway(server.url, request.param)
    live = LiveServer(gate.app).start()
    yield gate, live
    live.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _client(gate: Gateway, live: LiveServer, **options: object) -> HttpResourceManager:
    sleeps: list[float] = []
    options.setdefault("sleep", sleeps.append)
    if gate.wire == "httpx":
        options["http"] = httpx.Client(base_url=live.url)
    client = HttpResourceManager(live.url, api_key=ADMIN_KEY, **options)  # type: ignore[arg-type]
    wire = client._transport._wire  # the wire it picked
    assert isinstance(wire, HttpxWire if gate.wire == "httpx" else CoreWire)
    client.sleeps = sleeps  # type: ignore[attr-defined]
    return client


def test_transient_failures_are_retried_with_one_key(
    gateway: tuple[Gateway, LiveServer], server: LiveServer
) -> None:
    gate, live = gateway
    gate.plan = ["503", "502", "429", "504", "408"]
    with _client(gate, live) as client:
        pool = client.pools.create(POOL)
        assert client.sleeps == [0.0] * 5  # type: ignore[attr-defined]  # Retry-After: 0
    calls = gate.calls()
    assert [c.method for c in calls] == ["POST"] * 6
    assert len({c.key for c in calls}) == 1 and calls[0].key
    with server.client() as direct:
        assert direct.pools.list() == [pool]


def test_a_lost_answer_is_retried_and_applied_once(
    gateway: tuple[Gateway, LiveServer], server: LiveServer
) -> None:
    gate, live = gateway
    gate.plan = ["lose:502", "lose:504"]
    with _client(gate, live) as client:  # applied by the first attempt, replayed by the others
        assert client.pools.create(POOL, idempotency_key="mine").name == "gpus"
    assert [c.key for c in gate.calls()] == ["mine"] * 3
    with server.client() as direct:
        assert [p.name for p in direct.pools.list()] == ["gpus"]


def test_a_new_call_gets_a_new_key(gateway: tuple[Gateway, LiveServer]) -> None:
    gate, live = gateway
    with _client(gate, live) as client:
        client.pools.create(POOL)
        with pytest.raises(EntityExistsError):
            client.pools.create(POOL)
        client.pools.list()
    keys = [c.key for c in gate.calls()]
    assert keys[0] != keys[1] and keys[2] is None  # reads carry no key


def test_naturally_idempotent_calls_need_no_key(gateway: tuple[Gateway, LiveServer]) -> None:
    """Renew, release and cancel change nothing more when repeated: they carry a key only when
    the caller gives one, and a retry after a lost answer still answers like the first call."""
    gate, live = gateway
    with _client(gate, live) as client:
        client.pools.create(POOL)
        client.policies.create(POLICY)
        held = client.requests.create(REQUEST)
        assert held.status is Status.ALLOCATED
        gate.plan = ["lose:502"]
        assert client.requests.renew(held.id, 60).status is Status.ALLOCATED
        assert client.requests.renew(held.id, 60, idempotency_key="beat-1").id == held.id
        gate.plan = ["lose:504"]  # released by the first attempt; the retry finds it released
        assert client.requests.release(held.id).status is Status.RELEASED
    keys = [(c.path.rsplit("/", 1)[-1], c.key) for c in gate.calls()]
    assert keys[-5:] == [
        ("renew", None),
        ("renew", None),
        ("renew", "beat-1"),
        ("release", None),
        ("release", None),
    ]
    assert all(key for _, key in keys[:3])  # pool, policy and request creation: fresh keys


def test_retries_give_up(gateway: tuple[Gateway, LiveServer]) -> None:
    gate, live = gateway
    gate.plan = ["503"] * 5
    with _client(gate, live, retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(StoreUnavailableError, match="unavailable"):
            client.pools.list()
        assert len(gate.calls()) == 3
        gate.plan = ["500"]
        with pytest.raises(StoreError, match="500 HTTP error"):
            client.pools.list()
        assert len(gate.calls()) == 4  # 500 is not retried


@pytest.mark.parametrize("status", ["502", "504"])
def test_a_gateway_whose_resource_manager_is_down_is_an_outage(
    gateway: tuple[Gateway, LiveServer], status: str
) -> None:
    """Retried like a 503, then ``StoreUnavailableError``: what the engine waits out."""
    gate, live = gateway
    gate.plan = [status] * 5
    with _client(gate, live, retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(StoreUnavailableError, match=f"unavailable: HTTP {status}"):
            client.pools.list()
        assert len(gate.calls()) == 3


@pytest.mark.parametrize("status", ["502", "504"])
def test_a_login_through_a_gateway_whose_resource_manager_is_down_is_an_outage(
    gateway: tuple[Gateway, LiveServer], status: str
) -> None:
    """The client's first call logs in: while every RM replica behind the proxy is down, that
    login is an outage too (the workspace server answers 503 and the engine waits it out), not
    a ``StoreError`` that failed the step being created with a 500."""
    gate, live = gateway
    gate.login_plan = [status] * 3
    with _client(gate, live, retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(StoreUnavailableError, match=f"unavailable: HTTP {status}"):
            client.pools.list()
        assert gate.logins() == 3 and gate.calls() == []
        assert client.pools.list() == []  # the RM is back: the next call logs in and goes on


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ("plain:409:Pool gpus already exists", EntityExistsError),
        ("plain:409:Pool gpus is in use", IllegalOperationError),
        ("plain:400:bad", InputError),
        ("plain:422:bad", InputError),
        ("plain:403:no", PermissionDeniedError),
        ("plain:404:gone", KeyError),
        ("plain:418:teapot", StoreError),
    ],
)
def test_errors_without_a_wharf_type_map_by_status(
    gateway: tuple[Gateway, LiveServer], action: str, error: type[Exception]
) -> None:
    gate, live = gateway
    gate.plan = [action]
    with _client(gate, live) as client, pytest.raises(error, match=action.split(":", 2)[2]):
        client.pools.list()


def test_a_401_logs_in_again_and_retries_once_with_the_same_key(
    gateway: tuple[Gateway, LiveServer],
) -> None:
    gate, live = gateway
    with _client(gate, live) as client:
        client.pools.list()
        gate.plan = ["401"]
        client.pools.create(POOL)
        calls = gate.calls()[1:]
        assert gate.logins() == 2 and len(calls) == 2
        assert calls[0].key == calls[1].key and calls[0].token != calls[1].token
        gate.plan = ["401", "401"]
        with pytest.raises(AuthenticationError):
            client.pools.list()
        assert gate.logins() == 3 and len(gate.calls()) == 5


def test_the_token_is_cached_and_refreshed_five_minutes_before_expiry(
    gateway: tuple[Gateway, LiveServer],
) -> None:
    gate, live = gateway
    clock = Clock()
    with _client(gate, live, clock=clock) as client:  # tokens live 3600 s
        for _ in range(3):
            client.pools.list()
        assert gate.logins() == 1
        clock.now += 3600 - 300 - 1
        client.pools.list()
        assert gate.logins() == 1
        clock.now += 2
        client.pools.list()
        assert gate.logins() == 2
    assert all(c.token for c in gate.calls())


def test_each_calling_thread_keeps_its_own_connection(
    gateway: tuple[Gateway, LiveServer],
) -> None:
    """Four threads, five calls each, all at once: every thread's calls go over one kept-alive
    connection of its own (no thread waits for another's, none is closed after an answer)."""
    gate, live = gateway
    client = _client(gate, live)
    client.pools.list()  # logs in first, so the threads' calls are the only ones below
    start = threading.Barrier(4)

    def calls(index: int) -> None:
        start.wait()
        for _ in range(5):
            with pytest.raises(EntityNotFoundError):
                client.pools.get(f"pool-of-thread-{index}")

    threads = [threading.Thread(target=calls, args=(i,)) for i in range(4)]
    with client:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(gate.calls()) == 21
    peers: dict[str, set[int]] = {}
    for seen in gate.calls()[1:]:
        peers.setdefault(seen.path, set()).add(seen.peer)
    assert len(peers) == 4
    if gate.wire == "httpcore":
        assert all(len(ports) == 1 for ports in peers.values())
        assert len(set().union(*peers.values())) == 4


def test_a_connection_the_server_closed_is_replaced(gateway: tuple[Gateway, LiveServer]) -> None:
    gate, live = gateway
    with _client(gate, live) as client:
        client.pools.list()
        gate.plan = ["forward", "close", "forward", "forward"]
        for _ in range(4):
            assert client.pools.list() == []
    peers = [seen.peer for seen in gate.calls()]
    assert len(peers) == 5 and client.sleeps == []  # type: ignore[attr-defined]
    assert peers[1] == peers[2] != peers[3] == peers[4]  # a new one after the close, kept


def test_a_closed_fast_wire_sends_nothing_from_any_thread(server: LiveServer) -> None:
    client = HttpResourceManager(server.url, api_key=ADMIN_KEY)
    assert isinstance(client._transport._wire, CoreWire)
    client.pools.list()
    client.close()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client.pools.list()
        except StoreUnavailableError as exc:
            errors.append(exc)

    call()  # this thread had a connection
    other = threading.Thread(target=call)  # this one had none yet
    other.start()
    other.join()
    closed = (
        f"The Resource Manager at {server.url} is unreachable: ClosedError: the client is closed"
    )
    assert [str(e) for e in errors] == [closed, closed]


def test_an_unreachable_server() -> None:
    port = free_socket().getsockname()[1]  # closed again at once: nothing listens there
    sleeps: list[float] = []
    client = HttpResourceManager(
        f"http://127.0.0.1:{port}",
        api_key=ADMIN_KEY,
        retry=RetryPolicy(attempts=4, backoff_seconds=0.1),
        sleep=sleeps.append,
    )
    with client, pytest.raises(StoreUnavailableError, match="unreachable: ConnectError"):
        client.pools.list()
    assert len(sleeps) == 3 and all(0.05 <= s <= 0.8 for s in sleeps)
    assert sleeps[2] > sleeps[0]  # the backoff grows


def test_a_server_that_comes_up_late(sqlite_rm_url: str) -> None:
    probe = free_socket()
    port = probe.getsockname()[1]
    probe.close()
    started: list[LiveServer] = []

    def start_later() -> None:
        time.sleep(0.4)
        started.append(start_rm(sqlite_rm_url, port=port))

    thread = threading.Thread(target=start_later)
    thread.start()
    retry = RetryPolicy(attempts=12, backoff_seconds=0.05, max_backoff_seconds=0.3)
    try:
        with HttpResourceManager(f"http://127.0.0.1:{port}", api_key=ADMIN_KEY, retry=retry) as rm:
            assert rm.pools.list() == []
    finally:
        thread.join()
        for live in started:
            live.stop()


def test_the_fast_wire_steps_aside_for_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """``httpx`` routes through an environment proxy; the ``httpcore`` wire does not, so those
    clients keep ``httpx``. A URL with credentials is refused (``test_http_client``)."""
    for name in ("http", "https", "all"):
        monkeypatch.delenv(f"{name}_proxy", raising=False)
        monkeypatch.delenv(f"{name.upper()}_PROXY", raising=False)

    def wire(url: str) -> object:
        with HttpResourceManager(url, api_key=ADMIN_KEY) as client:
            return type(client._transport._wire)

    assert wire("http://127.0.0.1:9") is CoreWire
    assert wire("https://rm.example:8443/base") is CoreWire
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert wire("http://127.0.0.1:9") is CoreWire
    assert wire("https://rm.example") is HttpxWire
    with pytest.raises(InputError, match="Invalid Resource Manager URL"):
        HttpResourceManager("http://bad host:x", api_key=ADMIN_KEY)
