"""The wait room of :mod:`wharf.execution.resources.wait_room` against the real, in-process Resource
Manager: its announcements wake waiters without a ``list`` call, a client that announces
nothing costs one, a waiting launcher takes the slot a release freed, and the watch lists only
when another process may have moved a request out of the queue.

No test sleeps: waits return once their outcome is decided, and threads are sequenced with
events and semaphores.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from uuid import UUID

import pytest

from tests.conftest import FakeClock
from tests.execution.resources.test_wait_room import SAFETY_TIMEOUT
from wharf.core.enums import ResourceRequestStatus as S
from wharf.execution.resources.embedded import LazyResourceManager
from wharf.resource_manager.contract.models import (
    DemandSpec,
    RequestFilter,
    ResourceRequestCreate,
)
from wharf.resource_manager.domain import SubjectChain, SubjectNode, SubjectType
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service import Principal
from wharf.sdk.pools import ensure_pool


@pytest.fixture
def embedded_rm(tmp_path: Path) -> InProcessResourceManager:
    client = InProcessResourceManager.open(
        f"sqlite:///{tmp_path / 'rm.db'}", Principal(name="alice", admin=True), clock=FakeClock()
    )
    ensure_pool(client, "licenses", {"license": 1}, account="alice")
    yield client  # type: ignore[misc]
    client.close()


def license_request() -> ResourceRequestCreate:
    """Alice asks for one licence (the pools of these tests hold one)."""
    account = SubjectNode(subject_type=SubjectType.ACCOUNT, subject_id="alice")
    return ResourceRequestCreate(
        subjects=(SubjectChain(nodes=(account,)),),
        demands=(DemandSpec(resource="license", quantity=1),),
        lease_seconds=600,
    )


def _ask(client: InProcessResourceManager) -> UUID:
    return client.requests.create(license_request()).id


class _Counted:
    """A client's ``list`` calls and marker reads, counted (the watch's work, seen from outside)."""

    def __init__(self, client: InProcessResourceManager) -> None:
        self.listed: list[RequestFilter | None] = []
        self.first_list = threading.Event()
        self.reads = threading.Semaphore(0)
        real_list, real_marker = client.requests.list, client.requests.unannounced_marker

        def counting_list(query=None, page=None):  # type: ignore[no-untyped-def]
            self.listed.append(query)
            self.first_list.set()
            return real_list(query, page)

        def counting_marker() -> object:
            self.reads.release()
            return real_marker()

        client.requests.list = counting_list  # type: ignore[method-assign]
        client.requests.unannounced_marker = counting_marker  # type: ignore[method-assign]


def test_an_embedded_release_wakes_the_next_waiter_without_a_list_call(
    embedded_rm: InProcessResourceManager,
) -> None:
    """The in-process RM tells the room which requests its commit allocated: the waiter is
    woken before the release returns, and nobody asks the RM."""
    requests = LazyResourceManager(lambda: embedded_rm, watch_seconds=None)
    holder, first, second = (_ask(embedded_rm) for _ in range(3))
    assert requests.get(holder).status is S.ALLOCATED
    listed: list[RequestFilter | None] = []
    real_list = embedded_rm.requests.list

    def counting_list(query=None, page=None):  # type: ignore[no-untyped-def]
        listed.append(query)
        return real_list(query, page)

    embedded_rm.requests.list = counting_list  # type: ignore[method-assign]
    with requests.wait_room.enter(first) as t1, requests.wait_room.enter(second) as t2:
        requests.release(holder)
        woken = t1.wait(0)
        assert woken is not None and woken.id == first and woken.status is S.ALLOCATED
        assert t2.wait(0) is None
    assert listed == []


def test_a_release_through_a_client_that_announces_nothing_costs_one_list_call(
    embedded_rm: InProcessResourceManager,
) -> None:
    class Quiet:
        """The embedded RM's requests without the announcements (as an HTTP client is)."""

        def __init__(self) -> None:
            self.listed: list[RequestFilter | None] = []

        def __getattr__(self, name: str) -> object:
            if name == "on_left_queue":
                raise AttributeError(name)
            return getattr(embedded_rm.requests, name)

        def list(self, query=None, page=None):  # type: ignore[no-untyped-def]
            self.listed.append(query)
            return embedded_rm.requests.list(query, page)

    quiet = Quiet()
    rm = SimpleNamespace(requests=quiet)  # no announcements, as an HTTP client
    requests = LazyResourceManager(lambda: rm, watch_seconds=None)  # type: ignore[arg-type,return-value]
    holder, first, second = (_ask(embedded_rm) for _ in range(3))
    with requests.wait_room.enter(first) as t1, requests.wait_room.enter(second) as t2:
        requests.release(holder)
        woken = t1.wait(SAFETY_TIMEOUT)
        assert woken is not None and woken.id == first and woken.status is S.ALLOCATED
        assert t2.wait(0) is None
    assert len(quiet.listed) == 1 and quiet.listed[0] is not None
    assert set(quiet.listed[0].ids or ()) == {first, second}


