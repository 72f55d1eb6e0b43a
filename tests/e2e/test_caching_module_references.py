"""A script's helpers and constants are in its step's cache key: editing the helper the step
calls, or a constant it reads, runs the step again (it was reused with the old helper's
result); editing a function the step does not reach keeps it cached.

Each run is a fresh process of the script (the key must be the same from one process to the
next). One script holds several steps, each reaching one of the things edited, and each run
edits one thing: the edited thing's step runs again while every other step stays cached, which
also shows that the key after the previous edit is stable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.test_caching import status_map
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, RunFilter

C, K = ExecutionStatus.COMPLETED, ExecutionStatus.CACHED

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


def submit(script: Path, text: str) -> str:
    """Run ``text`` as the script ``script`` in a process of its own; its output."""
    script.write_text(text)
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stderr + done.stdout


def newest_run(workspace: Workspace) -> PipelineRunRecord:
    runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
    return max(runs, key=lambda r: r.created)


def run(script: Path, text: str, workspace: Workspace) -> ExecutionStatus:
    """The status of the step ``count`` in a run of ``text`` as the script ``script``."""
    submit(script, text)
    return status_map(workspace, newest_run(workspace).id)["count"]


def statuses(script: Path, text: str, workspace: Workspace) -> dict[str, ExecutionStatus]:
    """Every step's status in a run of ``text`` as the script ``script``."""
    submit(script, text)
    return status_map(workspace, newest_run(workspace).id)


FUNCTIONS_SCRIPT = """
from wharf import CachePolicy, pipeline, step

THRESHOLD = 0.5
THRESHOLDS = {r: 0.5 for r in range(5000)}
DEEP: list = []
for _ in range(5000):
    DEEP = [DEEP]


def preprocess(rows: int) -> list[float]:
    return [r * 1.0 for r in range(rows)]


def unrelated() -> int:
    return 1


@step
def count(rows: int = 5) -> int:
    return len([v for v in preprocess(rows) if v > THRESHOLD])


@step(cache_policy=CachePolicy(include_step_code=False))
def uncoded(rows: int = 5) -> int:
    return len([v for v in preprocess(rows) if v > THRESHOLD])


@step
def large(rows: int = 5000) -> int:
    return len([r for r in range(rows) if r * 0.001 > THRESHOLDS[r]])


@step
def deep(rows: int = 5000) -> int:
    return len([r for r in range(rows) if r * 0.001 > THRESHOLDS[r]] + [len(DEEP)])


@pipeline
def counting() -> None:
    count()
    uncoded()
    large()
    deep()


if __name__ == "__main__":
    counting()
"""


def test_editing_what_a_step_reaches_runs_it_again_and_only_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    """``count`` calls a helper and reads a constant; ``uncoded`` does too but its policy
    leaves the step's code out of the key; ``large`` reads a constant over 10,000 elements (a
    dict of 5,000 thresholds; one counted by its type alone reused the old thresholds' result
    when one was edited); ``deep`` reads a constant the key cannot read (too deeply nested), so
    it is never cached."""
    script = tmp_path / "counting.py"
    text = FUNCTIONS_SCRIPT
    assert statuses(script, text, workspace) == {"count": C, "uncoded": C, "large": C, "deep": C}
    unchanged = {"count": K, "uncoded": K, "large": K, "deep": C}
    text = text.replace("return 1", "return 2")  # a function no step reaches
    assert statuses(script, text, workspace) == unchanged
    spec = workspace.store.snapshots.get(newest_run(workspace).snapshot_id).spec
    assert spec.steps["deep"].config.enable_cache is False
    assert spec.steps["count"].config.enable_cache is not False
    text = text.replace("r * 1.0", "r * 2.0")  # the helper
    assert statuses(script, text, workspace) == unchanged | {"count": C}
    text = text.replace("r: 0.5 for", "r: 9.0 if r == 2500 else 0.5 for")  # one threshold of many
    assert statuses(script, text, workspace) == unchanged | {"large": C}
    text = text.replace("THRESHOLD = 0.5", "THRESHOLD = 2.5")  # the constant
    assert statuses(script, text, workspace) == unchanged | {"count": C}
    assert statuses(script, text, workspace) == unchanged


OBJECT_SCRIPT = """
import dataclasses
import logging
import re
import threading
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
LOCK = threading.Lock()
VOCAB = frozenset({"a", ("b", Decimal("1.5"))})


@step
def weights(rows: int = 5) -> str:
    logger.info("counting")
    return repr((rows, WEIGHTS.sum()))


@step
def config(rows: int = 5) -> str:
    logger.info("counting")
    return repr((rows, CONFIG.lr))


@step
def pattern(rows: int = 5) -> str:
    logger.info("counting")
    return repr((rows, PATTERN.pattern))


@step
def vocab(rows: int = 5) -> str:
    logger.info("counting")
    return repr((rows, sorted(VOCAB, key=str)))


@step
def lock(rows: int = 5) -> str:
    logger.info("counting")
    return repr((rows, LOCK.locked()))


@pipeline
def counting() -> None:
    weights()
    config()
    pattern()
    vocab()
    lock()


if __name__ == "__main__":
    counting()
"""


def test_editing_a_module_level_object_runs_the_step_again(
    workspace: Workspace, tmp_path: Path
) -> None:
    """A module-level constant other than plain data (an array, a dataclass instance, a
    compiled pattern, a frozenset holding a Decimal) was left out of the key: editing it reused
    the old result. The logger every step also reads keeps them cached. A lock cannot be
    pickled: the step reading it is never cached, and the run says why."""
    script = tmp_path / "counting.py"
    text = OBJECT_SCRIPT
    unchanged = {"weights": K, "config": K, "pattern": K, "vocab": K, "lock": C}
    said = submit(script, text)
    assert "module-level 'LOCK', a lock (cannot be pickled" in said
    assert status_map(workspace, newest_run(workspace).id) == dict.fromkeys(unchanged, C)
    for name, old, new in [
        ("weights", "np.array([1.0, 2.0, 3.0])", "np.array([1.0, 2.0, 4.0])"),
        ("config", "Config(lr=0.1)", "Config(lr=0.2)"),
        ("pattern", 're.compile("a+")', 're.compile("b+")'),
        ("vocab", 'Decimal("1.5")', 'Decimal("2.5")'),
    ]:
        assert old in text
        text = text.replace(old, new)
        assert statuses(script, text, workspace) == unchanged | {name: C}, name
    said = submit(script, text)
    assert "module-level 'LOCK', a lock (cannot be pickled" in said
    assert status_map(workspace, newest_run(workspace).id) == unchanged
