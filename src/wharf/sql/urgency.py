"""Which threads of this process do latency-critical store writes right now.

Owns :func:`set_urgent` and :func:`is_urgent`: a per-thread flag, set while a step that holds
a resource allocation does its bookkeeping (:mod:`wharf.execution.resources.holders_first`)
and read by the SQL engine, which gives such writers the next write turn on a SQLite file
(:mod:`wharf.sql.write_turns`). Standard library only: marking a thread costs a process
without a SQL store nothing.
"""

from __future__ import annotations

import threading

_flag = threading.local()


def set_urgent(urgent: bool) -> None:
    """Mark (or unmark) the calling thread's store writes as urgent."""
    _flag.urgent = urgent


def is_urgent() -> bool:
    """Whether the calling thread's store writes are urgent now."""
    return bool(getattr(_flag, "urgent", False))
