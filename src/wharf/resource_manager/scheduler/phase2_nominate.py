"""Phase 2: nominate — for each pending request, the pools and policies that could ever admit it.

Owns: :class:`Candidate`, :class:`RoutePlan`, :class:`Nominator` and the rejection reasons.

Invariants:
- rejections are permanent judgements about the configuration (unknown resource or unit, no
  matching pool or policy, a demand larger than any allowed share), never about current usage;
- work is shared between identical requests (demand resolution, request shapes and route
  plans are cached), so cost grows with distinct shapes, not with queue length.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

from wharf.core.enums import ReclaimTolerance
from wharf.core.errors import InputError
from wharf.resource_manager.domain.requests import Demand, ResourceRequest
from wharf.resource_manager.domain.selectors import AttributeSelector, SubjectSet
from wharf.resource_manager.domain.subjects import SubjectChain
from wharf.resource_manager.domain.units import ResourceDescriptor
from wharf.resource_manager.scheduler import demand_stages as stages
from wharf.resource_manager.scheduler import reasons
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView, PoolView
from wharf.resource_manager.scheduler.routes import (
    Route,
    SearchBudgetError,
    SlotChoice,
    search_route,
    zero_concurrency_limit,
)

Options = tuple[tuple[ResourceDescriptor, int], ...]


@dataclass(slots=True)
class RoutePlan:
    policy: PolicyView
    choices: tuple[tuple[SlotChoice, ...], ...]
    primary: Route
    """The best route in an empty pool; what a blocked request claims and is diagnosed on."""
    pinned: bool = False
    """The request has reclaim tolerance ``none``: in reclaimable slots it must fit the
    policy's reserved share (see :mod:`.routes`)."""


@dataclass(slots=True)
class Candidate:
    request: ResourceRequest
    shape: Hashable
    plans: dict[int, list[RoutePlan]]
    """Pool index -> feasible plans in policy order; pools iterate in rank order. Shared
    between candidates of the same shape and policies: never mutate it."""
    fifo: tuple[datetime, int]
    """(enqueue time, request id as int): the FIFO tie-break, compared in C."""
    decided: bool = False
    claimed: bool = False
    deferred: bool = False
    """Already checked this cycle whether a lower-ranked pool admits it now."""
    note: tuple[int, int, str] | None = None
    """(pool index, 1-based queue position, reason) of the wait reported for it: its first
    pool in rank order, or the pool where it claimed capacity."""
    subject_set: SubjectSet | None = None
    """The request's subjects indexed for selectors, built only when a soft claim asks
    (:mod:`.soft_claims`); kept while the candidate serves the same request."""


@dataclass(frozen=True, slots=True)
class _Routed:
    """A request's routes, with the fields they were derived from (kept by reference: the
    working copies of one request share them, so the check is a few identity tests)."""

    subjects: tuple[SubjectChain, ...]
    demands: tuple[Demand, ...]
    pool: str | None
    pool_selector: AttributeSelector | None
    reclaim_tolerance: ReclaimTolerance
    routed: tuple[int, dict[int, list[RoutePlan]]] | str

    def serves(self, request: ResourceRequest) -> bool:
        # Identity first, inline: this runs for every pending request in every cycle.
        subjects, demands, selector = request.subjects, request.demands, request.pool_selector
        return (
            (self.subjects is subjects or self.subjects == subjects)
            and (self.demands is demands or self.demands == demands)
            and self.pool == request.pool
            and (self.pool_selector is selector or self.pool_selector == selector)
            and self.reclaim_tolerance is request.reclaim_tolerance
        )


@dataclass(frozen=True, slots=True)
class _Failure:
    stage: int
    message: str


