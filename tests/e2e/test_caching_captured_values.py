"""What a script's factory-made helpers capture is in its step's cache key: a module-level
helper made by a factory (``helper = make_scaler(K)``) or wrapped by a decorator applied at
module level (``labelled = logged(LABEL)(plain)``) counted by its nested function's source
alone, so editing the value it captured (the constant, or the literal passed to the factory)
reused the old result. Editing what the step does not reach keeps it cached; a captured value
that cannot be pickled leaves the step uncached, with a warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_caching import status_map
from tests.e2e.test_caching_module_references import run
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, RunFilter

SCRIPT = """
import functools
import threading
from decimal import Decimal

from wharf import pipeline, step

K = 3
LABEL = "v1"
UNRELATED = 1


def make_scaler(k):
    def scale(v):
        return v * k

    return scale


def make_offset(table):
    def offset(v):
        return v + table["shift"]

    return offset


def logged(label):
    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args):
            return [label, f(*args)]

        return wrapper

    return decorate


def plain(v):
    return v


def twice(v):
    return v * 2


def make_composed(inner):
    def composed(v):
        return inner(v) + 1

    return composed


helper = make_scaler(K)
shifted = make_offset({"shift": 2})
labelled = logged(LABEL)(plain)
weighted = make_scaler(Decimal("1.5"))
composed = make_composed(twice)
unused = make_scaler(7)


@step
def count(rows: int = 5) -> str:
    return repr((helper(rows), shifted(rows), labelled(rows), weighted(rows), composed(rows)))


@pipeline
def counting() -> None:
    count()


if __name__ == "__main__":
    counting()
"""


def test_an_unrelated_edit_keeps_the_step_cached(workspace: Workspace, tmp_path: Path) -> None:
    script = tmp_path / "counting.py"
    assert run(script, SCRIPT, workspace) is ExecutionStatus.COMPLETED
    assert run(script, SCRIPT, workspace) is ExecutionStatus.CACHED
    unrelated = SCRIPT.replace("UNRELATED = 1", "UNRELATED = 2")
    unrelated = unrelated.replace("make_scaler(7)", "make_scaler(8)")  # a helper not reached
    assert run(script, unrelated, workspace) is ExecutionStatus.CACHED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("K = 3", "K = 4"),
        ('make_offset({"shift": 2})', 'make_offset({"shift": 3})'),
        ('LABEL = "v1"', 'LABEL = "v2"'),
        ('Decimal("1.5")', 'Decimal("2.5")'),
        ("return v * 2", "return v * 3"),
    ],
    ids=[
        "constant-passed-to-a-factory",
        "literal-passed-to-a-factory",
        "captured-by-a-decorator-wrapper",
        "object-passed-to-a-factory",
        "function-passed-to-a-factory",
    ],
)
def test_editing_what_a_factory_made_helper_captured_runs_the_step_again(
    workspace: Workspace, tmp_path: Path, old: str, new: str
) -> None:
    script = tmp_path / "counting.py"
    assert run(script, SCRIPT, workspace) is ExecutionStatus.COMPLETED
    assert old in SCRIPT
    edited = SCRIPT.replace(old, new)
    assert run(script, edited, workspace) is ExecutionStatus.COMPLETED  # was CACHED
    assert run(script, edited, workspace) is ExecutionStatus.CACHED


def test_a_captured_value_that_cannot_be_pickled_leaves_the_step_uncached(
    workspace: Workspace, tmp_path: Path
) -> None:
    script = tmp_path / "counting.py"
    text = SCRIPT.replace("unused = ", "guarded = make_offset(threading.Lock())\nunused = ")
    text = text.replace("composed(rows)))", "composed(rows), guarded))")
    assert run(script, text, workspace) is ExecutionStatus.COMPLETED
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "'table' captured by make_offset.<locals>.offset" in done.stderr + done.stdout
    assert "module-level 'guarded'" in done.stderr + done.stdout
    runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
    newest = max(runs, key=lambda r: r.created)
    assert status_map(workspace, newest.id)["count"] is ExecutionStatus.COMPLETED
