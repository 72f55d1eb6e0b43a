"""What a cycle derives from the configuration alone, kept between cycles while it is unchanged.

Owns: :class:`Prepared`.

Invariants:
- a prepared index serves only a snapshot whose ``descriptors``, ``pools`` and ``policies``
  are the *very tuples* it was built from, with the same route search budget
  (:meth:`Prepared.serves`), so a stale index is never used;
- every cycle works on a fork of the catalog (nothing a cycle adds is seen by the next); the
  nominator's caches hold only configuration-derived facts and are bounded
  (:data:`MAX_SHAPES`, :data:`MAX_REQUESTS`); the holder state saves work, never a decision;
- not thread-safe: one cycle at a time (the service's combiner is its only user).
"""

from __future__ import annotations

from wharf.resource_manager.scheduler.catalog import Catalog
from wharf.resource_manager.scheduler.holder_state import HolderState
from wharf.resource_manager.scheduler.phase2_nominate import Nominator
from wharf.resource_manager.scheduler.snapshot import Snapshot

MAX_SHAPES = 10_000
MAX_REQUESTS = 100_000
"""The nominator's caches are dropped when they hold more than :data:`MAX_SHAPES` request shapes
or the routes of more than :data:`MAX_REQUESTS` requests, so an endless variety or stream of
requests cannot grow them without bound (per-request routes are kept only for requests
nominated in the previous cycle, see :meth:`Nominator.new_cycle`)."""


class Prepared:
    """The configuration's catalog and a nominator whose caches outlive one cycle.

    Indexing the configuration (the :class:`~.catalog.Catalog`) and nominating request shapes
    (demand resolution, eligible routes per policy) depend only on the descriptors, pools and
    policies: a caller that schedules the same configuration again and again (the service,
    between configuration changes) builds one and passes it to every cycle; otherwise a cycle
    builds its own.
    """

    def __init__(self, snapshot: Snapshot, route_search_budget: int) -> None:
        self._descriptors = snapshot.descriptors
        self._pools = snapshot.pools
        self._policies = snapshot.policies
        self.route_search_budget = route_search_budget
        self.catalog = Catalog(snapshot)
        self.nominator = Nominator(self.catalog, route_search_budget)
        self.holder_state = HolderState(self.catalog)
        """The holders of the latest cycle and their usage (see :mod:`.holder_state`): each
        cycle brings it to exactly its snapshot's holding requests (a request is reused only as
        the very same object), so it saves work and never changes a decision."""

    def serves(self, snapshot: Snapshot, route_search_budget: int) -> bool:
        """Whether this index was built from exactly ``snapshot``'s configuration."""
        return (
            snapshot.descriptors is self._descriptors
            and snapshot.pools is self._pools
            and snapshot.policies is self._policies
            and route_search_budget == self.route_search_budget
        )

    def for_cycle(self) -> tuple[Catalog, Nominator]:
        """A catalog fork (so stand-ins for deleted policies that a cycle adds are not seen by
        the next) and the shared nominator, for one cycle."""
        nominator = self.nominator
        if nominator.shape_count > MAX_SHAPES or nominator.request_count > MAX_REQUESTS:
            self.nominator = Nominator(self.catalog, self.route_search_budget)
        self.nominator.new_cycle()
        return self.catalog.fork(), self.nominator
