"""A script's helpers and constants are in its step's cache key: editing the helper the step
calls, or a constant it reads, runs the step again (it was reused with the old helper's
result); editing a function the step does not reach keeps it cached."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_caching import status_map
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, RunFilter

SCRIPT = """
from wharf import pipeline, step

THRESHOLD = 0.5


def preprocess(rows: int) -> list[float]:
    return [r * 1.0 for r in range(rows)]


def unrelated() -> int:
    return 1


@step
def count(rows: int = 5) -> int:
    return len([v for v in preprocess(rows) if v > THRESHOLD])


@pipeline
def counting() -> None:
    count()


if __name__ == "__main__":
    counting()
"""


def run(script: Path, text: str, workspace: Workspace) -> ExecutionStatus:
    """The status of the step ``count`` in a run of ``text`` as the script ``script``."""
    script.write_text(text)
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
    newest = max(runs, key=lambda r: r.created)
    return status_map(workspace, newest.id)["count"]


def test_editing_what_the_step_reaches_runs_it_again(workspace: Workspace, tmp_path: Path) -> None:
    script = tmp_path / "counting.py"
    assert run(script, SCRIPT, workspace) is ExecutionStatus.COMPLETED
    assert run(script, SCRIPT, workspace) is ExecutionStatus.CACHED
    unrelated = SCRIPT.replace("return 1", "return 2")
    assert run(script, unrelated, workspace) is ExecutionStatus.CACHED
    helper = unrelated.replace("r * 1.0", "r * 2.0")
    assert run(script, helper, workspace) is ExecutionStatus.COMPLETED
    assert run(script, helper, workspace) is ExecutionStatus.CACHED
    constant = helper.replace("THRESHOLD = 0.5", "THRESHOLD = 2.5")
    assert run(script, constant, workspace) is ExecutionStatus.COMPLETED
    assert run(script, constant, workspace) is ExecutionStatus.CACHED


def test_without_step_code_an_edited_helper_keeps_the_step_cached(
    workspace: Workspace, tmp_path: Path
) -> None:
    script = tmp_path / "counting.py"
    text = SCRIPT.replace("@step\n", "@step(cache_policy=CachePolicy(include_step_code=False))\n")
    text = text.replace("import pipeline, step", "import CachePolicy, pipeline, step")
    assert run(script, text, workspace) is ExecutionStatus.COMPLETED
    helper = text.replace("r * 1.0", "r * 2.0").replace("THRESHOLD = 0.5", "THRESHOLD = 2.5")
    assert run(script, helper, workspace) is ExecutionStatus.CACHED


LARGE_SCRIPT = """
from wharf import pipeline, step

THRESHOLDS = {r: 0.5 for r in range(5000)}


@step
def count(rows: int = 5000) -> int:
    return len([r for r in range(rows) if r * 0.001 > THRESHOLDS[r]])


@pipeline
def counting() -> None:
    count()


if __name__ == "__main__":
    counting()
"""


def test_editing_one_element_of_a_large_constant_runs_the_step_again(
    workspace: Workspace, tmp_path: Path
) -> None:
    """A constant over 10,000 elements (a dict of 5,000 thresholds) or 100,000 characters
    encoded counted by its type alone: an edited threshold reused the old ones' result."""
    script = tmp_path / "counting.py"
    assert run(script, LARGE_SCRIPT, workspace) is ExecutionStatus.COMPLETED
    assert run(script, LARGE_SCRIPT, workspace) is ExecutionStatus.CACHED
    edited = LARGE_SCRIPT.replace("r: 0.5 for", "r: 9.0 if r == 2500 else 0.5 for")
    assert run(script, edited, workspace) is ExecutionStatus.COMPLETED
    assert run(script, edited, workspace) is ExecutionStatus.CACHED


def test_a_constant_the_key_cannot_read_leaves_the_step_uncached(
    workspace: Workspace, tmp_path: Path
) -> None:
    script = tmp_path / "counting.py"
    nested = LARGE_SCRIPT.replace(
        "range(5000)}\n",
        "range(5000)}\nDEEP: list = []\nfor _ in range(5000):\n    DEEP = [DEEP]",
    ).replace("THRESHOLDS[r]]", "THRESHOLDS[r]] + [len(DEEP)]")
    assert run(script, nested, workspace) is ExecutionStatus.COMPLETED
    assert run(script, nested, workspace) is ExecutionStatus.COMPLETED  # not cached
    runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
    spec = workspace.store.snapshots.get(runs[0].snapshot_id).spec.steps["count"]
    assert spec.config.enable_cache is False


OBJECT_SCRIPT = """
import dataclasses
import logging
import re
from decimal import Decimal

import numpy as np

from wharf import pipeline, step

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Config:
    lr: float


WEIGHTS = np.array([1.0, 2.0, 3.0])
CONFIG = Config(lr=0.1)
PATTERN = re.compile("a+")
VOCAB = frozenset({"a", ("b", Decimal("1.5"))})


@step
def count(rows: int = 5) -> str:
    logger.info("counting")
    return repr((rows, READ))


@pipeline
def counting() -> None:
    count()


if __name__ == "__main__":
    counting()
"""


@pytest.mark.parametrize(
    ("read", "old", "new"),
    [
        ("WEIGHTS.sum()", "np.array([1.0, 2.0, 3.0])", "np.array([1.0, 2.0, 4.0])"),
        ("CONFIG.lr", "Config(lr=0.1)", "Config(lr=0.2)"),
        ("PATTERN.pattern", 're.compile("a+")', 're.compile("b+")'),
        ("sorted(VOCAB, key=str)", 'Decimal("1.5")', 'Decimal("2.5")'),
    ],
    ids=["numpy-array", "dataclass-instance", "compiled-regex", "frozenset"],
)
def test_editing_a_module_level_object_runs_the_step_again(
    workspace: Workspace, tmp_path: Path, read: str, old: str, new: str
) -> None:
    """A module-level constant other than plain data (an array, a dataclass instance, a
    compiled pattern) was left out of the key: editing it reused the old result. The logger
    the step also reads keeps it cached."""
    script = tmp_path / "counting.py"
    text = OBJECT_SCRIPT.replace("READ", read)
    assert run(script, text, workspace) is ExecutionStatus.COMPLETED
    assert run(script, text, workspace) is ExecutionStatus.CACHED
    assert old in text
    edited = text.replace(old, new)
    assert run(script, edited, workspace) is ExecutionStatus.COMPLETED
    assert run(script, edited, workspace) is ExecutionStatus.CACHED


def test_an_unpicklable_module_level_object_leaves_the_step_uncached(
    workspace: Workspace, tmp_path: Path
) -> None:
    script = tmp_path / "counting.py"
    text = OBJECT_SCRIPT.replace("import re\n", "import re\nimport threading\n")
    text = text.replace("VOCAB = ", "LOCK = threading.Lock()\nVOCAB = ")
    text = text.replace("READ", "LOCK.locked()")
    assert run(script, text, workspace) is ExecutionStatus.COMPLETED
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "module-level 'LOCK', a lock (cannot be pickled" in done.stderr + done.stdout
    runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
    newest = max(runs, key=lambda r: r.created)
    assert status_map(workspace, newest.id)["count"] is ExecutionStatus.COMPLETED
