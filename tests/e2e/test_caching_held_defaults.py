"""The defaults and closed-over values of the functions a step's key reads as loaded code (a
helper a step made by a factory closes over, a cache policy's source dependency) count by
content: by repr (numpy's summary ``[0, 0, 0, ..., 0, 0, 0]``, an object's repr without its
state) or not at all, two helpers holding different values shared a key and the second reused
the first one's result."""

from __future__ import annotations

import enum
import functools
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_caching import status_map
from tests.e2e.test_caching_faithful import STALE_SCRIPT, _outputs, _script, made_with
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace


def with_default(table: Any) -> Any:
    def helper(t: Any = table) -> str:
        return repr(t)

    return helper


def with_closure(table: Any) -> Any:
    def helper() -> str:
        return repr(table)

    return helper


@pytest.mark.parametrize("made", [with_default, with_closure], ids=["default", "closure"])
def test_a_closed_over_helper_counts_the_values_it_holds(workspace: Workspace, made: Any) -> None:
    def status(value: Any) -> ExecutionStatus:
        run = made_with(made(value)).run_in(workspace)
        return status_map(workspace, run.id)["made"]

    zeros, middle = np.zeros(2000, dtype=np.int64), np.zeros(2000, dtype=np.int64)
    middle[1000] = 7
    assert status(zeros) is ExecutionStatus.COMPLETED
    assert status(middle) is ExecutionStatus.COMPLETED  # was CACHED: zeros' result
    assert status(middle.copy()) is ExecutionStatus.CACHED
    assert status(types.SimpleNamespace(n=1)) is ExecutionStatus.COMPLETED
    assert status(types.SimpleNamespace(n=2)) is ExecutionStatus.COMPLETED


def retry(times: int) -> Any:
    def decorate(func: Any) -> Any:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for _ in range(times - 1):
                try:
                    return func(*args, **kwargs)
                except OSError:
                    pass
            return func(*args, **kwargs)

        return wrapper

    return decorate


def retried(times: int) -> Any:
    @retry(times=times)
    def helper() -> str:
        return "x"

    return helper


def lru_cached(maxsize: int) -> Any:
    @functools.lru_cache(maxsize=maxsize)
    def helper() -> str:
        return "x"

    return helper


@pytest.mark.parametrize("decorated", [retried, lru_cached], ids=["retry", "lru_cache"])
def test_a_closed_over_helper_counts_what_its_decorators_hold(
    workspace: Workspace, decorated: Any
) -> None:
    """The helper's digest was its inner function's alone: ``@retry(times=3)`` made
    ``times=5`` shared a key and reused the first one's result."""

    def status(value: Any) -> ExecutionStatus:
        run = made_with(value).run_in(workspace)
        return status_map(workspace, run.id)["made"]

    assert status(decorated(3)) is ExecutionStatus.COMPLETED
    assert status(decorated(3)) is ExecutionStatus.CACHED
    assert status(decorated(5)) is ExecutionStatus.COMPLETED  # was CACHED


class Config:
    def __init__(self, lr: float) -> None:
        self.lr = lr


def mode_enum(value: float) -> Any:
    class Mode(enum.Enum):
        FAST = value

    return Mode


def with_defaults(lr: float) -> Any:
    class Trainer:
        DEFAULTS = Config(lr)

        def fit(self) -> float:
            return self.DEFAULTS.lr

    return Trainer


def with_nested(lr: float) -> Any:
    class Outer:
        class Inner:
            DEFAULTS = Config(lr)

    return Outer


@pytest.mark.parametrize(
    "made", [mode_enum, with_defaults, with_nested], ids=["enum", "object", "nested"]
)
def test_a_closed_over_class_counts_what_its_attributes_hold(
    workspace: Workspace, made: Any
) -> None:
    """A class counted its attributes of plain data only: ``FAST = 1`` edited to ``FAST = 2``
    in an enum, or ``DEFAULTS = Config(lr=0.1)`` to ``0.2``, kept the key."""

    def status(value: Any) -> ExecutionStatus:
        run = made_with(value).run_in(workspace)
        return status_map(workspace, run.id)["made"]

    assert status(made(0.1)) is ExecutionStatus.COMPLETED
    assert status(made(0.1)) is ExecutionStatus.CACHED
    assert status(made(0.2)) is ExecutionStatus.COMPLETED  # was CACHED


def test_a_closed_over_class_holding_what_cannot_be_read_is_not_cached(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    class Guarded:
        LOCK = threading.Lock()

    made = made_with(Guarded)
    made.run_in(workspace)
    second = made.run_in(workspace)
    assert status_map(workspace, second.id) == {"made": ExecutionStatus.COMPLETED}
    assert "attribute LOCK of " in caplog.text and "cannot be pickled" in caplog.text


def test_a_closed_over_helper_holding_what_cannot_be_read_is_not_cached(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    made = made_with(with_default(threading.Lock()))
    first, second = made.run_in(workspace), made.run_in(workspace)
    assert status_map(workspace, second.id) == {"made": ExecutionStatus.COMPLETED}
    assert (
        workspace.store.snapshots.get(first.snapshot_id).spec.steps["made"].config.enable_cache
        is False
    )
    assert "Step 'made' is not cached: it holds 'value', a function (default of t" in caplog.text


TABLE = "import numpy as np\n\n\ndef compute(x, table=np.array({values})):\n    return x + int(table.sum())\n"


def test_a_source_dependencys_default_counts_by_content(
    workspace: Workspace, tmp_path: Path
) -> None:
    """A dependency edited while loaded: the old code's result was stored under a key of the
    new source and the old default's repr, the same summary as the new one's, and a fresh
    process running the new code reused it."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "features.py").write_text(TABLE.format(values="[0] * 2000"))
    edited = TABLE.format(values="[0] * 1000 + [1000] + [0] * 999")
    (tmp_path / "featuring.py").write_text(STALE_SCRIPT.format(edited=edited))
    _script(tmp_path, "edit")  # the second run computes 1 + 0 under the edited file
    _script(tmp_path)  # a fresh process runs the edited code: 1 + 1000
    _script(tmp_path)
    assert _outputs(workspace)[1:] == [
        (ExecutionStatus.COMPLETED, 1),
        (ExecutionStatus.COMPLETED, 1001),  # was CACHED, 1
        (ExecutionStatus.CACHED, 1001),
    ]


def test_a_source_dependency_holding_what_cannot_be_read_is_not_cached(
    workspace: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "mods").mkdir()
    locked = "import threading\n\n\ndef compute(x, lock=threading.Lock()):\n    return x\n"
    (tmp_path / "mods" / "features.py").write_text(locked)
    (tmp_path / "featuring.py").write_text(STALE_SCRIPT.format(edited=""))
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "featuring.py"],
            cwd=tmp_path,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert "Step 'featurize' is not cached: its cache policy's source dependency" in done.stderr
    assert "default of lock of compute, a lock: cannot be pickled" in done.stderr
    assert [status for status, _ in _outputs(workspace)] == [ExecutionStatus.COMPLETED] * 2
