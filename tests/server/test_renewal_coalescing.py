# ruff: noqa: F811  (fixtures imported from resource_world)
"""The workspace server coalesces its steps' lease renewals into bulk renewals.

Unit part: :class:`RenewalCoalescer` with fake senders — a lone caller sends a single renewal
at once; callers arriving while a call is in flight go together in the next (bulk) call; each
gets its own answer or raises its own error; a failure of the whole call reaches each of its
callers; nobody is left waiting. Team part: concurrent heartbeats through the real workspace
server and RM over HTTP end up in one bulk call, and renew every lease.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
)
from wharf.core.enums import ExecutionStatus, ResourceRequestRuntimeState
from wharf.core.errors import (
    EntityNotFoundError,
    InputError,
    StoreError,
    StoreUnavailableError,
    WharfError,
)
from wharf.resource_manager.contract import PermissionDeniedError
from wharf.resource_manager.contract.models import RenewalItem
from wharf.server.resource_manager import RenewalCoalescer
from wharf.store.models import StepRunUpdate


def _item(n: int) -> RenewalItem:
    return RenewalItem(id=uuid.UUID(int=n), lease_seconds=60)


class Fake:
    """Senders that record their calls; the first call waits for ``gate`` when ``hold``."""

    def __init__(self, hold: bool = False) -> None:
        self.calls: list[tuple[str, list[int]]] = []
        self.gate = threading.Event()
        self.hold = hold
        self.bulk_answer: Callable[[RenewalItem], Any] = lambda item: f"renewed {item.id.int}"
        self.bulk_error: BaseException | None = None

    def single(self, item: RenewalItem) -> Any:
        self.calls.append(("single", [item.id.int]))
        if self.hold and len(self.calls) == 1:
            assert self.gate.wait(10)
        return f"renewed {item.id.int}"

    def bulk(self, items: Sequence[RenewalItem]) -> list[Any]:
        self.calls.append(("bulk", [item.id.int for item in items]))
        if self.bulk_error is not None:
            raise self.bulk_error
        return [self.bulk_answer(item) for item in items]


def _outcome(coalescer: RenewalCoalescer, n: int) -> Any:
    try:
        return coalescer.renew(_item(n))
    except BaseException as error:
        return error


def _while_first_is_held(
    fake: Fake, coalescer: RenewalCoalescer, others: Sequence[int]
) -> list[Any]:
    """Renew 1 (held in flight) and then ``others`` while it is: every outcome, in order."""
    with ThreadPoolExecutor(len(others) + 1) as pool:
        first = pool.submit(_outcome, coalescer, 1)
        while not fake.calls:
            time.sleep(0.001)
        rest = []
        for n in others:
            rest.append(pool.submit(_outcome, coalescer, n))
            deadline = time.monotonic() + 5
            while len(coalescer._queue) < len(rest) and time.monotonic() < deadline:
                time.sleep(0.001)  # queued in this order
        fake.gate.set()
        return [first.result(10)] + [future.result(10) for future in rest]


def test_a_lone_caller_sends_a_single_renewal_at_once() -> None:
    fake = Fake()
    coalescer = RenewalCoalescer(fake.single, fake.bulk)
    assert coalescer.renew(_item(1)) == "renewed 1"
    assert coalescer.renew(_item(2)) == "renewed 2"
    assert fake.calls == [("single", [1]), ("single", [2])]


def test_callers_arriving_during_a_call_share_the_next_one() -> None:
    fake = Fake(hold=True)
    coalescer = RenewalCoalescer(fake.single, fake.bulk)
    outcomes = _while_first_is_held(fake, coalescer, [2, 3, 4])
    assert outcomes == ["renewed 1", "renewed 2", "renewed 3", "renewed 4"]
    assert fake.calls == [("single", [1]), ("bulk", [2, 3, 4])]
    assert coalescer.renew(_item(5)) == "renewed 5"  # the role was given up: nobody is stuck
    assert fake.calls[-1] == ("single", [5])


def test_each_caller_gets_its_own_error() -> None:
    fake = Fake(hold=True)
    errors: dict[int, WharfError] = {
        3: EntityNotFoundError("Resource request 3 not found."),
        4: PermissionDeniedError("Resource request 4 belongs to another requester."),
    }
    fake.bulk_answer = lambda item: errors.get(item.id.int, f"renewed {item.id.int}")
    coalescer = RenewalCoalescer(fake.single, fake.bulk)
    first, second, missing, foreign = _while_first_is_held(fake, coalescer, [2, 3, 4])
    assert (first, second) == ("renewed 1", "renewed 2")
    assert missing is errors[3] and foreign is errors[4]


def test_a_failed_bulk_call_fails_each_of_its_callers_and_nobody_else() -> None:
    fake = Fake(hold=True)
    fake.bulk_error = StoreUnavailableError("The Resource Manager is unreachable.")
    coalescer = RenewalCoalescer(fake.single, fake.bulk)
    outcomes = _while_first_is_held(fake, coalescer, [2, 3])
    assert outcomes[0] == "renewed 1"
    assert outcomes[1] is outcomes[2] is fake.bulk_error
    fake.bulk_error = None
    assert coalescer.renew(_item(5)) == "renewed 5"  # not stuck


def test_an_rm_without_the_bulk_route_gets_single_renewals() -> None:
    """An RM older than the server answers the bulk path with 405 (a plain StoreError): the
    batch is renewed one by one, each caller still getting its own answer."""
    fake = Fake(hold=True)
    fake.bulk_error = StoreError("405 HTTP error from the Resource Manager: Method Not Allowed")
    coalescer = RenewalCoalescer(fake.single, fake.bulk)
    outcomes = _while_first_is_held(fake, coalescer, [2, 3])
    assert outcomes == ["renewed 1", "renewed 2", "renewed 3"]
    assert fake.calls == [("single", [1]), ("bulk", [2, 3]), ("single", [2]), ("single", [3])]


def test_a_partial_answer_is_an_error_for_every_caller() -> None:
    fake = Fake(hold=True)
    coalescer = RenewalCoalescer(fake.single, lambda items: fake.bulk(items)[:1])
    outcomes = _while_first_is_held(fake, coalescer, [2, 3])
    assert all(isinstance(outcome, WharfError) for outcome in outcomes[1:])


def test_batches_are_bounded_and_the_role_is_handed_on() -> None:
    fake = Fake(hold=True)
    coalescer = RenewalCoalescer(fake.single, fake.bulk, max_batch=2)
    outcomes = _while_first_is_held(fake, coalescer, [2, 3, 4, 5, 6])
    assert outcomes == [f"renewed {n}" for n in range(1, 7)]
    assert fake.calls[0] == ("single", [1])
    sent = [n for _, items in fake.calls[1:] for n in items]
    assert sorted(sent) == [2, 3, 4, 5, 6] and all(len(i) <= 2 for _, i in fake.calls)


def test_many_threads_all_answered() -> None:
    fake = Fake()
    coalescer = RenewalCoalescer(fake.single, fake.bulk, max_batch=7)
    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(lambda n: _outcome(coalescer, n), range(1, 401)))
    assert outcomes == [f"renewed {n}" for n in range(1, 401)]
    assert sorted(n for _, items in fake.calls for n in items) == list(range(1, 401))


# ----------------------------------------------------------------------------- team mode


def test_concurrent_heartbeats_are_one_bulk_renewal(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    rm = team.rm_admin
    assert rm is not None
    run = team.run("member")
    rest = team.rest("member")
    steps = [rest.steps.create(team.queued(run)) for _ in range(2)]
    for step in steps:
        rest.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.RUNNING))
    link = team.world.state.resource_requests
    assert link is not None
    remembering: Any = link.requests
    inner, coalescer = remembering._inner, remembering._renewals
    calls: list[tuple[str, int]] = []
    gate = threading.Event()
    single, bulk = inner.renew, inner.renew_many

    def held_single(*args: Any, **kwargs: Any) -> Any:
        calls.append(("single", 1))
        if len(calls) == 1:
            assert gate.wait(20)
        return single(*args, **kwargs)

    def counted_bulk(items: Sequence[RenewalItem]) -> Any:
        calls.append(("bulk", len(items)))
        return bulk(items)

    monkeypatch.setattr(inner, "renew", held_single)
    monkeypatch.setattr(inner, "renew_many", counted_bulk)
    before = {step.id: rm.requests.get(step.resource_request_id) for step in steps}  # type: ignore[arg-type]

    beats = [steps[0], steps[1], steps[0], steps[1]]
    with ThreadPoolExecutor(len(beats)) as pool:
        futures = [pool.submit(rest.steps.update_heartbeat, beats[0].id, 600)]
        while not calls:
            time.sleep(0.005)
        futures += [pool.submit(rest.steps.update_heartbeat, s.id, 600) for s in beats[1:]]
        deadline = time.monotonic() + 20
        while len(coalescer._queue) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        gate.set()
        answers = [future.result(30) for future in futures]
    assert [a.status for a in answers] == [ExecutionStatus.RUNNING] * 4
    assert calls == [("single", 1), ("bulk", 3)]
    for step in steps:
        assert step.resource_request_id is not None
        renewed = rm.requests.get(step.resource_request_id)
        assert renewed.runtime_state is ResourceRequestRuntimeState.RUNNING
        previous = before[step.id].lease_expires_at
        assert renewed.lease_expires_at is not None and previous is not None
        assert renewed.lease_expires_at > previous


def test_a_coalesced_renewal_of_a_released_request_cancels_only_its_step(team: Team) -> None:
    rm = team.rm_admin
    assert rm is not None
    run = team.run("member")
    rest = team.rest("member")
    kept, lost = (rest.steps.create(team.queued(run)) for _ in range(2))
    for step in (kept, lost):
        rest.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.RUNNING))
    assert lost.resource_request_id is not None
    rm.requests.release(lost.resource_request_id)  # e.g. an admin took it back
    with ThreadPoolExecutor(8) as pool:
        beats = list(pool.map(lambda s: rest.steps.update_heartbeat(s.id, 600), [kept, lost] * 4))
    assert {b.status for b in beats[0::2]} == {ExecutionStatus.RUNNING}
    assert {b.status for b in beats[1::2]} == {ExecutionStatus.CANCELLING}
    assert rest.steps.get(lost.id).status is ExecutionStatus.CANCELLING
    assert rest.steps.get(kept.id).status is ExecutionStatus.RUNNING


def test_a_bad_lease_is_the_input_error_a_single_renewal_raises(team: Team) -> None:
    link = team.world.state.resource_requests
    assert link is not None
    with pytest.raises(InputError, match="lease_seconds"):
        link.requests.renew(uuid.uuid4(), 0)
