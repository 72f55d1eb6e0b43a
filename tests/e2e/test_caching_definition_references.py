"""What a script's decorators and class bodies read is in its step's cache key: editing a
module-level constant read by the step's decorator (``@scaled(FACTOR)``), by a helper's
decorator, by a class body (``layers = LAYERS``) or a method's default (``k=K``), or editing
the decorator itself, runs the step again (each reused the old result); editing what the step
does not reach keeps it cached."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_caching_module_references import run
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

SCRIPT = """
import functools

from wharf import pipeline, step

FACTOR = 2
HELPER_TIMES = 2
LAYERS = 3
K = 10
UNRELATED = 1


def scaled(factor):
    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return f(*args, **kwargs) * factor

        return wrapper

    return decorate


def repeat(times):
    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args):
            return [f(*args) for _ in range(times)]

        return wrapper

    return decorate


@repeat(times=HELPER_TIMES)
def helper(rows):
    return rows


class Model:
    layers = LAYERS

    def scale(self, value, k=K):
        return value * k


def unrelated():
    return UNRELATED


@step
@scaled(FACTOR)
def count(rows: int = 5) -> int:
    return len(helper(rows)) + Model.layers + Model().scale(rows)


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
    assert run(script, unrelated, workspace) is ExecutionStatus.CACHED


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("FACTOR = 2", "FACTOR = 3"),
        ("* factor\n", "* factor + 1\n"),
        ("HELPER_TIMES = 2", "HELPER_TIMES = 3"),
        ("LAYERS = 3", "LAYERS = 4"),
        ("K = 10", "K = 11"),
    ],
    ids=[
        "step-decorator-argument",
        "step-decorator-code",
        "helper-decorator-argument",
        "class-body",
        "method-default",
    ],
)
def test_editing_what_a_decorator_or_class_body_reads_runs_the_step_again(
    workspace: Workspace, tmp_path: Path, old: str, new: str
) -> None:
    script = tmp_path / "counting.py"
    assert run(script, SCRIPT, workspace) is ExecutionStatus.COMPLETED
    assert old in SCRIPT
    edited = SCRIPT.replace(old, new)
    assert run(script, edited, workspace) is ExecutionStatus.COMPLETED
    assert run(script, edited, workspace) is ExecutionStatus.CACHED
