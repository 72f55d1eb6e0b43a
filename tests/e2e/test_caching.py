"""Caching hits and misses, decided right before each step runs."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.e2e.conftest import FakeClock
from wharf import CachePolicy, RunFailedError, pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunFilter, StepRunRecord

CACHE_FUNC_VALUE = {"value": "a"}


def cache_func() -> str:
    return CACHE_FUNC_VALUE["value"]


def helper_dependency() -> int:
    return 1


def steps_of(workspace: Workspace, run_id) -> dict[str, StepRunRecord]:
    return {s.name: s for s in workspace.store.steps.list(StepRunFilter(run_id=run_id)).items}


def status_map(workspace: Workspace, run_id) -> dict[str, ExecutionStatus]:
    return {n: s.status for n, s in steps_of(workspace, run_id).items()}


@pipeline
def chain(value: int = 1) -> None:
    steps_lib.double(steps_lib.produce(value=value))


def test_second_run_is_fully_cached(workspace: Workspace) -> None:
    first = chain.run_in(workspace)
    second = chain.run_in(workspace)
    assert second.status is ExecutionStatus.COMPLETED
    one, two = steps_of(workspace, first.id), steps_of(workspace, second.id)
    assert {s.status for s in two.values()} == {ExecutionStatus.CACHED}
    for name, cached in two.items():
        assert cached.original_step_run_id == one[name].id
        assert cached.outputs == one[name].outputs
        assert cached.cache_key == one[name].cache_key


def test_parameter_change_misses_and_downstream_follows(workspace: Workspace) -> None:
    chain.run_in(workspace, value=1)
    run = chain.run_in(workspace, value=2)
    assert status_map(workspace, run.id) == {
        "produce": ExecutionStatus.COMPLETED,
        "double": ExecutionStatus.COMPLETED,
    }


def test_same_input_value_from_a_fresh_upstream_hits(workspace: Workspace) -> None:
    @pipeline
    def fresh_upstream() -> None:
        steps_lib.double(steps_lib.produce.with_options(enable_cache=False)())

    fresh_upstream.run_in(workspace)
    run = fresh_upstream.run_in(workspace)
    found = status_map(workspace, run.id)
    assert found["produce"] is ExecutionStatus.COMPLETED  # caching disabled on it
    assert found["double"] is ExecutionStatus.CACHED  # same content hash


def test_code_change_misses(workspace: Workspace) -> None:
    def compute(x: int) -> int:
        return x + 1

    first = step(compute)

    def compute(x: int) -> int:
        return x + 2

    second = step(compute)
    assert first.source == second.source and first.code_hash != second.code_hash

    def make(s):
        @pipeline(name="code_change")
        def p() -> None:
            s(steps_lib.produce())

        return p

    make(first).run_in(workspace)
    run = make(second).run_in(workspace)
    assert status_map(workspace, run.id)["compute"] is ExecutionStatus.COMPLETED
    again = make(second).run_in(workspace)
    assert status_map(workspace, again.id)["compute"] is ExecutionStatus.CACHED


def test_environment_change_misses(workspace: Workspace) -> None:
    def make(env: str):
        @pipeline(name="env_change", environment={"MODE": env})
        def p() -> None:
            steps_lib.produce()

        return p

    make("a").run_in(workspace)
    assert (
        status_map(workspace, make("a").run_in(workspace).id)["produce"] is ExecutionStatus.CACHED
    )
    assert (
        status_map(workspace, make("b").run_in(workspace).id)["produce"]
        is ExecutionStatus.COMPLETED
    )


def test_expiry(workspace: Workspace, clock: FakeClock) -> None:
    @step(cache_policy=CachePolicy(expires_after=60))
    def short_lived() -> int:
        return 1

    @pipeline
    def p() -> None:
        short_lived()

    p.run_in(workspace)
    clock.advance(30)
    assert status_map(workspace, p.run_in(workspace).id)["short_lived"] is ExecutionStatus.CACHED
    clock.advance(31)
    assert status_map(workspace, p.run_in(workspace).id)["short_lived"] is ExecutionStatus.COMPLETED


def test_lookup_happens_right_before_each_step(workspace: Workspace) -> None:
    """The second identical invocation in the same run reuses the first one's result."""

    @pipeline(enable_cache=True)
    def twice() -> None:
        first = steps_lib.produce(value=7)
        steps_lib.produce(value=7, after=first)

    run = twice.run_in(workspace)
    found = steps_of(workspace, run.id)
    assert found["produce"].status is ExecutionStatus.COMPLETED
    assert found["produce_2"].status is ExecutionStatus.CACHED
    assert found["produce_2"].original_step_run_id == found["produce"].id


