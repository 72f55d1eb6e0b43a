"""The cache decisions of a run's steps, several steps per store call.

Owns :class:`CacheDecisions`, one per launcher (per run); a step that got its parallelism slot
decides caching with :meth:`CacheDecisions.decide`. Invariants:
- a step run is created (a step starts) only for a step decided after it got its slot, against
  the store state at that decision; a ready step looked at ahead is recorded cached or left
  untouched;
- a call refused because the run is stopping (``RunStoppingError``) refuses every step of it,
  as each alone would be, and so does a store outage that outlasted the call's retries
  (:mod:`wharf.execution.step_writes` rides out a shorter one); any other error of a call
  (all or nothing) has each of its steps decided again alone, so it fails only its own step;
  the steps looked at ahead are handed back to the runner whatever happens;
- a hit is one only while its outputs' files are in the artifact store
  (:mod:`wharf.execution.cached_outputs`): a batch looks its steps up first, recording no hit,
  then records the hits whose outputs are there in one more call (only a batch with hits makes
  it); a hit whose files are gone is a miss, created alone (a step looked at ahead is left
  ready, to be decided again once it gets its slot).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast
from uuid import UUID

from wharf.combining import Combiner
from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import RunStoppingError
from wharf.core.ids import new_id
from wharf.execution import step_writes
from wharf.execution.cached_outputs import Listings, gone_outputs
from wharf.execution.outages import transient
from wharf.execution.services import RunServices
from wharf.execution.step_outcome import StepOutcome
from wharf.store.answers import CachedOrCreated
from wharf.store.models import ArtifactVersionRecord, StepRunCreate

logger = logging.getLogger(__name__)

MAX_BATCH = 200
"""Most steps one batch decides (the steps with a slot first, then those looked at ahead)."""
FIRST_LOOK_AHEAD = 8
"""Ready steps the first batch of a run looks at ahead."""

Inputs = Mapping[str, ArtifactVersionRecord]
ReadyStep = tuple[StepSpec, Inputs]
"""A ready step and its input versions."""


class ReadySteps(Protocol):
    """The runner's ready steps that have no slot yet (the DAG runner's schedule)."""

    def claim(self, limit: int, wanted: Callable[[StepSpec], bool]) -> list[ReadyStep]:
        """Up to ``limit`` ready steps for which ``wanted`` holds, with their inputs; none of
        them starts until it is handed back with :meth:`settle`."""
        ...

    def settle(self, cached: Mapping[str, StepOutcome], released: Sequence[str]) -> None:
        """The claimed steps handed back: those ``cached`` ended with their outcome, those
        ``released`` are ready again."""
        ...


@dataclass(frozen=True)
class _Decision:
    spec: StepSpec
    create: StepRunCreate
    record_hit: bool


class CacheDecisions(Combiner[_Decision]):
    """The cache decisions of one run.

    A decision is the lookup and, on a miss, the creation of the step's first attempt's step
    run (on a hit, the record of the cached step run). Steps that decide at the same moment are
    combined (:class:`wharf.combining.Combiner`) into one ``steps.find_cached_or_create_many``
    call (two if some record their hits in it and some do not: a queued step records its hit
    itself), whose lookup time is taken when the call is made: never before any of its steps
    got its slot.

    Looking ahead: a batch also takes, from the runner's ready steps (:class:`ReadySteps`,
    attached by the DAG runner), steps that have no slot yet and may only be recorded as
    cached: a hit is handed back to the runner as the step's outcome (it starts nothing); a
    miss creates nothing and goes back to the ready steps, to be decided again once it gets
    its slot. How far a batch looks ahead adapts to the last batch: twice its hits while every
    step looked at ahead was cached, only the hits found ahead after a miss among them, up to
    :data:`MAX_BATCH` steps.

    ``prepare``: the first attempt's step run of a ready step looked at ahead, or None if it
    is not to be decided ahead (its cache key cannot be computed); ``wanted``: whether a ready
    step may be looked at ahead at all (a cacheable step that asks for no resources)."""

    def __init__(
        self,
        services: RunServices,
        run_id: UUID,
        *,
        record_specs: bool,
        prepare: Callable[[StepSpec, Inputs], StepRunCreate | None],
        wanted: Callable[[StepSpec], bool],
    ) -> None:
        super().__init__(MAX_BATCH)
        self._services = services
        self._run_id = run_id
        self._record_specs = record_specs
        self._prepare = prepare
        self._wanted = wanted
        self._ready: ReadySteps | None = None
        self._look_ahead = FIRST_LOOK_AHEAD  # only the thread running a batch changes it
        self._listings = Listings()  # the artifact store's, shared by the run's decisions

    def attach(self, ready: ReadySteps | None) -> None:
        """Look ahead among ``ready`` from the next batch on (None: stop looking ahead)."""
        self._ready = ready

    def decide(self, spec: StepSpec, create: StepRunCreate, *, record_hit: bool) -> CachedOrCreated:
        """The step's decision, made in the next batch: a hit (recorded if ``record_hit``),
        else its step run ``create`` as created. Raises the step's error."""
        return cast(CachedOrCreated, self.submit(_Decision(spec, _named(create), record_hit)))

    def publish(self, spec: StepSpec, create: StepRunCreate, found: CachedOrCreated) -> StepOutcome:
        """Record ``create`` as reusing the step run found (unless the lookup did) and take
        its outputs: those the lookup sent, else remembered by this process, else read."""
        services = self._services
        store = services.store
        record = found.recorded
        if record is None:
            own = create.model_copy(update={"spec": spec if self._record_specs else None})
            record = step_writes.create(services, own.reusing(found.step))
        outputs = services.versions.outputs_of(store, found.step, found.outputs.values())
        services.progress.step_cached(self._run_id, spec.name, found.step.run_id)
        return StepOutcome(spec.name, ExecutionStatus.CACHED, outputs, record)

    # ------------------------------------------------------------------ batches

    def run_batch(self, operations: list[_Decision]) -> Sequence[Any]:
        # One store call per ``record_hit`` value: the steps that record their hits (with the
        # steps looked at ahead), then the others; each call all or nothing on its own.
        ready = self._ready  # settled where claimed, even if the runner detaches meanwhile
        recording = [o for o in operations if o.record_hit]
        others = [o for o in operations if not o.record_hit]
        ahead = self._claim_ahead(ready, MAX_BATCH - len(operations)) if recording else []
        outcomes = self._group(recording, ahead, ready) if recording else []
        outcomes += self._group(others, [], None) if others else []
        by_operation = dict(zip(map(id, recording + others), outcomes, strict=True))
        return [by_operation[id(o)] for o in operations]

    def _group(
        self, operations: list[_Decision], ahead: list[_Decision], ready: ReadySteps | None
    ) -> list[Any]:
        """The outcomes of ``operations`` decided in one store call (see :meth:`_decide`)."""
        try:
            return self._decide(operations, ahead, ready)
        except RunStoppingError as error:  # every step of it is refused, as it would be alone
            return [error] * len(operations)
        except Exception as error:  # each step decided alone: an error fails only its own
            if transient(error):  # alone, each would wait out the same outage again
                return [error] * len(operations)
            if len(operations) == 1 and not ahead:
                return [error]
            return [self._alone(operation) for operation in operations]

    def _alone(self, operation: _Decision) -> Any:
        try:
            return self._decide([operation], [], None)[0]
        except Exception as error:  # the outcome its caller raises
            return error

    def _claim_ahead(self, ready: ReadySteps | None, room: int) -> list[_Decision]:
        limit = min(self._look_ahead, room)
        if ready is None or limit <= 0:
            return []
        ahead: list[_Decision] = []
        unprepared: list[str] = []
        for spec, inputs in ready.claim(limit, self._wanted):
            try:
                create = self._prepare(spec, inputs)
            except Exception:  # decided when it gets its slot instead
                create = None
            if create is None:
                unprepared.append(spec.name)
            else:
                ahead.append(_Decision(spec, _named(create), record_hit=True))
        if unprepared:
            ready.settle({}, unprepared)
        return ahead

    def _decide(
        self, operations: list[_Decision], ahead: list[_Decision], ready: ReadySteps | None
    ) -> list[Any]:
        """The answers of ``operations`` (all with one ``record_hit`` value; one store call
        with the steps ``ahead``); the steps ``ahead`` (claimed from ``ready``) settled there,
        whatever happens."""
        cached: dict[str, StepOutcome] = {}
        try:
            decisions = operations + ahead
            answers = self._checked(decisions, slotted=len(operations))
            for decision, found in zip(ahead, answers[len(operations) :], strict=True):
                if found is not None:
                    cached[decision.spec.name] = self._published(decision, found)
            self._adapt(answers, len(operations))
            return answers[: len(operations)]
        finally:
            if ahead and ready is not None:
                released = [d.spec.name for d in ahead if d.spec.name not in cached]
                ready.settle(cached, released)

    def _checked(self, decisions: list[_Decision], *, slotted: int) -> list[Any]:
        """The answers of ``decisions`` (one ``record_hit`` value; the first ``slotted`` have a
        slot): looked up recording no hit (misses with a slot created: raises only if this
        call does), the hits whose outputs are gone from the artifact store made misses, then
        the others recorded (if asked) in one more call. Past the lookup a step's error is its
        answer (a step looked at ahead is then answered None), so no step run created is lost."""
        answers = self._store_call(decisions, slotted=slotted, record_hit=False)
        hits = [i for i, found in enumerate(answers) if found is not None and not found.created]
        if not hits:
            return answers
        try:
            found = [answers[i] for i in hits]
            gone = gone_outputs(self._services, found, self._listings)
        except Exception:  # not knowing, keep the hits (a load tells what is wrong)
            logger.exception("Could not check that the outputs of cached steps exist.")
            gone = [None] * len(hits)
        kept = []
        for i, uri in zip(hits, gone, strict=True):
            if uri is None:
                kept.append(i)
            else:
                answers[i] = self._gone(decisions[i], answers[i], uri, slotted=i < slotted)
        if kept and decisions[0].record_hit:
            recorded = self._recorded([decisions[i] for i in kept])
            for i, record in zip(kept, recorded, strict=True):
                if i >= slotted:  # looked at ahead: left ready unless recorded
                    answers[i] = record if isinstance(record, CachedOrCreated) else None
                elif record is None:  # no longer cached: decided again
                    answers[i] = self._answer_alone(decisions[i])
                else:
                    answers[i] = record
        return answers

    def _recorded(self, decisions: list[_Decision]) -> list[Any]:
        """The hits of ``decisions`` recorded (None: no longer cached), in one call; on its
        error each step's own answer (the error, or its decision again alone)."""
        try:
            return self._store_call(decisions, slotted=0, record_hit=True)
        except Exception as error:
            if isinstance(error, RunStoppingError) or transient(error) or len(decisions) == 1:
                return [error] * len(decisions)
            return [self._answer_alone(decision) for decision in decisions]

    def _answer_alone(self, decision: _Decision) -> Any:
        try:
            return self._checked([decision], slotted=1)[0]
        except Exception as error:  # the outcome its caller raises
            return error

    def _gone(self, decision: _Decision, found: CachedOrCreated, uri: str, *, slotted: bool) -> Any:
        """The answer of a step whose cached step run's outputs are gone: a miss, created if
        the step has its slot (else left for its own decision, which says so); the error of
        its creation if that fails."""
        if not slotted:
            return None
        logger.warning(
            "Step '%s' is not cached: an output of step run %s (%s) is gone from the artifact "
            "store; the step runs.",
            decision.spec.name,
            found.step.id,
            uri,
        )
        try:
            created = step_writes.create(self._services, decision.create)
        except Exception as error:  # the outcome its caller raises
            return error
        return CachedOrCreated(step=created, created=True)

    def _store_call(
        self, decisions: list[_Decision], *, slotted: int, record_hit: bool
    ) -> list[Any]:
        """One ``find_cached_or_create_many`` of ``decisions``: the first ``slotted`` have a
        slot and are created on a miss, the others not; hits recorded if ``record_hit``."""
        services = self._services
        now = services.clock()  # the batch's lookup time: after every step of it got its slot
        return step_writes.find_cached_or_create_many(
            services,
            [d.create for d in decisions],
            services.project_id,
            now,
            record_hit=record_hit,
            create=[i < slotted for i in range(len(decisions))],
        )

    def _published(self, decision: _Decision, found: CachedOrCreated) -> StepOutcome:
        """The outcome of a step found cached ahead (its cached step run is recorded)."""
        try:
            return self.publish(decision.spec, decision.create, found)
        except Exception as exc:  # recorded cached: it may not be decided again
            logger.exception("Cached step '%s' could not be published.", decision.spec.name)
            reason = f"Internal error: {exc}"
            return StepOutcome(decision.spec.name, ExecutionStatus.FAILED, reason=reason)

    def _adapt(self, answers: Sequence[Any], slotted: int) -> None:
        hits = sum(1 for a in answers if isinstance(a, CachedOrCreated) and not a.created)
        ahead = answers[slotted:]
        ahead_hits = sum(1 for a in ahead if a is not None)
        if ahead_hits < len(ahead):  # some step looked at ahead missed: look less far
            self._look_ahead = ahead_hits
        else:
            self._look_ahead = min(MAX_BATCH, 2 * hits)


def _named(create: StepRunCreate) -> StepRunCreate:
    """``create`` with its id chosen, so each store call of its decision (the lookup, the
    record of its hit, a decision again after an error) is the same step run's."""
    return create if create.id is not None else create.model_copy(update={"id": new_id()})
