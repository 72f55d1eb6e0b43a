"""Running a static pipeline's steps in upstream order, in threads of this process.

Invariants:
- a step starts only after all its upstream steps succeeded (completed or cached);
- at most ``max_parallelism`` steps run at once;
- once the run is stopping (or stopped), no new step starts and steps already running finish:
  the store refuses to create a step run in such a run (``RunStoppingError``), in the same
  write that would start the step, so a stop from any process takes effect at the next step
  boundary without a read per step;
- on a failure: FAIL_FAST starts nothing more and interrupts running steps (they end stopped);
  STOP_ON_FAILURE starts nothing more and lets running steps finish; CONTINUE_ON_FAILURE keeps
  starting every step that does not depend on a failed one.
Steps that never start get no step run record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from uuid import UUID

from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.dag import Dag
from wharf.core.enums import ExecutionMode, ExecutionStatus
from wharf.core.errors import RunStoppingError
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.launcher import StepOutcome
from wharf.execution.stop_check import StopCheck
from wharf.store.models import ArtifactVersionRecord
from wharf.store.ports import Store

logger = logging.getLogger(__name__)

DEFAULT_MAX_PARALLELISM = 8

LaunchFn = Callable[
    [StepSpec, Mapping[str, ArtifactVersionRecord], InterruptibleRegion], StepOutcome
]


@dataclass
class DagOutcome:
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    stop_requested: bool = False
    not_started: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [n for n, o in self.steps.items() if o.status is ExecutionStatus.FAILED]

    def final_status(self) -> tuple[ExecutionStatus, str | None]:
        failed = self.failed
        if failed:
            return ExecutionStatus.FAILED, f"Step(s) failed: {', '.join(failed)}."
        stopped = [
            n
            for n, o in self.steps.items()
            if o.status in (ExecutionStatus.STOPPED, ExecutionStatus.CANCELLED)
        ]
        if self.stop_requested or stopped:
            return ExecutionStatus.STOPPED, "Stopped on request."
        if all(o.succeeded for o in self.steps.values()) and not self.not_started:
            return ExecutionStatus.COMPLETED, None
        return ExecutionStatus.FAILED, "Some steps did not complete."


class DagRunner:
    def __init__(
        self,
        spec: PipelineSpec,
        launch: LaunchFn,
        store: Store,
        run_id: UUID,
        stop_check: StopCheck | None = None,
    ) -> None:
        self._spec = spec
        self._launch = launch
        self._stop = stop_check or StopCheck(store, run_id)
        self._dag = Dag({name: s.upstream for name, s in spec.steps.items()})
        mode = spec.config.execution_mode
        self._mode = mode
        self._parallelism = spec.config.max_parallelism or DEFAULT_MAX_PARALLELISM

    def _stop_requested(self) -> bool:
        return self._stop.requested()

    def _inputs_of(
        self, spec: StepSpec, outcomes: Mapping[str, StepOutcome]
    ) -> dict[str, ArtifactVersionRecord]:
        return {name: outcomes[i.step].outputs[i.output] for name, i in spec.inputs.items()}

    def run(self) -> DagOutcome:
        dag, steps = self._dag, self._spec.steps
        outcome = DagOutcome()
        waiting_on = {n: len(set(dag.upstream[n])) for n in dag.order}
        ready = [n for n in dag.order if waiting_on[n] == 0]
        blocked: set[str] = set()  # descendants of failed steps
        halted = False  # no new steps start (failure or stop)
        running: dict[Future[StepOutcome], tuple[str, InterruptibleRegion]] = {}
        with ThreadPoolExecutor(
            max_workers=min(self._parallelism, max(1, len(steps))),
            thread_name_prefix="wharf-step",
        ) as pool:
            while ready or running:
                while ready and not halted and len(running) < self._parallelism:
                    name = ready.pop(0)
                    region = InterruptibleRegion()
                    future = pool.submit(
                        self._launch,
                        steps[name],
                        self._inputs_of(steps[name], outcome.steps),
                        region,
                    )
                    running[future] = (name, region)
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    name, _region = running.pop(future)
                    result = self._result(name, future)
                    if result is None:  # refused by the store: the run is stopping
                        outcome.stop_requested = halted = True
                        continue
                    outcome.steps[name] = result
                    if result.succeeded:
                        for d in dag.downstream[name]:
                            waiting_on[d] -= 1
                            if waiting_on[d] == 0 and d not in blocked:
                                ready.append(d)
                        continue
                    blocked |= dag.descendants(name)
                    if result.status is ExecutionStatus.FAILED:
                        halted = halted or self._on_failure(name, running)
        outcome.not_started = [n for n in dag.order if n not in outcome.steps]
        outcome.stop_requested = outcome.stop_requested or self._stop_requested()
        return outcome

    def _result(self, name: str, future: Future[StepOutcome]) -> StepOutcome | None:
        """The step's outcome; None if it never started because its run is stopping."""
        try:
            return future.result()
        except RunStoppingError:
            return None
        except Exception as exc:  # a bug or a store failure outside the user-code boundary
            logger.exception("Step '%s' could not be run.", name)
            return StepOutcome(name, ExecutionStatus.FAILED, reason=f"Internal error: {exc}")

    def _on_failure(
        self, name: str, running: Mapping[Future[StepOutcome], tuple[str, InterruptibleRegion]]
    ) -> bool:
        """Apply the execution mode; True if no new steps may start."""
        if self._mode is ExecutionMode.CONTINUE_ON_FAILURE:
            return False
        if self._mode is ExecutionMode.FAIL_FAST:
            for other, region in running.values():
                if region.interrupt(f"Stopped because step '{name}' failed (fail-fast)."):
                    logger.info("Interrupting step '%s' (fail-fast).", other)
        return True