def test_a_waiting_launcher_takes_the_slot_a_release_freed(
    embedded_rm: InProcessResourceManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's waiter in the room of a real embedded RM: a release of this process
    allocates its request and wakes it long before its first poll would."""
    from datetime import UTC, datetime

    from wharf.config.settings import ResourceSettings
    from wharf.execution import allocation
    from wharf.execution.allocation import AllocationWaiter

    monkeypatch.setattr(allocation, "INITIAL_POLL_SECONDS", SAFETY_TIMEOUT)

    requests = LazyResourceManager(lambda: embedded_rm, watch_seconds=None)
    holder, queued = _ask(embedded_rm), _ask(embedded_rm)
    polls: list[S] = []

    def no_sleep(seconds: float) -> None:
        raise AssertionError("a waiter with a room waits in the room")

    waiter = AllocationWaiter(
        requests,
        lambda: datetime.now(UTC),
        no_sleep,
        jitter=lambda: 0.999999,  # a second poll only after the safety timeout ...
        room=requests.wait_room,
    )
    real_renew = requests.renew
    polled = threading.Event()

    def renew(request_id, lease_seconds, runtime_state=None, **kw):  # type: ignore[no-untyped-def]
        renewed = real_renew(request_id, lease_seconds, runtime_state, **kw)
        polls.append(renewed.status)
        polled.set()
        return renewed

    requests.renew = renew  # type: ignore[method-assign]
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(waiter.wait(queued, ResourceSettings())))
    thread.start()
    assert polled.wait(SAFETY_TIMEOUT)  # its first poll found it pending, in the room
    requests.release(holder)  # ... but this release hands it the licence now
    thread.join(SAFETY_TIMEOUT)
    assert [getattr(r, "status", None) for r in got] == [S.ALLOCATED]
    assert polls == [S.PENDING]  # woken by the room, not by a second poll


def test_a_request_created_allocated_is_taken_without_a_poll(
    embedded_rm: InProcessResourceManager,
) -> None:
    """The room remembers what the creation answered: the waiter needs no renewal at all."""
    from datetime import UTC, datetime

    from wharf.config.settings import ResourceSettings
    from wharf.execution.allocation import AllocationWaiter

    requests = LazyResourceManager(lambda: embedded_rm, watch_seconds=None)
    created = requests.create(license_request())
    assert created.status is S.ALLOCATED
    renewals: list[object] = []

    def renew(*args: object, **kwargs: object) -> None:
        renewals.append(args)
        raise AssertionError("no poll: the room knew")

    requests.renew = renew  # type: ignore[assignment,method-assign]

    def no_sleep(seconds: float) -> None:
        raise AssertionError("nothing to wait for")

    waiter = AllocationWaiter(
        requests, lambda: datetime.now(UTC), no_sleep, room=requests.wait_room
    )
    assert waiter.wait(created.id, ResourceSettings()).status is S.ALLOCATED
    assert renewals == []


def test_the_room_knows_the_first_lease_of_a_request_this_process_created_pending(
    embedded_rm: InProcessResourceManager,
) -> None:
    requests = LazyResourceManager(lambda: embedded_rm, watch_seconds=None)
    requests.create(license_request())  # takes the only licence
    queued = requests.create(license_request())
    assert queued.status is S.PENDING
    with requests.wait_room.enter(queued.id) as ticket:
        left = ticket.lease_left()
        assert left is not None and 590 < left <= 600
    with requests.wait_room.enter(queued.id) as again:
        assert again.lease_left() is None  # told once: a later waiter renews as usual
    with requests.wait_room.enter(uuid.uuid4()) as unknown:
        assert unknown.lease_left() is None


def test_an_embedded_watch_lists_only_after_another_process_wrote(tmp_path: Path) -> None:
    """Two services on one SQLite file, as two processes: the watch of the first lists once,
    then nothing while only its own (announced) commits happen, and wakes its waiter when the
    second releases the licence."""
    url = f"sqlite:///{tmp_path / 'rm.db'}"
    alice = Principal(name="alice", admin=True)
    here = InProcessResourceManager.open(url, alice)
    there = InProcessResourceManager.open(url, alice)
    try:
        ensure_pool(here, "licenses", {"license": 1}, account="alice")
        counted = _Counted(here)
        requests = LazyResourceManager(lambda: here, watch_seconds=0.001)
        holder = _ask(there)
        waiting = requests.create(license_request()).id  # this process's commit: announced
        with requests.wait_room.enter(waiting) as ticket:
            assert counted.first_list.wait(SAFETY_TIMEOUT)  # the first tick lists
            for _ in range(20):  # twenty more ticks, nothing changed elsewhere
                assert counted.reads.acquire(timeout=SAFETY_TIMEOUT)
            assert len(counted.listed) == 1
            there.requests.release(holder)  # another process frees the licence
            woken = ticket.wait(SAFETY_TIMEOUT)
            assert woken is not None and woken.status is S.ALLOCATED
        assert len(counted.listed) == 2
    finally:
        here.close()
        there.close()


def test_an_embedded_watch_does_not_list_while_its_own_process_commits(tmp_path: Path) -> None:
    """The marker must not take a commit of this process for another writer's, even when it
    reads the stored state while that commit is being adopted: with a thread committing all
    along, two hundred ticks of the watch list once (the first tick) and never again."""
    url = f"sqlite:///{tmp_path / 'rm.db'}"
    here = InProcessResourceManager.open(url, Principal(name="alice", admin=True))
    try:
        ensure_pool(here, "licenses", {"license": 1}, account="alice")
        counted = _Counted(here)
        requests = LazyResourceManager(lambda: here, watch_seconds=0.0005)
        _ask(here)  # holds the only licence: what the busy thread asks for queues
        stop = threading.Event()
        commits = 0

        def busy() -> None:
            nonlocal commits
            while not stop.is_set():
                here.requests.cancel(_ask(here))
                commits += 2

        waiting = requests.create(license_request()).id
        with requests.wait_room.enter(waiting):
            thread = threading.Thread(target=busy)
            thread.start()
            try:
                for _ in range(200):
                    assert counted.reads.acquire(timeout=SAFETY_TIMEOUT)
            finally:
                stop.set()
                thread.join(SAFETY_TIMEOUT)
        assert commits > 20 and len(counted.listed) == 1
    finally:
        here.close()
