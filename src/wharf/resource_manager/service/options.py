"""Settings of one Resource Manager service instance.

Owns: :class:`ServiceOptions`. Passed explicitly to the service; nothing reads the environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    sweep_interval: timedelta = timedelta(seconds=30)
    """How often a timer should call ``sweep()``; also the grace every live lease gets when a
    new scheduling leader takes over after no cycle ran for this long (a restart)."""
    lazy_sweep_interval: timedelta = timedelta(seconds=1)
    """A renewal of a pending request runs a cycle when this process has not run one for this
    long, so waiters make progress without a timer (embedded mode)."""
    idempotency_ttl: timedelta = timedelta(hours=24)
    """Idempotency keys older than this are forgotten by the sweep."""
    max_batch: int = 512
    """Most operations combined into one scheduling transaction."""
    route_search_budget: int = 256
    """Passed to the scheduler (:class:`~wharf.resource_manager.scheduler.SchedulerOptions`)."""

    def __post_init__(self) -> None:
        if self.sweep_interval <= timedelta(0) or self.lazy_sweep_interval < timedelta(0):
            raise ValueError("Sweep intervals must be positive.")
        if self.max_batch < 1:
            raise ValueError("max_batch must be at least 1.")
