"""Cache hits that must not happen (a result of other inputs or code) and hits that must."""

from __future__ import annotations

from tests.e2e.conftest import FakeClock
from tests.e2e.test_caching import status_map
from wharf import CachePolicy, pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace


def test_an_int_dict_key_is_not_its_string(workspace: Workspace) -> None:
    @step
    def describe(d: dict) -> str:
        return repr(d)

    @pipeline
    def p(which: int) -> None:
        describe(d=[{1: "x"}, {"1": "x"}, {1: "a", "b": 2}][which])

    assert status_map(workspace, p.run_in(workspace, which=0).id) == {
        "describe": ExecutionStatus.COMPLETED
    }
    # the step, given {"1": "x"}, computes something else than with {1: "x"}
    assert status_map(workspace, p.run_in(workspace, which=1).id) == {
        "describe": ExecutionStatus.COMPLETED
    }
    # keys of mixed types were an internal error of the cache key
    for _ in range(2):
        run = p.run_in(workspace, which=2)
    assert status_map(workspace, run.id) == {"describe": ExecutionStatus.CACHED}


def test_expiry_counts_from_the_result_not_the_start(
    workspace: Workspace, clock: FakeClock
) -> None:
    @step(cache_policy=CachePolicy(expires_after=60))
    def slow() -> int:
        clock.advance(100)  # runs longer than its results live
        return 1

    @pipeline
    def p() -> None:
        slow()

    p.run_in(workspace)
    clock.advance(30)
    assert status_map(workspace, p.run_in(workspace).id) == {"slow": ExecutionStatus.CACHED}
    clock.advance(31)
    assert status_map(workspace, p.run_in(workspace).id) == {"slow": ExecutionStatus.COMPLETED}
