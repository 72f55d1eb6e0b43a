"""``DagRunner`` with a look-ahead: ready steps claimed without a slot are never launched; those
settled cached end so (their downstream steps become ready), those handed back are launched
once they get a slot; nothing is claimed once the run halted. The look-ahead here settles what
it claims from inside a launch, as the launcher's cache decisions do from inside a batch."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from tests.execution.test_dag_runner import runner, spec, version
from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionMode
from wharf.core.enums import ExecutionStatus as S
from wharf.execution.cache_decisions import ReadySteps
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.launcher import StepOutcome
from wharf.store.models import ArtifactVersionRecord


class CachedAhead:
    """Claims ready steps from inside each launch: ``cached`` ones settle cached, others are
    handed back; records what it claimed and what was launched."""

    def __init__(self, cached: set[str], limit: int = 100, fail_in_launch: str = "") -> None:
        self.cached = cached
        self.limit = limit
        self.fail_in_launch = fail_in_launch
        self.ready: ReadySteps | None = None
        self.claimed: list[str] = []
        self.launched: list[str] = []
        self.lock = threading.Lock()

    def attach(self, ready: ReadySteps | None) -> None:
        self.ready = ready

    def launch(
        self,
        step: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
    ) -> StepOutcome:
        with self.lock:
            self.launched.append(step.name)
        ready = self.ready
        assert ready is not None  # attached while the run lasts
        claimed = ready.claim(self.limit, lambda s: not s.name.startswith("never"))
        names = [s.name for s, _ in claimed]
        with self.lock:
            self.claimed.extend(names)
        hits = {
            n: StepOutcome(n, S.CACHED, {"output": version(n)}) for n in names if n in self.cached
        }
        ready.settle(hits, [n for n in names if n not in hits])
        if step.name == self.fail_in_launch:
            return StepOutcome(step.name, S.FAILED, reason="boom")
        return StepOutcome(step.name, S.COMPLETED, {"output": version(step.name)})


def test_claimed_steps_settle_cached_or_run_once_with_a_slot() -> None:
    edges = {f"s{i}": () for i in range(10)} | {"child": ("s3",), "never": ()}
    ahead = CachedAhead(cached={"s2", "s3", "s5", "child"})
    outcome = runner(spec(edges, max_parallelism=1), ahead.launch, look_ahead=ahead).run()
    statuses = {n: o.status for n, o in outcome.steps.items()}
    assert statuses == {
        **{f"s{i}": S.COMPLETED for i in range(10)},
        **{n: S.CACHED for n in ("s2", "s3", "s5", "child")},
        "never": S.COMPLETED,
    }
    assert sorted(ahead.launched) == sorted(n for n, s in statuses.items() if s is S.COMPLETED)
    assert len(ahead.launched) == len(set(ahead.launched))  # each launched once
    assert "child" in ahead.claimed and "never" not in ahead.claimed
    assert ahead.ready is None  # detached at the end


def test_nothing_is_claimed_once_the_run_halted() -> None:
    edges = {"first": (), **{f"s{i}": () for i in range(5)}}
    ahead = CachedAhead(cached=set(), fail_in_launch="first")
    pipeline = spec(edges, max_parallelism=1, execution_mode=ExecutionMode.STOP_ON_FAILURE)
    outcome = runner(pipeline, ahead.launch, look_ahead=ahead).run()
    assert outcome.steps["first"].status is S.FAILED
    assert ahead.launched == ["first"]  # the others, handed back, never start
    assert sorted(outcome.not_started) == [f"s{i}" for i in range(5)]
