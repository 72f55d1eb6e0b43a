"""How long SQLite writers wait for the write lock when many processes write one file.

``--writers`` processes (default 16, more than the cores: some are descheduled while others
want the lock, as on a loaded host) each run ``--transactions`` short write transactions on one
WAL-mode file: ``BEGIN IMMEDIATE`` (timed: the wait for the lock), an insert, ``--hold-ms`` of
Python work (a store transaction's own, default 1 ms), a commit; then ``--pause-ms`` asleep
(default 5 ms: a writer's work between its writes). Two
ways of taking the lock, alternately in the same sitting:

- ``busy-handler``: one ``BEGIN IMMEDIATE`` under a 30 s busy timeout (SQLite's busy handler
  sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 ms, then 100 ms between tries);
- ``short-tries``: Wharf's ``wharf.sql.engine._begin_immediate`` (tries of 10 ms in a loop).

Prints, per way, the lock waits' p50 / p99 / max in ms and the transactions per second, with
the host's reference loop before and after; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_speed import host_figures

from wharf.sql.engine import SQLITE_BUSY_TIMEOUT_SECONDS, _begin_immediate

WAYS = ("busy-handler", "short-tries")


def writer(
    path: str, way: str, transactions: int, hold: float, pause: float, start: Any, out: Any
) -> None:
    connection = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_SECONDS, isolation_level=None)
    connection.execute("PRAGMA synchronous = NORMAL")
    waits = []
    start.wait()
    for i in range(transactions):
        began = time.perf_counter()
        if way == "short-tries":
            _begin_immediate(connection)
        else:
            connection.execute("BEGIN IMMEDIATE")
        waits.append(time.perf_counter() - began)
        connection.execute("INSERT INTO t (payload) VALUES (?)", (f"row {i}",))
        until = time.perf_counter() + hold
        while time.perf_counter() < until:
            pass
        connection.execute("COMMIT")
        time.sleep(pause)
    connection.close()
    out.put(waits)


def run(
    way: str, writers: int, transactions: int, hold_ms: float, pause_ms: float
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "contended.db")
        setup = sqlite3.connect(path, isolation_level=None)
        setup.execute("PRAGMA journal_mode = WAL")
        setup.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT)")
        setup.close()
        start, out = multiprocessing.Event(), multiprocessing.Queue()
        procs = [
            multiprocessing.Process(
                target=writer,
                args=(path, way, transactions, hold_ms / 1000, pause_ms / 1000, start, out),
            )
            for _ in range(writers)
        ]
        for proc in procs:
            proc.start()
        began = time.perf_counter()
        start.set()
        waits = [w * 1000 for _ in procs for w in out.get()]
        elapsed = time.perf_counter() - began
        for proc in procs:
            proc.join()
    waits.sort()
    return {
        "way": way,
        "p50_ms": round(statistics.median(waits), 2),
        "p99_ms": round(waits[int(0.99 * (len(waits) - 1))], 1),
        "max_ms": round(waits[-1], 1),
        "transactions_per_s": round(len(waits) / elapsed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--hold-ms", type=float, default=1.0)
    parser.add_argument("--pause-ms", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    before = host_figures()
    results = [
        run(way, args.writers, args.transactions, args.hold_ms, args.pause_ms)
        for _ in range(args.rounds)
        for way in WAYS
    ]
    after = host_figures()
    for result in results:
        print(result)
    print(f"reference loop {before['reference_loop_ms']} / {after['reference_loop_ms']} ms")
    if args.out:
        record = {"benchmark": "sqlite_write_lock", "writers": args.writers}
        record |= {"results": results, "host_before": before, "host_after": after}
        args.out.write_text(json.dumps(record, indent=2))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
