"""The Resource Manager's scheduler: a pure, deterministic cycle ``(snapshot, now) -> decisions``.

Public API: :func:`schedule` (one cycle; :class:`CycleDecisions`), :func:`explain` (why one
request is pending), :func:`apply_decisions` (the in-memory application of a cycle, for
simulations and tests), :func:`continue_cycle` (the decisions for requests appended since the
last cycle), :class:`Snapshot`, :class:`SchedulerOptions` and :class:`Prepared` (the
configuration's index, reusable by every cycle over the same configuration). The phases live
in numbered modules (``phase1_expire`` … ``phase6_admit``), see :mod:`.cycle`.

Invariant: imports only :mod:`wharf.resource_manager.domain` and :mod:`wharf.core`
(import-linter checks).
"""

from wharf.resource_manager.scheduler.apply import apply_decisions
from wharf.resource_manager.scheduler.continuation import continue_cycle
from wharf.resource_manager.scheduler.cycle import CycleRun, run_cycle, schedule
from wharf.resource_manager.scheduler.decisions import (
    Admission,
    CycleDecisions,
    Expiry,
    Preemption,
    Rejection,
    Wait,
)
from wharf.resource_manager.scheduler.explain import Explanation, QueuePosition, explain
from wharf.resource_manager.scheduler.prepared import Prepared
from wharf.resource_manager.scheduler.reasons import (
    NO_POLICY_ADMITTED,
    NO_POLICY_MATCHES,
    NO_POOL_MATCHES_SELECTOR,
    NO_RESERVED_SHARE_FOR_NONE,
)
from wharf.resource_manager.scheduler.snapshot import LiveSplit, SchedulerOptions, Snapshot

__all__ = [
    "NO_POLICY_ADMITTED",
    "NO_POLICY_MATCHES",
    "NO_POOL_MATCHES_SELECTOR",
    "NO_RESERVED_SHARE_FOR_NONE",
    "Admission",
    "CycleDecisions",
    "CycleRun",
    "Expiry",
    "Explanation",
    "LiveSplit",
    "Preemption",
    "Prepared",
    "QueuePosition",
    "Rejection",
    "SchedulerOptions",
    "Snapshot",
    "Wait",
    "apply_decisions",
    "continue_cycle",
    "explain",
    "run_cycle",
    "schedule",
]
