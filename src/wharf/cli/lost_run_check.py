"""Whether the embedded SQLite store holds a run whose orchestrating process is gone, read with
the stdlib's ``sqlite3``: no SQLAlchemy and no store records, so that a command can skip the
normal store's sweep of such runs (``wharf.store.lost_runs``) when there is nothing to sweep.

Owns :func:`sqlite_path`, :func:`open_read_only`, :func:`needs_sweep` (on an open connection) and
:func:`may_need_sweep` (on the configured file). Invariants: it never writes, and it answers
True whenever it cannot tell, so that the caller sweeps with the normal store.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from wharf.config.global_config import WharfConfig

BUSY_TIMEOUT = 30.0  # seconds; only WAL recovery or a checkpoint can hold a reader up
_SQLITE_URL_PREFIX = "sqlite:///"
_LIVE_RUNS = (
    "SELECT orchestrator_host, orchestrator_pid, orchestrator_start, heartbeat_deadline "
    "FROM pipeline_run WHERE heartbeat_deadline > '' AND status IN ('running', 'stopping')"
)  # a range of the deadline index: it holds unfinished runs only


def sqlite_time(value: str) -> datetime:
    """SQLAlchemy's SQLite DATETIME text (naive UTC wall time, as ``UtcDateTime`` binds it)."""
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def sqlite_path(config: WharfConfig) -> Path | None:
    """The embedded store's file when ``config`` names a plain ``sqlite:///PATH`` URL, else
    None (a server, or a driver, query string or escape in the URL: the normal store parses
    those)."""
    url = config.store_url
    if config.server_url or not url.startswith(_SQLITE_URL_PREFIX):
        return None
    path = url[len(_SQLITE_URL_PREFIX) :]
    if not path or path == ":memory:" or any(c in path for c in "?#%"):
        return None
    return Path(path)


def needs_sweep(conn: sqlite3.Connection) -> bool:
    """Whether a run's orchestrating process is gone: its heartbeat deadline passed, or it ran
    on this machine and died (one read of the live runs, ``wharf.store.process_identity``)."""
    try:
        rows = conn.execute(_LIVE_RUNS).fetchall()
    except sqlite3.Error:
        return True
    if not rows:
        return False  # no process to look for (its module imports subprocess and socket)
    from wharf.store.process_identity import is_gone

    now = datetime.now(UTC)
    return any(
        sqlite_time(deadline) < now or is_gone(host, pid, start)
        for host, pid, start, deadline in rows
    )


def open_read_only(path: Path) -> sqlite3.Connection:
    """The existing SQLite file ``path``, opened read-only (``mode=ro`` never creates a file),
    with ``PRAGMA query_only`` on; transactions are begun explicitly. Raises sqlite3.Error."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def may_need_sweep(config: WharfConfig) -> bool:
    """:func:`needs_sweep` on ``config``'s embedded store file, opened read-only; True where it
    cannot be read so (no such file or table: False, there is no run)."""
    path = sqlite_path(config)
    if path is None:
        return True
    if not path.is_file():
        return False
    try:
        conn = open_read_only(path)
    except sqlite3.Error:
        return True
    try:
        runs = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'pipeline_run'").fetchone()
        return runs is not None and needs_sweep(conn)  # no table yet: no run
    except sqlite3.Error:
        return True
    finally:
        conn.close()
