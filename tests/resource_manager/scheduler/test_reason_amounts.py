"""Amounts in wait and rejection reasons read as a person would write them."""

from __future__ import annotations

from tests.resource_manager.builders import (
    klass,
    mem,
    policy,
    pool,
    rejected,
    request,
    run,
    snapshot,
    waiting,
)

MACHINE = 24683664 * 1024  # a machine's memory as /proc/meminfo gives it, in KiB


def test_a_wait_for_memory_names_human_amounts() -> None:
    p = pool("local", klass("default", memory=MACHINE))
    snap = snapshot([p], [policy("team", p)], [request("big", mem(16)), request("next", mem(8))])
    reason = waiting(run(snap), snap)["next"]
    assert "needs 8 GiB of memory" in reason and "7.5 GiB free" in reason, reason
    assert "KiB" not in reason


def test_a_request_above_capacity_names_the_capacity_in_human_units() -> None:
    p = pool("local", klass("default", memory=MACHINE))
    snap = snapshot([p], [policy("team", p)], [request("huge", mem(64))])
    reason = rejected(run(snap), snap)["huge"]
    assert "23.5 GiB" in reason and "KiB" not in reason, reason
