"""Cache hits that must not happen (a result of other inputs or code) and hits that must."""

from __future__ import annotations

import enum
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.conftest import FakeClock
from tests.e2e.test_caching import status_map, steps_of
from wharf import CachePolicy, Client, RunFailedError, pipeline, step
from wharf.artifacts.materializers.script_classes import SCRIPT_MODULE
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.execution.caching import compute_step_cache_key
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, RunFilter


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


def test_a_tuple_is_not_its_list(workspace: Workspace) -> None:
    @step
    def kind(xs: object) -> str:
        return type(xs).__name__

    @pipeline
    def p(as_tuple: bool) -> None:
        kind(xs=(1, 2) if as_tuple else [1, 2])

    client = Client(workspace.config, workspace.store)
    for as_tuple, expected in ((True, "tuple"), (False, "list")):
        run = p.run_in(workspace, as_tuple=as_tuple)
        assert status_map(workspace, run.id) == {"kind": ExecutionStatus.COMPLETED}
        assert client.load_step_output(run.id, "kind") == expected


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


def test_a_result_made_without_an_expiry_is_not_reused_once_one_is_set(
    workspace: Workspace, clock: FakeClock
) -> None:
    """A day-old result recorded with no expiry was reused forever by a step that now says
    ``expires_after=3600``: the expiry is part of the key, so results made under another one
    are not reused."""

    def make(policy: CachePolicy) -> Any:
        @step(name="fetch", cache_policy=policy)
        def fetch() -> int:
            return 1

        @pipeline(name="fetching")
        def p() -> None:
            fetch()

        return p

    unbounded, hourly = make(CachePolicy()), make(CachePolicy(expires_after=3600))
    unbounded.run_in(workspace)
    clock.advance(86_400)
    assert status_map(workspace, unbounded.run_in(workspace).id) == {
        "fetch": ExecutionStatus.CACHED
    }
    assert status_map(workspace, hourly.run_in(workspace).id) == {
        "fetch": ExecutionStatus.COMPLETED
    }
    clock.advance(60)
    assert status_map(workspace, hourly.run_in(workspace).id) == {"fetch": ExecutionStatus.CACHED}


FEATURES = "def compute(x):\n    return x + {n}\n"

STALE_SCRIPT = """
import pathlib
import sys
from typing import Any

sys.path.insert(0, "mods")
import features

from wharf import CachePolicy, pipeline, step


@step(cache_policy=CachePolicy(source_dependencies=[features]))
def featurize(x: int = 1) -> int:
    return features.compute(x)


@pipeline
def featuring() -> None:
    featurize()


if __name__ == "__main__":
    featuring()
    if sys.argv[1:] == ["edit"]:  # edited while loaded: this process still runs the old code
        pathlib.Path("mods/features.py").write_text({edited!r})
        featuring()
"""


def _script(tmp_path: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "featuring.py", *args],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _outputs(workspace: Workspace) -> list[tuple[ExecutionStatus, int]]:
    """Status and output value of each run's step, oldest run first."""
    runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
    found = []
    with Client(workspace.config, workspace.store) as client:
        for run in sorted(runs, key=lambda r: r.created):
            (record,) = steps_of(workspace, run.id).values()
            (version_id,) = record.outputs.values()
            found.append((record.status, client.load_artifact(version_id)))
    return found


def test_a_source_dependency_edited_while_loaded_is_not_reused_by_new_code(
    workspace: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "features.py").write_text(FEATURES.format(n=1))
    edited = FEATURES.format(n=1000)
    (tmp_path / "featuring.py").write_text(STALE_SCRIPT.format(edited=edited))
    _script(tmp_path, "edit")  # the second run computes 1 + 1 under the edited file
    _script(tmp_path)  # a fresh process runs the edited code: 1 + 1000
    _script(tmp_path)  # and its result is reused by the next one
    assert _outputs(workspace)[1:] == [
        (ExecutionStatus.COMPLETED, 2),
        (ExecutionStatus.COMPLETED, 1001),
        (ExecutionStatus.CACHED, 1001),
    ]


def test_a_source_dependency_without_source_fails_its_step_saying_why(
    workspace: Workspace,
) -> None:
    @step(cache_policy=CachePolicy(source_dependencies=("math",)))  # a built-in module
    def uses_math() -> int:
        return 1

    @pipeline
    def p() -> None:
        uses_math()

    with pytest.raises(RunFailedError) as failed:
        p.run_in(workspace)
    record = steps_of(workspace, failed.value.run.id)["uses_math"]
    assert (record.status_reason or "").startswith(
        "Cannot read the source code of 'math' named in a cache policy"
    )


class Color(enum.Enum):
    RED = "red"