def test_failed_runs_never_qualify(workspace: Workspace) -> None:
    @step
    def sometimes(fail: bool = False) -> int:
        if fail:
            raise RuntimeError("no")
        return 1

    # same cache key both times: the parameter is ignored by the policy
    @pipeline(cache_policy=CachePolicy(include_step_parameters=False))
    def p(fail: bool) -> None:
        sometimes.with_options(cache_policy=CachePolicy(include_step_parameters=False))(fail=fail)

    with pytest.raises(RunFailedError):
        p.run_in(workspace, fail=True)
    run = p.run_in(workspace, fail=False)
    assert status_map(workspace, run.id)["sometimes"] is ExecutionStatus.COMPLETED


def test_step_setting_beats_pipeline_setting(workspace: Workspace) -> None:
    @step(enable_cache=True)
    def keen() -> int:
        return 1

    @step
    def default() -> int:
        return 1

    @pipeline(enable_cache=False)
    def p() -> None:
        keen()
        default()

    p.run_in(workspace)
    found = status_map(workspace, p.run_in(workspace).id)
    assert found == {"keen": ExecutionStatus.CACHED, "default": ExecutionStatus.COMPLETED}


def test_caching_is_on_by_default_and_can_be_disabled(workspace: Workspace) -> None:
    @step(enable_cache=False)
    def never() -> int:
        return 1

    @pipeline
    def p() -> None:
        never()
        steps_lib.produce()

    p.run_in(workspace)
    assert status_map(workspace, p.run_in(workspace).id) == {
        "never": ExecutionStatus.COMPLETED,
        "produce": ExecutionStatus.CACHED,
    }


def _policy_run(
    workspace: Workspace, policy: CachePolicy, value: int, name: str
) -> ExecutionStatus:
    @step(name="consumer", cache_policy=policy)
    def consumer(x: int, y: int = 0) -> int:
        return x + y

    @pipeline(name=name)
    def p() -> None:
        consumer(steps_lib.produce.with_options(enable_cache=False)(value=value))

    return status_map(workspace, p.run_in(workspace).id)["consumer"]


@pytest.mark.parametrize(
    ("policy", "second_value", "expected"),
    [
        (CachePolicy(), 1, ExecutionStatus.CACHED),
        (CachePolicy(), 2, ExecutionStatus.COMPLETED),
        (CachePolicy(include_artifact_values=False), 1, ExecutionStatus.COMPLETED),
        (
            CachePolicy(include_artifact_values=False, include_artifact_ids=False),
            2,
            ExecutionStatus.CACHED,
        ),
        (CachePolicy(ignored_inputs=("x",)), 2, ExecutionStatus.CACHED),
    ],
)
def test_artifact_policy_switches(workspace, policy, second_value, expected) -> None:
    _policy_run(workspace, policy, 1, "artifact_policy")
    assert _policy_run(workspace, policy, second_value, "artifact_policy") is expected


def test_include_step_code_false(workspace: Workspace) -> None:
    def compute() -> int:
        return 1

    first = step(compute, cache_policy=CachePolicy(include_step_code=False))

    def compute() -> int:
        return 2

    second = step(compute, cache_policy=CachePolicy(include_step_code=False))

    def make(s):
        @pipeline(name="code_excluded")
        def p() -> None:
            s()

        return p

    for s, expected in ((first, ExecutionStatus.COMPLETED), (second, ExecutionStatus.CACHED)):
        assert status_map(workspace, make(s).run_in(workspace).id)["compute"] is expected


