"""The run reason built from its steps' outcomes (``failed_steps_reason``)."""

from __future__ import annotations

from wharf.core.enums import ExecutionStatus
from wharf.execution.step_outcome import NAMED_FAILED_STEPS, StepOutcome, failed_steps_reason


def _outcomes(failed: int, succeeded: int = 0) -> dict[str, StepOutcome]:
    steps = {f"ok_{i}": StepOutcome(f"ok_{i}", ExecutionStatus.COMPLETED) for i in range(succeeded)}
    steps |= {f"s_{i}": StepOutcome(f"s_{i}", ExecutionStatus.FAILED) for i in range(failed)}
    return steps


def test_no_failed_step_gives_no_reason() -> None:
    assert failed_steps_reason(_outcomes(0, succeeded=3)) is None


def test_a_few_failed_steps_are_all_named() -> None:
    assert failed_steps_reason(_outcomes(2, succeeded=1)) == "Step(s) failed: s_0, s_1."


def test_a_step_without_a_step_run_is_named_with_its_reason() -> None:
    outcomes = {"b": StepOutcome("b", ExecutionStatus.FAILED, reason="Internal error: boom")}
    assert failed_steps_reason(outcomes) == "Step(s) failed: b (Internal error: boom)."


def test_a_sweep_of_thousands_of_failed_steps_names_a_few_and_counts_the_rest() -> None:
    reason = failed_steps_reason(_outcomes(5000))
    assert reason is not None
    named = ", ".join(f"s_{i}" for i in range(NAMED_FAILED_STEPS))
    assert reason == f"Step(s) failed: {named} and {5000 - NAMED_FAILED_STEPS} more (5000 in all)."
    assert len(reason) < 1000  # a MySQL TEXT column holds 64 KiB