def test_an_input_of_the_same_bytes_and_another_type_misses(workspace: Workspace) -> None:
    @step
    def make(member: bool):  # an enum member is saved as its value
        return Color.RED if member else "red"

    @step
    def describe(x) -> str:
        return type(x).__name__

    @pipeline
    def p(member: bool) -> None:
        describe(make(member=member))

    p.run_in(workspace, member=False)
    run = p.run_in(workspace, member=True)
    assert status_map(workspace, run.id)["describe"] is ExecutionStatus.COMPLETED
    with Client(workspace.config, workspace.store) as client:
        assert client.load_step_output(run.id, "describe") == "Color"
    again = p.run_in(workspace, member=False)  # an upstream that made "red" again: a hit
    assert status_map(workspace, again.id) == {
        "make": ExecutionStatus.CACHED,
        "describe": ExecutionStatus.CACHED,
    }


COMMENTED_SCRIPT = '''
from wharf import pipeline, step


@step
def train(rows: int = 3) -> int:
    """Trains."""
    # sum the rows
    return sum(range(rows))  # the total


@pipeline
def training() -> None:
    train()


if __name__ == "__main__":
    training()
'''


HELPED_SCRIPT = '''
from wharf import pipeline, step

FACTOR = 2


def scale(x):
    return x * FACTOR  # the factor


@step
def train(rows: int = 3) -> int:
    """Trains."""
    # sum the rows
    return scale(sum(range(rows)))  # the total


@pipeline
def training() -> None:
    train()


if __name__ == "__main__":
    training()
'''


