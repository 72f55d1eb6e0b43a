"""The body of the reclaim cut-off tests' step whose code ignores the stop (issue 27 §3), shared
by the local test (``tests/e2e/test_reclaim_cutoff.py``, which imports it) and the Kubernetes
one (``tests/integrations/kubernetes/test_reclaim_cutoff.py``, which copies this file into its
bed's project: step pods reach code only through the run's code archive).

Invariant: this module imports only the standard library, so that the copy runs anywhere.
"""

from __future__ import annotations

import pathlib
import time


def ignore_the_stop(path: str, started: str, marker: str, limit: float) -> int:
    """Hold on until ``path`` exists (at most ``limit`` s), swallowing every interrupt (as code
    that catches ``BaseException`` in a loop would). Writes ``started`` as it begins; appends
    ``interrupted`` to ``marker`` for each interrupt swallowed and ``left`` when it returns (a
    process ended from outside never writes ``left``)."""
    pathlib.Path(started).write_text("started")
    deadline = time.monotonic() + limit
    try:
        while not pathlib.Path(path).exists() and time.monotonic() < deadline:
            try:
                time.sleep(0.05)
            except BaseException:  # the stop: ignored
                with open(marker, "a") as out:
                    out.write("interrupted\n")
        return 1
    finally:
        with open(marker, "a") as out:
            out.write("left\n")
