import pytest
from hypothesis import given
from hypothesis import strategies as st

from wharf.core.enums import FINISHED_STATUSES
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import IllegalTransitionError
from wharf.core.transitions import (
    FORCE_STOPPED_ON_REQUEST,
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    STOPPED_ON_REQUEST,
    check_run_initial,
    check_run_transition,
    check_step_initial,
    check_step_transition,
    run_end,
)


def test_tables_are_total():
    assert set(RUN_TRANSITIONS) == set(S)
    assert set(STEP_TRANSITIONS) == set(S)


@given(st.sampled_from(sorted(FINISHED_STATUSES)), st.sampled_from(list(S)))
def test_finished_statuses_are_final(finished, new):
    for check in (check_run_transition, check_step_transition):
        if new == finished:
            check(finished, new)
        else:
            with pytest.raises(IllegalTransitionError):
                check(finished, new)


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (S.INITIALIZING, S.RUNNING),
        (S.RUNNING, S.STOPPING),
        (S.STOPPING, S.STOPPED),
        (S.RUNNING, S.COMPLETED),
        (S.PROVISIONING, S.RUNNING),
    ],
)
def test_legal_run_transitions(current, new):
    check_run_transition(current, new)


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (S.RUNNING, S.INITIALIZING),
        (S.STOPPING, S.COMPLETED),
        (S.STOPPING, S.RUNNING),
        (S.RUNNING, S.CACHED),
        (S.RUNNING, S.RETRYING),
    ],
)
def test_illegal_run_transitions(current, new):
    with pytest.raises(IllegalTransitionError, match=f"{current.value} -> {new.value}"):
        check_run_transition(current, new)


def test_step_retrying_is_reached_from_running_and_ends_only_when_its_retry_never_starts():
    check_step_transition(S.RUNNING, S.RETRYING)
    # Its run stopped or was lost before the retry started: the attempt ends failed or stopped.
    check_step_transition(S.RETRYING, S.FAILED)
    check_step_transition(S.RETRYING, S.STOPPED)
    for new in (S.RUNNING, S.COMPLETED, S.QUEUED, S.STOPPING, S.CANCELLED):
        with pytest.raises(IllegalTransitionError):
            check_step_transition(S.RETRYING, new)


def test_initial_statuses():
    check_run_initial(S.INITIALIZING)
    check_step_initial(S.CACHED)
    with pytest.raises(IllegalTransitionError):
        check_run_initial(S.COMPLETED)
    with pytest.raises(IllegalTransitionError):
        check_step_initial(S.COMPLETED)


def test_placeholder_statuses():
    assert {s for s in S if s.is_placeholder} == {S.INITIALIZING, S.PROVISIONING}


@pytest.mark.parametrize("current", [S.INITIALIZING, S.QUEUED, S.RUNNING])
@pytest.mark.parametrize("wanted", [S.COMPLETED, S.FAILED, S.STOPPED])
def test_run_end_is_the_wish_of_an_unstopped_run(current, wanted):
    assert run_end(current, wanted, "why") == (wanted, "why")
    check_run_transition(current, wanted)  # always a legal move


@pytest.mark.parametrize("wanted", [S.COMPLETED, S.STOPPED])
def test_run_end_of_a_stopping_run_is_stopped(wanted):
    assert run_end(S.STOPPING, wanted, None) == (S.STOPPED, STOPPED_ON_REQUEST)


@pytest.mark.parametrize("wanted", [S.COMPLETED, S.STOPPED])
def test_run_end_of_a_run_whose_stop_was_forced_says_so(wanted):
    assert run_end(S.STOPPING, wanted, None, forced=True) == (S.STOPPED, FORCE_STOPPED_ON_REQUEST)


def test_run_end_keeps_a_failure_of_a_stopping_run():
    assert run_end(S.STOPPING, S.FAILED, "boom") == (S.FAILED, "boom")
    assert run_end(S.STOPPING, S.FAILED, "boom", forced=True) == (S.FAILED, "boom")


@pytest.mark.parametrize("current", [S.COMPLETED, S.FAILED, S.STOPPED])
def test_run_end_leaves_a_finished_run_alone(current):
    assert run_end(current, S.COMPLETED, None) is None
    assert run_end(current, S.FAILED, "late") is None
