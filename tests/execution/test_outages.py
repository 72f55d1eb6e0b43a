"""Riding out a short outage (:mod:`wharf.execution.outages`): transient errors are retried with
backoff until the patience runs out, anything else (a refused credential above all) is raised at
once (fake clock, no sleeps)."""

from __future__ import annotations

import pytest

from tests.execution.clocks import Clock
from wharf.core.errors import (
    CredentialsRefusedError,
    IllegalTransitionError,
    PermissionDeniedError,
    StoreError,
    StoreUnavailableError,
)
from wharf.execution.outages import MAX_DELAY_SECONDS, refused, retry_through_outage, transient


class Flaky:
    """Fails with ``errors`` (first to last), then answers ``"ok"``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def retried(call: Flaky, clock: Clock, patience: float = 30.0) -> str:
    return retry_through_outage(
        call, what="test", patience=patience, clock=clock, sleep=clock.sleep
    )


def test_only_an_unreachable_service_is_transient() -> None:
    assert transient(StoreUnavailableError("503"))
    assert not transient(StoreError("500"))
    assert not transient(IllegalTransitionError("ended"))


def test_a_short_outage_is_retried_with_backoff() -> None:
    clock = Clock()
    call = Flaky(*[StoreUnavailableError("down")] * 7)
    assert retried(call, clock) == "ok"
    assert call.calls == 8
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 4.0, MAX_DELAY_SECONDS, MAX_DELAY_SECONDS]


def test_an_outage_longer_than_the_patience_raises_its_error() -> None:
    clock = Clock()
    call = Flaky(*[StoreUnavailableError("down")] * 100)
    with pytest.raises(StoreUnavailableError):
        retried(call, clock, patience=12.0)
    assert sum(clock.sleeps) == pytest.approx(12.0)


def test_other_errors_are_raised_at_once() -> None:
    clock = Clock()
    call = Flaky(IllegalTransitionError("ended"))
    with pytest.raises(IllegalTransitionError):
        retried(call, clock)
    assert call.calls == 1 and clock.sleeps == []


@pytest.mark.parametrize(
    "error",
    [CredentialsRefusedError("The API key has been revoked."), PermissionDeniedError("No.")],
)
def test_a_refused_credential_is_never_waited_out(error: CredentialsRefusedError) -> None:
    assert refused(error) and not transient(error)
    clock = Clock()
    call = Flaky(error)
    with pytest.raises(type(error)):
        retried(call, clock)
    assert call.calls == 1 and clock.sleeps == []


def test_only_a_refused_credential_is_refused() -> None:
    assert not refused(StoreUnavailableError("503"))
    assert not refused(StoreError("500"))
    assert not refused(IllegalTransitionError("ended"))
