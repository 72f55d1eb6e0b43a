"""Which step processes this machine started, as this OS user: a force stop signals only those.

What the store records of a step's process (pid, host, start token) could name any process, so
the backend that starts one leaves a marker (:func:`record`: one file per step run holding the
pid and start token) in a directory only this user can write (:func:`directory`). Invariants: a
marker is written 0600 and atomically, removed when its attempt is cleaned up; :func:`started`
answers only from a trusted directory (0700, owned by this user), so nothing another account
writes can make a process look started here.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from uuid import UUID


def directory() -> Path:
    """The marker directory of this user (not made here)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "wharf-steps"
    return Path(tempfile.gettempdir()) / f"wharf-{_uid()}-steps"


def _uid() -> int:
    return os.getuid() if sys.platform != "win32" else 0


def _trusted(path: Path, *, make: bool) -> bool:
    """Whether ``path`` is a directory of this user that no one else may write (made if
    ``make``)."""
    if make:
        try:
            path.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == _uid()
        and stat.S_IMODE(info.st_mode) & 0o077 == 0
    )


def own_directory(*, make: bool) -> Path | None:
    """This user's marker directory if it is trusted (made first if ``make``), else None; also
    where a run's orchestrating process listens for wakes (``wharf.execution.run_wake``)."""
    folder = directory()
    return folder if _trusted(folder, make=make) else None


def record(step_run_id: UUID, pid: int, token: str | None) -> None:
    """Remember that this machine started ``pid`` (start token ``token``) for the step run."""
    if token is None:
        return  # a process whose start cannot be told apart from a reused pid: never signalled
    folder = directory()
    if not _trusted(folder, make=True):
        return
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(f"{pid} {token}")
        os.replace(tmp, folder / str(step_run_id))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def started(step_run_id: UUID) -> tuple[int, str] | None:
    """The pid and start token this machine started for the step run, if it did."""
    folder = directory()
    if not _trusted(folder, make=False):
        return None
    try:
        text = (folder / str(step_run_id)).read_text(encoding="utf-8")
    except OSError:
        return None
    pid, _, token = text.partition(" ")
    try:
        return int(pid), token
    except ValueError:
        return None


def forget(step_run_id: UUID) -> None:
    """Drop the step run's marker (its attempt ended)."""
    folder = directory()
    if _trusted(folder, make=False):
        (folder / str(step_run_id)).unlink(missing_ok=True)
