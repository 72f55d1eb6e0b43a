"""The login throttle: per-account and per-address windows, reset on success, bounded tables.

Time is passed in (``now``), so nothing here sleeps.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wharf.core.login_throttle import LoginLimits, LoginThrottle, Refused

LIMITS = LoginLimits(max_failures_per_account=3, max_failures_per_address=5, window_seconds=60)


def fail(
    throttle: LoginThrottle, n: int, account: str | None, address: str | None, now: float
) -> None:
    for _ in range(n):
        assert throttle.attempt(account, address, now) is None
        throttle.failed(account, address, now)


def test_an_account_is_refused_after_its_limit_until_the_window_closes() -> None:
    throttle = LoginThrottle(LIMITS)
    fail(throttle, 3, "alice", "10.0.0.1", now=100.0)
    assert throttle.attempt("alice", "10.0.0.2", 100.0) == Refused("account", 60)
    assert throttle.attempt("alice", None, 130.5) == Refused("account", 30)
    assert throttle.attempt("alice", None, 159.9) == Refused("account", 1)
    fail(throttle, 1, "bob", "10.0.0.1", now=130.0)  # other accounts are not affected
    fail(throttle, 3, "alice", None, now=160.0)  # the window opened at 100 closed: a fresh one
    assert throttle.attempt("alice", None, 161.0) == Refused("account", 59)


def test_refused_attempts_count_nothing() -> None:
    throttle = LoginThrottle(LIMITS)
    fail(throttle, 3, "alice", "10.0.0.1", now=0.0)
    for _ in range(10):
        assert throttle.attempt("alice", "10.0.0.1", 1.0) == Refused("account", 59)
    fail(throttle, 2, "bob", "10.0.0.1", now=2.0)  # the address saw 5 attempts, not 15
    assert throttle.attempt("carol", "10.0.0.1", 2.0) == Refused("address", 58)


def test_equivalent_spellings_of_an_account_are_one_account() -> None:
    throttle = LoginThrottle(LIMITS)
    fail(throttle, 2, "caf\u00e9", None, now=0.0)
    fail(throttle, 1, "cafe\u0301", None, now=0.0)
    assert throttle.attempt("caf\u00e9", None, 0.0) == Refused("account", 60)


def test_the_window_opens_at_the_first_failure() -> None:
    throttle = LoginThrottle(LIMITS)
    fail(throttle, 2, "alice", None, now=0.0)
    fail(throttle, 1, "alice", None, now=59.0)
    assert throttle.attempt("alice", None, 59.0) == Refused("account", 1)
    assert throttle.attempt("alice", None, 60.0) is None


def test_an_address_is_refused_after_its_limit_whatever_the_account() -> None:
    throttle = LoginThrottle(LIMITS)
    for i in range(5):
        fail(throttle, 1, f"user{i}", "10.0.0.9", now=10.0)
    assert throttle.attempt("someone-else", "10.0.0.9", 20.0) == Refused("address", 50)
    assert throttle.attempt("someone-else", "10.0.0.8", 20.0) is None


def test_the_longer_refusal_is_reported() -> None:
    throttle = LoginThrottle(LIMITS)
    fail(throttle, 3, "alice", None, now=0.0)
    for i in range(5):
        fail(throttle, 1, f"u{i}", "10.0.0.1", now=30.0)
    assert throttle.attempt("alice", "10.0.0.1", 31.0) == Refused("address", 59)


def test_a_success_resets_the_account_and_takes_its_attempt_back_from_the_address() -> None:
    throttle = LoginThrottle(LIMITS)
    fail(throttle, 2, "alice", "10.0.0.1", now=0.0)
    assert throttle.attempt("alice", "10.0.0.1", 0.0) is None  # the right password
    throttle.succeeded("alice", "10.0.0.1")
    fail(throttle, 3, "alice", None, now=1.0)  # three more allowed: the count restarted
    assert throttle.attempt("alice", None, 2.0) == Refused("account", 59)
    # the address counts the two failures only: three more attempts, then it is refused
    fail(throttle, 3, "bob", "10.0.0.1", now=2.0)
    assert throttle.attempt("carol", "10.0.0.1", 2.0) == Refused("address", 58)


def test_successes_alone_never_lock_an_address() -> None:
    throttle = LoginThrottle(LIMITS)
    for i in range(100):
        assert throttle.attempt(f"user{i % 7}", "10.0.0.1", float(i)) is None
        throttle.succeeded(f"user{i % 7}", "10.0.0.1")


def test_right_passwords_verified_at_once_are_never_refused() -> None:
    """Twelve logins of one account in flight at once (a CI matrix, pods sharing a service
    account) were refused past the tenth: each counted as a failure until it succeeded."""
    throttle = LoginThrottle(LIMITS)
    for _ in range(12):
        assert throttle.attempt("ci", "10.0.0.1", 0.0) is None
    for _ in range(12):
        throttle.succeeded("ci", "10.0.0.1")
    assert throttle.sizes() == (0, 0)


def test_once_a_guess_failed_the_guesses_in_flight_count() -> None:
    throttle = LoginThrottle(LIMITS)
    fail(throttle, 1, "alice", None, now=0.0)
    assert throttle.attempt("alice", None, 0.0) is None
    assert throttle.attempt("alice", None, 0.0) is None  # 1 failed + 2 in flight: the limit
    assert throttle.attempt("alice", None, 0.0) == Refused("account", 1)  # as they end
    throttle.succeeded("alice", None)  # one was right: every failure forgotten
    assert throttle.attempt("alice", None, 0.0) is None
    throttle.failed("alice", None, 0.0)
    throttle.failed("alice", None, 0.0)
    assert throttle.attempt("alice", None, 0.0) is None
    throttle.failed("alice", None, 5.0)  # three failures: the window from the first, at 0
    assert throttle.attempt("alice", None, 5.0) == Refused("account", 55)


def test_an_attempt_that_could_not_be_verified_counts_nothing() -> None:
    throttle = LoginThrottle(LIMITS)
    for _ in range(10):
        assert throttle.attempt("alice", "10.0.0.1", 0.0) is None
        throttle.abandoned("alice", "10.0.0.1")
    assert throttle.sizes() == (0, 0)


@pytest.mark.parametrize("max_entries", [1, 4, 100])
def test_tables_are_bounded(max_entries: int) -> None:
    limits = LIMITS.model_copy(update={"max_entries": max_entries})
    throttle = LoginThrottle(limits)
    for i in range(1000):
        now = float(i) / 100
        account, address = f"user-{i}" * 50, f"10.0.{i // 256}.{i % 256}"
        throttle.attempt(account, address, now)
        throttle.failed(account, address, now)
    accounts, addresses = throttle.sizes()
    assert accounts == max_entries and addresses == max_entries


def test_when_full_closed_windows_go_first_then_the_least_recently_failed() -> None:
    limits = LIMITS.model_copy(update={"max_entries": 2})
    throttle = LoginThrottle(limits)
    fail(throttle, 2, "locked", None, now=0.0)
    fail(throttle, 1, "old", None, now=1.0)
    fail(throttle, 1, "locked", None, now=2.0)  # its latest failure is now the most recent
    fail(throttle, 1, "new", None, now=30.0)  # evicts "old", the least recently failed
    assert throttle.attempt("locked", None, 30.0) == Refused("account", 30)
    fail(throttle, 1, "old", None, now=31.0)  # starts afresh; evicts "locked" (LRU now)
    fail(throttle, 1, "new", None, now=32.0)
    fail(throttle, 1, "later", None, now=90.5)  # "new"'s window closed: dropped, not "old"
    assert throttle.sizes()[0] == 2
    assert throttle.attempt("new", None, 90.5) is None


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LoginLimits(max_failures_per_account=0)
    with pytest.raises(ValueError):
        LoginLimits(window_seconds=0)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("begin"), st.sampled_from(["alice", "bob"])),
        st.tuples(st.sampled_from(["right", "wrong", "unverified"]), st.integers(0, 20)),
        st.tuples(st.just("wait"), st.floats(0, 40)),
    ),
    max_size=80,
)


@given(OPS)
def test_a_limit_holds_whatever_the_order_of_logins(ops: list[tuple[str, object]]) -> None:
    """Any interleaving of attempts (begun, then ended right, wrong or unverified) and time:
    an account with no failure in its window is never refused for it; one whose window
    holds ``limit`` failures is refused until that window closes; and while a failure is
    known, no more attempts are verified at once than the limit leaves room for."""
    throttle = LoginThrottle(LIMITS)
    limit, window = LIMITS.max_failures_per_account, LIMITS.window_seconds
    now = 0.0
    in_flight: list[str] = []
    failures: dict[str, list[float]] = {"alice": [], "bob": []}  # the open window's failures
    for op, arg in ops:
        for name, times in failures.items():
            if times and now >= times[0] + window:
                failures[name] = []
        if op == "wait":
            assert isinstance(arg, float)
            now += arg
        elif op == "begin":
            assert isinstance(arg, str)
            refused = throttle.attempt(arg, None, now)
            known = len(failures[arg])
            if known == 0:
                assert refused is None
            elif known >= limit:
                assert refused is not None and refused.retry_after >= 1
            elif known + in_flight.count(arg) >= limit:
                assert refused == Refused("account", 1)
            if refused is None:
                in_flight.append(arg)
        elif in_flight:
            assert isinstance(arg, int)
            name = in_flight.pop(arg % len(in_flight))
            if op == "right":
                throttle.succeeded(name, None)
                failures[name] = []
            elif op == "wrong":
                throttle.failed(name, None, now)
                failures[name].append(now)
            else:
                throttle.abandoned(name, None)