@pytest.mark.parametrize("text", [COMMENTED_SCRIPT, HELPED_SCRIPT], ids=["alone", "helped"])
def test_a_comment_edit_keeps_the_step_cached(
    workspace: Workspace, tmp_path: Path, text: str
) -> None:
    """Also where the step reaches a function and a constant of its module (whose facts join
    its code hash): a comment there counted once, the step's own lines and the helper's."""
    script = tmp_path / "training.py"

    def run(text: str) -> ExecutionStatus:
        script.write_text(text)
        done = subprocess.run(
            [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
        newest = max(runs, key=lambda r: r.created)
        return status_map(workspace, newest.id)["train"]

    assert run(text) is ExecutionStatus.COMPLETED
    recommented = text.replace("# sum the rows", "# add up\n\n    # the rows")
    recommented = recommented.replace("# the total", "").replace("# the factor", "# x2   ")
    assert run(recommented) is ExecutionStatus.CACHED
    assert run(text.replace("Trains.", "Fits.")) is ExecutionStatus.COMPLETED
    assert run(text.replace("range(rows)", "range(rows + 1)")) is ExecutionStatus.COMPLETED


DEPENDENT_SCRIPT = """
from wharf import CachePolicy, pipeline, step


def helper(x):
    return x + 1


def data_version():
    return "v1"


@step(cache_policy=CachePolicy(source_dependencies=[helper, "__main__"], cache_func=data_version))
def compute(x: int = 1) -> int:
    return helper(x)


@pipeline
def dependent() -> None:
    compute()


if __name__ == "__main__":
    dependent()
"""


def test_script_dependencies_give_the_same_key_in_another_main(
    workspace: Workspace, tmp_path: Path
) -> None:
    # A Kubernetes orchestrator decides the steps in a pod whose __main__ is Wharf's own: a
    # "__main__:helper" named in a cache policy is the script's, loaded as the step's is.
    script = tmp_path / "dependent.py"
    script.write_text(DEPENDENT_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (run,) = workspace.store.runs.list(RunFilter(), PageRequest(size=10)).items
    spec = workspace.store.snapshots.get(run.snapshot_id).spec.steps["compute"]
    assert spec.config.cache_policy.cache_func == "__main__:data_version"
    artifact_store = workspace.component_instance(
        workspace.active_stack(), ComponentType.ARTIFACT_STORE
    )
    services = workspace.run_services(artifact_store)
    materializers = {n: o.materializer or f"auto:{o.data_type}" for n, o in spec.outputs.items()}
    try:
        key = compute_step_cache_key(services, spec, {}, materializers)
    finally:
        sys.modules.pop(SCRIPT_MODULE, None)  # the script, loaded here as a step's process does
    assert key == steps_of(workspace, run.id)["compute"].cache_key


IN_FUNCTION_SCRIPT = """
from wharf import CachePolicy, pipeline, step


def helper(x):
    return x + 1


def main():
    @step(cache_policy=CachePolicy(source_dependencies=[helper]))
    def compute(x: int = 1) -> int:
        return helper(x)

    @pipeline
    def in_function() -> None:
        compute()

    in_function()
    in_function()


if __name__ == "__main__":
    main()
"""


def test_script_dependencies_of_a_step_defined_in_a_function(
    workspace: Workspace, tmp_path: Path
) -> None:
    # The step cannot be imported by its path (main.<locals>.compute), the helper can.
    script = tmp_path / "in_function.py"
    script.write_text(IN_FUNCTION_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    runs = sorted(workspace.store.runs.list(RunFilter()).items, key=lambda r: r.created)
    assert [status_map(workspace, r.id)["compute"] for r in runs] == [
        ExecutionStatus.COMPLETED,
        ExecutionStatus.CACHED,
    ]


def made_with(value: object):
    @step(name="made")
    def made() -> str:
        return repr(value)

    @pipeline(name="factory")
    def factory() -> None:
        made()

    return factory


class Settings:
    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"Settings(depth={self.depth})"


def helper_one() -> int:
    return 1


def helper_two() -> int:
    return 2


def test_a_step_made_by_a_factory_counts_what_it_closes_over(workspace: Workspace) -> None:
    # One source for every value: the code alone gave each value the first one's result.
    def outputs(value: object) -> tuple[ExecutionStatus, str]:
        run = made_with(value).run_in(workspace)
        with Client(workspace.config, workspace.store) as client:
            return status_map(workspace, run.id)["made"], client.load_step_output(run.id, "made")

    assert outputs(1) == (ExecutionStatus.COMPLETED, "1")
    assert outputs(2) == (ExecutionStatus.COMPLETED, "2")
    assert outputs(1) == (ExecutionStatus.CACHED, "1")
    assert outputs({"b": 1, "a": [1.5]}) == (ExecutionStatus.COMPLETED, "{'b': 1, 'a': [1.5]}")
    assert outputs({"a": [1.5], "b": 1})[0] is ExecutionStatus.CACHED
    assert outputs(Settings(3)) == (ExecutionStatus.COMPLETED, "Settings(depth=3)")
    assert outputs(Settings(3))[0] is ExecutionStatus.CACHED  # another object, same repr
    assert outputs(Settings(4))[0] is ExecutionStatus.COMPLETED
    assert outputs(helper_one)[0] is ExecutionStatus.COMPLETED
    assert outputs(helper_two)[0] is ExecutionStatus.COMPLETED  # other code


class Opaque:
    """An object whose repr shows no state (``<...Opaque object at 0x...>``)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth


class Unpicklable:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # pickling it fails


def test_a_closed_over_value_counts_by_its_content_not_its_repr(workspace: Workspace) -> None:
    """Two arrays of 2000 elements differing in the middle share numpy's summarised repr
    (``[0, 0, 0, ..., 0, 0, 0]``), two objects without a repr of their own share it without
    their address: the second step reused the first one's result."""

    def outputs(value: object) -> tuple[ExecutionStatus, str]:
        run = made_with(value).run_in(workspace)
        with Client(workspace.config, workspace.store) as client:
            return status_map(workspace, run.id)["made"], client.load_step_output(run.id, "made")

    zeros, middle = np.zeros(2000, dtype=np.int64), np.zeros(2000, dtype=np.int64)
    middle[1000] = 7
    assert repr(zeros) == repr(middle)
    assert outputs(zeros)[0] is ExecutionStatus.COMPLETED
    assert outputs(middle)[0] is ExecutionStatus.COMPLETED  # was CACHED: zeros' result
    assert outputs(middle.copy())[0] is ExecutionStatus.CACHED  # the same content
    assert outputs(zeros.astype(np.int32))[0] is ExecutionStatus.COMPLETED  # another dtype
    assert outputs([1, {"a": middle}])[0] is ExecutionStatus.COMPLETED  # inside a container
    assert outputs([1, {"a": zeros}])[0] is ExecutionStatus.COMPLETED
    assert outputs(Opaque(1))[0] is ExecutionStatus.COMPLETED
    assert outputs(Opaque(2))[0] is ExecutionStatus.COMPLETED  # was CACHED: Opaque(1)'s
    assert outputs(Opaque(2))[0] is ExecutionStatus.CACHED


def test_a_closed_over_value_that_cannot_be_hashed_is_never_reused(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    """A value read neither as data nor by pickling cannot be told from another of its type:
    the step is not cached (a warning says why), unless its code is left out of the key."""
    first = made_with(Unpicklable()).run_in(workspace)
    second = made_with(Unpicklable()).run_in(workspace)
    assert status_map(workspace, second.id) == {"made": ExecutionStatus.COMPLETED}
    spec = workspace.store.snapshots.get(first.snapshot_id).spec.steps["made"]
    assert spec.config.enable_cache is False
    assert "Step 'made' is not cached: it holds 'value', a Unpicklable" in caplog.text
