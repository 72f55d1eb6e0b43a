"""What a ``spawn`` worker is handed as it starts (``spawn_handover``): each registered maker's
object, unpickled in the worker before its target runs; nothing from a maker that has none,
and nothing to a worker of another interpreter. Real spawned processes."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from wharf.execution import spawn_handover

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="spawn on Linux")

WANTED: dict[str, str | None] = {}
"""What the makers hand, by name (None: nothing); set by the test before a start."""


class Note:
    """Handed to a worker: writes ``text`` to ``path`` there as it is unpickled."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text

    def __reduce__(self) -> tuple[Any, ...]:
        return (_write, (self.path, self.text))


def _write(path: str, text: str) -> None:
    Path(path).write_text(f"{text} {os.getpid()}")


def _maker(name: str) -> spawn_handover.Maker:
    def make() -> Note | None:
        path = WANTED.get(name)
        return Note(path, name) if path is not None else None

    return make


def _nothing() -> None:
    pass


def started(tmp_path: Path) -> int:
    worker = multiprocessing.get_context("spawn").Process(target=_nothing)
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0
    assert worker.pid is not None
    return worker.pid


def test_each_maker_hands_its_object_and_none_hands_nothing(tmp_path: Path) -> None:
    spawn_handover.hand_over("test a", _maker("a"))
    spawn_handover.hand_over("test b", _maker("b"))
    spawn_handover.hand_over("test a", _maker("ignored"))  # the first maker of a name holds
    WANTED.update({"a": str(tmp_path / "a"), "b": None, "ignored": str(tmp_path / "ignored")})
    try:
        pid = started(tmp_path)
    finally:
        WANTED.clear()
    assert (tmp_path / "a").read_text() == f"a {pid}"
    assert not (tmp_path / "b").exists()
    assert not (tmp_path / "ignored").exists()
    assert not hasattr(multiprocessing.current_process(), "_wharf_handed")


def test_a_worker_of_another_interpreter_is_handed_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "python"
    other.symlink_to(sys.executable)  # the same program under another name: not ours
    spawn_handover.hand_over("test a", _maker("a"))
    WANTED["a"] = str(tmp_path / "a")
    multiprocessing.set_executable(str(other))
    try:
        started(tmp_path)
    finally:
        multiprocessing.set_executable(sys.executable)
        WANTED.clear()
    assert not (tmp_path / "a").exists()
