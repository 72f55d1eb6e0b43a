"""Settings of one Resource Manager service instance.

Owns: :class:`ServiceOptions`. Passed explicitly to the service; nothing reads the environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    sweep_interval: timedelta = timedelta(seconds=30)
    """How often a timer should call ``sweep()``; also the least time every live lease gets to
    renew after a takeover (see :mod:`.leader`)."""
    liveness_interval: timedelta | None = None
    """How often a serving instance records that it is alive (``ResourceManagerService.beat``,
    from the API server's timer). Set, a record older than a few intervals means no instance
    served, and the next transaction extends live leases by that downtime (see :mod:`.leader`).
    None (embedded mode, no timer): only another instance's first cycle after a whole sweep
    interval without a record is taken for a restart."""
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
        if self.liveness_interval is not None and self.liveness_interval <= timedelta(0):
            raise ValueError("The liveness interval must be positive.")
        if self.max_batch < 1:
            raise ValueError("max_batch must be at least 1.")
