"""WAL checkpoints (:mod:`wharf.sql.checkpoints`): off the writers' path, on a thread of
their own, triggered by this process's commits, and never creating or failing anything.

Waits on the checkpointer's thread poll its counter up to a safety timeout that only a broken
test reaches.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from tests.sql.forking import exit_code_in_fork, held_by_another_thread

from wharf.sql import checkpoints as module
from wharf.sql.checkpoints import AUTOCHECKPOINT_PAGES, WalCheckpoints, checkpoints_for
from wharf.sql.engine import Database, create_sql_engine

SAFETY_TIMEOUT = 30.0
ROW = "x" * 3000  # about one page per row: the log grows by pages, not bytes


def until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + SAFETY_TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def open_database(path: Path) -> Database:
    database = Database(create_sql_engine(f"sqlite:///{path}"), str(path))
    database.write(lambda conn: conn.execute(text("CREATE TABLE t (v TEXT)")))
    return database


def insert(rows: int) -> Callable[[Connection], None]:
    def run(conn: Connection) -> None:
        conn.execute(text("INSERT INTO t (v) VALUES (:v)"), [{"v": ROW}] * rows)

    return run


def log_frames(path: Path) -> tuple[int, int]:
    """(frames in the log, frames copied back) after a checkpoint of the test's own."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        _busy, log, copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return log, copied
    finally:
        other.close()


def test_connections_leave_checkpoints_to_the_checkpointer(tmp_path: Path) -> None:
    database = open_database(tmp_path / "a.db")
    try:
        with database.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == (
                AUTOCHECKPOINT_PAGES
            )
    finally:
        database.dispose()


@pytest.fixture
def quiet_file(tmp_path: Path) -> Iterator[tuple[Path, Database, WalCheckpoints]]:
    """A database file with a table, its engine, and its checkpointer with no trigger armed."""
    path = tmp_path / "a.db"
    # Quiet before the first commit: the thread that commit starts waits as long as these say.
    checkpoints = checkpoints_for(str(path))
    checkpoints.commits_per_checkpoint = 10**9
    checkpoints.max_delay = SAFETY_TIMEOUT * 10
    database = open_database(path)
    yield path, database, checkpoints
    database.dispose()


def test_writers_no_longer_checkpoint_in_their_commits(
    quiet_file: tuple[Path, Database, WalCheckpoints],
) -> None:
    path, database, checkpoints = quiet_file
    before = checkpoints.checkpoints
    for _ in range(30):  # ~1,500 pages: SQLite's default would have checkpointed in a commit
        database.write(insert(50))
    # Past SQLite's default threshold (1,000 pages) and still one log: no writer checkpointed
    # (a checkpoint lets the next writer start the log over).
    log, copied = log_frames(path)
    assert log > 1000 and checkpoints.checkpoints == before
    assert copied == log  # the test's own checkpoint copied it all back


def test_enough_commits_wake_the_checkpointer(
    quiet_file: tuple[Path, Database, WalCheckpoints],
) -> None:
    _, database, checkpoints = quiet_file
    checkpoints.commits_per_checkpoint = 3
    before = checkpoints.checkpoints
    for _ in range(3):
        database.write(insert(5))
    assert until(lambda: checkpoints.checkpoints == before + 1)


def test_a_single_commit_is_checkpointed_after_the_delay(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    checkpoints = checkpoints_for(str(path))  # set before the first commit's thread waits
    checkpoints.commits_per_checkpoint = 10**9
    checkpoints.max_delay = 0.01
    database = open_database(path)  # one commit (its table)
    try:
        assert until(lambda: checkpoints.checkpoints == 1)
        database.write(insert(1))
        assert until(lambda: checkpoints.checkpoints == 2)
    finally:
        database.dispose()


def test_an_idle_checkpointer_ends_its_thread_and_starts_again(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    path.touch()
    checkpoints = WalCheckpoints(str(path), commits_per_checkpoint=1, idle=0.01)
    checkpoints.committed()
    assert until(lambda: checkpoints.checkpoints == 1)
    assert until(lambda: checkpoints._thread is None)  # idle: the thread ended
    checkpoints.committed()
    assert until(lambda: checkpoints.checkpoints == 2)


def test_dispose_leaves_the_log_to_others(
    quiet_file: tuple[Path, Database, WalCheckpoints],
) -> None:
    """An ending process does not sync the files on its way out (an isolated step's process
    would wait for it): what it committed stays in the log for the next checkpoint."""
    _, database, checkpoints = quiet_file
    database.write(insert(5))
    before = checkpoints.checkpoints
    database.dispose()
    assert checkpoints.checkpoints == before


def test_a_file_that_is_gone_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "gone.db"
    checkpoints = WalCheckpoints(str(missing))
    with caplog.at_level(logging.DEBUG, logger=module.__name__):
        checkpoints._checkpoint()
    assert not missing.exists() and checkpoints.checkpoints == 0 and not caplog.records


def test_a_failing_checkpoint_is_logged_and_creates_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "not-a-database.db"
    directory.mkdir()  # exists, but SQLite cannot open it
    checkpoints = WalCheckpoints(str(directory))
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        checkpoints._checkpoint()
    assert checkpoints.checkpoints == 0 and list(directory.iterdir()) == []
    assert "Could not checkpoint the SQLite log" in caplog.text


def test_one_checkpointer_per_file(tmp_path: Path) -> None:
    first = checkpoints_for(str(tmp_path / "a.db"))
    assert first is checkpoints_for(str(tmp_path / "." / "a.db"))
    assert first is not checkpoints_for(str(tmp_path / "b.db"))


def test_a_forked_child_starts_with_no_checkpoint_running_and_free_locks(tmp_path: Path) -> None:
    database = open_database(tmp_path / "a.db")
    checkpoints = checkpoints_for(str(tmp_path / "a.db"))
    assert database._checkpoints is checkpoints and checkpoints._thread is not None

    def in_child() -> None:
        assert checkpoints_for(str(tmp_path / "a.db")) is checkpoints  # inherited, reset
        assert checkpoints._thread is None
        before = checkpoints.checkpoints
        checkpoints.committed()  # would wait forever for the parent thread's lock
        assert until(lambda: checkpoints.checkpoints > before)  # the child's own thread

    with held_by_another_thread(lambda: checkpoints._changed):  # inside the checkpointer
        assert exit_code_in_fork(in_child) == 0
    database.engine.dispose()


def test_a_fork_waits_for_a_checkpoint_under_way(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread inside SQLite at a fork may hold SQLite's process-wide mutexes (its allocator's):
    the child would inherit them held, and its first SQLite call, on any file, would wait for
    ever. Here the checkpoint waits in SQLite's busy handler until it gives up."""
    path = tmp_path / "a.db"
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("CREATE TABLE t (v TEXT)")
    locker.execute("BEGIN EXCLUSIVE")  # the checkpoint cannot read the file until its timeout
    monkeypatch.setattr(module, "BUSY_TIMEOUT_SECONDS", 0.5)
    checkpoints = WalCheckpoints(str(path), commits_per_checkpoint=1)

    def given_up() -> bool:
        return "Could not checkpoint the SQLite log" in caplog.text

    def in_child() -> None:
        assert given_up()  # the fork waited for the checkpoint to end

    try:
        with caplog.at_level(logging.WARNING, logger=module.__name__):
            checkpoints.committed()
            # Under way (or, on a starved host, already over: the test then proves nothing).
            assert until(lambda: module._checkpointing.locked() or given_up())
            assert exit_code_in_fork(in_child) == 0
    finally:
        locker.close()
