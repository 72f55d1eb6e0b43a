"""How long the store waits for a heartbeat before it declares the sender lost, and so which
heartbeat intervals Wharf accepts.

Owns :func:`liveness_timeout_for` (the heartbeats of ``wharf.execution`` use it) and the bounds
derived from it. Invariants: for an interval of at most
:data:`LONGEST_HEARTBEAT_INTERVAL_SECONDS`, every liveness window a run sends fits
:data:`LONGEST_LIVENESS_WINDOW_SECONDS`, the longest the store records for a run's orchestrating
process (the first window too, which a pipeline call's creation of its run records as the
liveness timeout plus a creation patience of at least that timeout:
``wharf.execution.run_heartbeat.creating_process``), and a heartbeat's wait between two beats
fits :data:`LONGEST_POLL_SECONDS`. No interval is shorter than
:data:`SHORTEST_HEARTBEAT_INTERVAL_SECONDS`.
"""

from __future__ import annotations

LIVENESS_INTERVALS = 5
"""The liveness timeout spans this many intervals: four missed regular beats, and the one due."""
LIVENESS_SLACK_SECONDS = 1.0
"""Added to the timeout, so that transient store errors (retried sooner than the interval)
never fail a healthy step."""

LONGEST_LIVENESS_WINDOW_SECONDS = 366 * 86400
"""The longest liveness window the store takes for a run's orchestrating process (a leap year;
``wharf.store.models.OrchestratorProcess`` refuses a longer one)."""
CREATION_WINDOW_TIMEOUTS = 2
"""A run's first window (its creation's) spans up to this many liveness timeouts, once the
timeout is longer than the creation's fixed patience (two minutes)."""

LONGEST_LIVENESS_TIMEOUT_SECONDS = LONGEST_LIVENESS_WINDOW_SECONDS / CREATION_WINDOW_TIMEOUTS
LONGEST_INTERVAL_THE_STORE_TAKES = (
    LONGEST_LIVENESS_TIMEOUT_SECONDS - LIVENESS_SLACK_SECONDS
) / LIVENESS_INTERVALS
"""The longest interval whose liveness timeout (:func:`liveness_timeout_for`) the creation of a
run can still send twice over."""

LONGEST_POLL_SECONDS = (2**31 - 1) / 1000
"""The longest wait of a selector (a run's heartbeat waits on one between beats, to be woken by a
stop: ``wharf.execution.run_wake``): ``poll`` and ``epoll`` take a C ``int`` of milliseconds."""

LONGEST_HEARTBEAT_INTERVAL_SECONDS = min(LONGEST_INTERVAL_THE_STORE_TAKES, LONGEST_POLL_SECONDS)
"""The longest heartbeat interval (``WHARF_HEARTBEAT_INTERVAL``)."""
SHORTEST_HEARTBEAT_INTERVAL_SECONDS = 0.1
"""The shortest heartbeat interval: each beat is a store write per running step and run, so a
shorter one only loads the store (``1e-9`` would have every step write in a loop), while the
liveness timeout it buys (:func:`liveness_timeout_for`) stays over a second."""


def liveness_timeout_for(interval: float) -> float:
    """How long the store waits for the next beat before declaring the step (or the run's
    orchestrating process) lost: four missed regular beats plus a second of slack, so transient
    store errors (retried sooner than the interval) never fail a healthy step."""
    return LIVENESS_INTERVALS * interval + LIVENESS_SLACK_SECONDS