def test_include_step_parameters_false(workspace: Workspace) -> None:
    @step(cache_policy=CachePolicy(include_step_parameters=False))
    def param(v: int) -> int:
        return v

    @pipeline
    def p(v: int) -> None:
        param(v=v)

    p.run_in(workspace, v=1)
    assert status_map(workspace, p.run_in(workspace, v=2).id)["param"] is ExecutionStatus.CACHED


def test_file_dependencies(workspace: Workspace, tmp_path: Path) -> None:
    data = tmp_path / "data.txt"  # tmp_path is the working directory (the source root)
    data.write_text("one")

    @step(cache_policy=CachePolicy(file_dependencies=("data.txt",)))
    def reads() -> int:
        return 1

    @pipeline
    def p() -> None:
        reads()

    p.run_in(workspace)
    assert status_map(workspace, p.run_in(workspace).id)["reads"] is ExecutionStatus.CACHED
    data.write_text("two")
    assert status_map(workspace, p.run_in(workspace).id)["reads"] is ExecutionStatus.COMPLETED


def test_missing_file_dependency_fails_the_step(workspace: Workspace) -> None:
    @step(cache_policy=CachePolicy(file_dependencies=("nope.txt",)))
    def reads() -> int:
        return 1

    @pipeline
    def p() -> None:
        reads()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    run = failed.value.run
    assert run.status is ExecutionStatus.FAILED
    record = steps_of(workspace, run.id)["reads"]
    assert "Missing file for cache computation: nope.txt" in (record.status_reason or "")


def test_cache_func_and_source_dependencies(workspace: Workspace) -> None:
    policy = CachePolicy(
        cache_func=cache_func, source_dependencies=(f"{__name__}:helper_dependency",)
    )

    @step(cache_policy=policy)
    def guarded() -> int:
        return 1

    @pipeline
    def p() -> None:
        guarded()

    CACHE_FUNC_VALUE["value"] = "a"
    p.run_in(workspace)
    assert status_map(workspace, p.run_in(workspace).id)["guarded"] is ExecutionStatus.CACHED
    CACHE_FUNC_VALUE["value"] = "b"
    assert status_map(workspace, p.run_in(workspace).id)["guarded"] is ExecutionStatus.COMPLETED


def test_a_whole_module_as_a_source_dependency(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's own code is in its key, not the helpers it calls: naming their module (the
    object or its import path) puts the module's whole source in the key."""
    helpers = tmp_path / "cache_dep_helpers.py"
    helpers.write_text("FACTOR = 3\n\ndef scale(x):\n    return x * FACTOR\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("cache_dep_helpers")
    assert CachePolicy(source_dependencies=[module]).source_dependencies == ("cache_dep_helpers",)

    @step(cache_policy=CachePolicy(source_dependencies=["cache_dep_helpers"]))
    def scaled() -> int:
        return int(module.scale(2))

    @pipeline
    def p() -> None:
        scaled()

    p.run_in(workspace)
    assert status_map(workspace, p.run_in(workspace).id)["scaled"] is ExecutionStatus.CACHED
    helpers.write_text("FACTOR = 4\n\ndef scale(x):\n    return x * FACTOR\n")
    assert status_map(workspace, p.run_in(workspace).id)["scaled"] is ExecutionStatus.COMPLETED


def test_cached_step_takes_source_from_original(workspace: Workspace) -> None:
    @step
    def documented() -> int:
        """Docs."""
        return 1

    @pipeline
    def p() -> None:
        documented()

    p.run_in(workspace)
    documented.source_code = None  # e.g. the source file is not available here
    documented.docstring = None
    run = p.run_in(workspace)
    record = steps_of(workspace, run.id)["documented"]
    assert record.status is ExecutionStatus.CACHED
    assert record.docstring == "Docs."
    assert record.source_code and "def documented" in record.source_code