class Nominator:
    """Nominates pending requests against one catalog, caching demand resolution per demand
    signature, a request's shape per reclaim tolerance and demand signatures, and route plans
    per (policy, request shape)."""

    def __init__(self, catalog: Catalog, budget: int) -> None:
        self.catalog = catalog
        self.budget = budget
        self._options: dict[Hashable, Options | str] = {}
        self._plans: dict[tuple[int, Hashable], RoutePlan | _Failure] = {}
        self._shapes: dict[Hashable, int] = {}
        self._by_signatures: dict[Hashable, tuple[int, tuple[Options, ...]] | str] = {}
        self._routes: dict[Hashable, dict[int, list[RoutePlan]] | str] = {}
        self._by_request: dict[int, _Routed] = {}
        """Routes of the requests nominated since :meth:`new_cycle`, by ``request.id.int``
        (an int hashes in C; a UUID's hash is a Python call, several per request and cycle)."""
        self._previous: dict[int, _Routed] = {}
        """Routes of the requests nominated in the cycle before: those still pending are
        nominated again and carried over; the others (admitted, ended) are dropped with it."""
        self._candidates: dict[int, Candidate] = {}
        self._previous_candidates: dict[int, Candidate] = {}
        """The candidates of this cycle and the one before, by ``request.id.int``: a request
        that is the very same object as in the cycle before (nothing about it changed) gets
        its candidate back with the per-cycle fields reset, instead of a new one (a deep
        queue is mostly such requests, every cycle)."""

    @property
    def shape_count(self) -> int:
        """Distinct request shapes seen, counted by demand signatures (the caches grow with
        them)."""
        return len(self._by_signatures)

    @property
    def request_count(self) -> int:
        """Routes remembered (a request pending in both of the last two cycles counts twice)."""
        return len(self._by_request) + len(self._previous)

    def new_cycle(self) -> None:
        """Start remembering routes for a new cycle; only those of the requests nominated in
        the previous one are kept, so that the routes (and through them the subjects and demands)
        of every request ever nominated do not stay alive for garbage collections to walk."""
        self._previous, self._by_request = self._by_request, {}
        self._previous_candidates, self._candidates = self._candidates, {}

    def nominate(self, request: ResourceRequest) -> Candidate | str:
        """A candidate, or the rejection reason. A candidate handed out in the cycle before is
        reset and handed out again: the caller must be done with that cycle's candidates.

        Resolves every demand to descriptors and exact base quantities; finds the eligible
        pools (the request's ``pool`` or ``pool_selector``, else all) and the matching policies
        (indexed by selector anchors); and for each (pool, policy) builds the candidate slots
        per demand and checks that some route fits an *empty* pool. A request with no such
        route is rejected, with the reason of the most promising policy. A request with
        reclaim tolerance ``none`` qualifies for a never-reclaimable class through its reserved
        share or the unreserved capacity, and for a reclaimable class only through its
        policy's reserved share there (it never borrows, see :func:`.routes.slot_fits`)."""
        key = request.id.int
        known = self._previous_candidates.get(key)
        if known is not None and known.request is request:
            known.decided = known.claimed = known.deferred = False
            known.note = None
            self._candidates[key] = known
            self._by_request[key] = self._previous[key]
            return known
        routed = self._remembered(request)
        if routed is None:
            shaped = self._shaped(request)
            if isinstance(shaped, str):
                return shaped
            routed = self._route(request, *shaped)
            self._by_request[request.id.int] = _Routed(
                request.subjects,
                request.demands,
                request.pool,
                request.pool_selector,
                request.reclaim_tolerance,
                routed,
            )
        if isinstance(routed, str):
            return routed
        shape, routes = routed
        # Positional: built for every pending request whose model changed since last cycle.
        candidate = Candidate(request, shape, routes, (request.created_at, key))
        self._candidates[key] = candidate
        return candidate

    def _remembered(
        self, request: ResourceRequest
    ) -> tuple[int, dict[int, list[RoutePlan]]] | str | None:
        """The request's shape and route table (or why it can never be admitted) as routed in
        this cycle or the one before, if its subjects, demands and pool are unchanged (they
        never change while it is pending, so a queued request is routed once); else None."""
        key = request.id.int
        known = self._by_request.get(key)
        if known is None:
            known = self._previous.get(key)
            if known is None:
                return None
            self._by_request[key] = known
        return known.routed if known.serves(request) else None

    def _shaped(self, request: ResourceRequest) -> tuple[int, tuple[Options, ...]] | str:
        """The request's shape and resolved demands, or why a demand resolves to nothing;
        cached per reclaim tolerance and demand signatures (which determine both)."""
        key = (request.reclaim_tolerance, tuple(d.signature() for d in request.demands))
        shaped = self._by_signatures.get(key)
        if shaped is None:
            shaped = self._by_signatures[key] = self._shape(request)
        return shaped

    def _shape(self, request: ResourceRequest) -> tuple[int, tuple[Options, ...]] | str:
        resolved: list[Options] = []
        for index, demand in enumerate(request.demands):
            options = self._resolve(demand, index)
            if isinstance(options, str):
                return options
            resolved.append(options)
        # Interned to a small int: it keys several per-cycle caches and big tuples hash slowly.
        shape = self._shapes.setdefault(
            (
                request.reclaim_tolerance,
                tuple((d.class_name, _selector_key(d)) for d in request.demands),
                tuple(tuple((d.name, base) for d, base in options) for options in resolved),
            ),
            len(self._shapes),
        )
        return shape, tuple(resolved)

    def _route(
        self, request: ResourceRequest, shape: int, resolved: Sequence[Options]
    ) -> tuple[int, dict[int, list[RoutePlan]]] | str:
        pools = self._eligible_pools(request)
        if isinstance(pools, str):
            return pools
        policies = self.catalog.matcher.match(SubjectSet.of(request.subjects))
        if pools is not self.catalog.pools:
            allowed = {view.index for view in pools}
            policies = [p for p in policies if p.pool_index in allowed]
        if not policies:
            return reasons.no_policy_matches(request.subjects, [v.pool.name for v in pools])
        # Requests of one shape matching the same policies share one (read-only) plan table.
        routes_key = (shape, tuple(policy.index for policy in policies))
        routes = self._routes.get(routes_key)
        if routes is None:
            routes = self._route_table(request, resolved, shape, policies)
            self._routes[routes_key] = routes
        if isinstance(routes, str):
            return routes + self._missing_policy(request, resolved, pools, policies)
        return shape, routes

    def _missing_policy(
        self,
        request: ResourceRequest,
        resolved: Sequence[Options],
        pools: Sequence[PoolView],
        policies: Sequence[PolicyView],
    ) -> str:
        """For a request rejected because no pool of its matching policies offers what it
        demands: the pools that do, which no policy opens to it (" Pool 'lic' offers ..."),
        else ""."""
        matched = {policy.pool_index for policy in policies}
        if any(_offers(self.catalog.pools[index], resolved) for index in matched):
            return ""
        offering = [v.pool.name for v in pools if v.index not in matched and _offers(v, resolved)]
        return " " + reasons.no_policy_in(request.subjects, offering) if offering else ""

    def _route_table(
        self,
        request: ResourceRequest,
        resolved: Sequence[Options],
        shape: Hashable,
        policies: Sequence[PolicyView],
    ) -> dict[int, list[RoutePlan]] | str:
        plans: dict[int, list[RoutePlan]] = {}
        failures: list[tuple[PolicyView, _Failure]] = []
        for policy in policies:
            plan = self._plan(policy, request, resolved, shape)
            if isinstance(plan, _Failure):
                failures.append((policy, plan))
            else:
                plans.setdefault(policy.pool_index, []).append(plan)
        if not plans:
            return self._rejection(request.reclaim_tolerance, failures)
        return plans

    def _resolve(self, demand: Demand, index: int) -> Options | str:
        key = demand.signature()
        cached = self._options.get(key)
        if cached is None:
            cached = self._resolve_uncached(demand)
            self._options[key] = cached
        if isinstance(cached, str):
            return cached.replace("{index}", str(index))
        return cached

    def _resolve_uncached(self, demand: Demand) -> Options | str:
        catalog = self.catalog
        if demand.resource is not None:
            found = catalog.descriptors.get(demand.resource)
            if found is None:
                return (
                    f"Unknown resource '{demand.resource}' in demand #{{index}}; known "
                    f"resources: {', '.join(sorted(catalog.descriptors))}."
                )
            candidates: Sequence[ResourceDescriptor] = [found]
        elif demand.kind is not None:
            candidates = catalog.kinds.get(demand.kind, ())
        else:
            candidates = sorted(catalog.descriptors.values(), key=lambda d: d.name)
        if demand.kind is not None:
            candidates = [d for d in candidates if d.kind == demand.kind]
        if demand.resource_selector is not None:
            selector = demand.resource_selector
            candidates = [d for d in candidates if selector.matches(d.name, d.attributes, d.kind)]
        if not candidates:
            return "No resource descriptor matches demand #{index}."
        options = tuple(
            (d, demand.quantity * d.multiplier(demand.unit))
            for d in candidates
            if d.has_unit(demand.unit)
        )
        if not options:
            try:
                candidates[0].multiplier(demand.unit)
            except InputError as error:
                return f"{str(error).rstrip('.')} (demand #{{index}})."
        return options

    def _eligible_pools(self, request: ResourceRequest) -> Sequence[PoolView] | str:
        if request.pool is not None:
            view = self.catalog.pool_by_key.get(request.pool)
            return [view] if view is not None else reasons.unknown_pool(request.pool)
        if request.pool_selector is not None:
            selector = request.pool_selector
            views = [
                v for v in self.catalog.pools if selector.matches(v.pool.name, v.pool.attributes)
            ]
            return views or reasons.NO_POOL_MATCHES_SELECTOR
        return self.catalog.pools

    def _plan(
        self,
        policy: PolicyView,
        request: ResourceRequest,
        resolved: Sequence[Options],
        shape: Hashable,
    ) -> RoutePlan | _Failure:
        key = (policy.index, shape)
        cached = self._plans.get(key)
        if cached is None:
            cached = self._plan_uncached(policy, request, resolved)
            self._plans[key] = cached
        return cached

    def _plan_uncached(
        self, policy: PolicyView, request: ResourceRequest, resolved: Sequence[Options]
    ) -> RoutePlan | _Failure:
        all_choices: list[tuple[SlotChoice, ...]] = []
        for index, (demand, options) in enumerate(zip(request.demands, resolved, strict=True)):
            choices, failure = self._choices(policy, demand, index, options, request)
            if not choices:
                return failure
            all_choices.append(choices)
        pinned = request.reclaim_tolerance is ReclaimTolerance.NONE
        try:
            primary = search_route(self.catalog, policy, all_choices, None, self.budget, pinned)
        except SearchBudgetError:
            primary = None
        if primary is None:
            return _Failure(
                stages.CAPACITY,
                zero_concurrency_limit(self.catalog, policy, all_choices)
                or "the demands together exceed what its classes, limits, reserved shares or "
                "concurrency limits allow",
            )
        return RoutePlan(policy=policy, choices=tuple(all_choices), primary=primary, pinned=pinned)

    def _choices(
        self,
        policy: PolicyView,
        demand: Demand,
        index: int,
        options: Options,
        request: ResourceRequest,
    ) -> tuple[tuple[SlotChoice, ...], _Failure]:
        """Candidate slots for one demand, best first; else why none qualifies."""
        catalog = self.catalog
        tolerance = request.reclaim_tolerance
        best: tuple[int, int, int] | None = None  # (stage, slot, base) of the furthest miss
        choices: list[SlotChoice] = []
        for class_view in catalog.pools[policy.pool_index].classes:
            for descriptor, base in options:
                slot = class_view.slots.get(descriptor.name)
                if slot is None:
                    continue
                stage = stages.stage_of(catalog, policy, demand, tolerance, slot=slot, base=base)
                if stage is None:
                    choice = SlotChoice(slot, class_view.index, descriptor, base, index)
                    choices.append(choice)
                elif best is None or stage > best[0]:
                    best = (stage, slot, base)
        if choices or best is None:
            return tuple(choices), _Failure(
                stages.OFFERED, f"no class offers the resource of demand #{index}"
            )
        stage, slot, base = best
        message = stages.failure_message(
            catalog,
            policy,
            demand,
            tolerance=tolerance,
            index=index,
            stage=stage,
            slot=slot,
            base=base,
        )
        return (), _Failure(stage, message)

    def _rejection(
        self, tolerance: ReclaimTolerance, failures: Sequence[tuple[PolicyView, _Failure]]
    ) -> str:
        policy, failure = max(failures, key=lambda item: (item[1].stage, -item[0].index))
        head = reasons.NO_POLICY_ADMITTED
        if tolerance is ReclaimTolerance.NONE and any(
            f.stage in stages.RESERVED for _, f in failures
        ):
            head = reasons.NO_RESERVED_SHARE_FOR_NONE
        pool = self.catalog.pools[policy.pool_index].pool.name
        return f"{head} Policy '{policy.policy.name}' in pool '{pool}': {failure.message}."


def _offers(view: PoolView, resolved: Sequence[Options]) -> bool:
    """Some class of the pool offers a resource each demand may take."""
    return all(
        any(descriptor.name in c.slots for c in view.classes for descriptor, _ in options)
        for options in resolved
    )


def _selector_key(demand: Demand) -> str | None:
    if demand.class_selector is None:
        return None
    return demand.class_selector.model_dump_json()
