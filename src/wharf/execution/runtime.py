"""Choosing where a step runs: inline (a thread of the orchestration process) or isolated
(its own process), as a pure function of the step's settings and the orchestrator.

Owns :class:`RuntimePolicy`, :func:`select_runtime`, :func:`check_step_operator` and
:func:`check_reclaim_tolerance`.
Invariant: a step with a step operator is always isolated; a step an orchestrator cannot
isolate runs inline, with a warning if it asked to be isolated.
"""

from __future__ import annotations

from dataclasses import dataclass

from wharf.config.spec import StepConfig
from wharf.core.enums import ReclaimTolerance, StepRuntime
from wharf.core.errors import IllegalOperationError, InputError


@dataclass(frozen=True)
class RuntimePolicy:
    """Where an orchestrator runs steps: can it isolate, and does it isolate every static step."""

    can_isolate: bool = False
    """The orchestrator itself can run steps in their own processes."""
    has_isolation: bool = False
    """Some isolation is available (the orchestrator's, or a step operator's)."""
    isolate_all: bool = False
    """Run every step isolated (static pipelines on process orchestrators)."""
    step_operator: str | None = None
    """The name of the stack's step operator (None: the stack has none)."""

    def choose(self, step_name: str, config: StepConfig) -> RuntimeChoice:
        if self.isolate_all and self.has_isolation:
            return RuntimeChoice(StepRuntime.ISOLATED)
        choice = select_runtime(step_name, config, self.can_isolate)
        if choice.runtime is StepRuntime.ISOLATED and not self.has_isolation:
            return RuntimeChoice(StepRuntime.INLINE, choice.warning)
        return choice

    def check(self, step_name: str, config: StepConfig) -> None:
        """Raise ``WharfError`` if the step cannot run as configured: it names a step operator
        the stack does not have, or resource settings its runtime cannot honour."""
        check_step_operator(step_name, config, self.step_operator)
        check_reclaim_tolerance(step_name, config, self.choose(step_name, config).runtime)


@dataclass(frozen=True)
class RuntimeChoice:
    runtime: StepRuntime
    warning: str | None = None


def select_runtime(step_name: str, config: StepConfig, supports_isolated: bool) -> RuntimeChoice:
    """Where the step runs; first match wins:

    1. a step with a step operator is isolated;
    2. an explicit ``runtime`` is honoured when the orchestrator can isolate steps;
    3. an explicit ``isolated`` on an orchestrator that cannot isolate runs inline, with a
       warning;
    4. otherwise a step is isolated iff the orchestrator can isolate and the step demands a
       kind the resource-kind registry (:mod:`wharf.core.resource_kinds`) marks basic
       infrastructure (cpu, memory, gpu); custom resources alone stay inline.
    """
    if config.step_operator is not None:
        return RuntimeChoice(StepRuntime.ISOLATED)
    if config.runtime is not None:
        if supports_isolated or config.runtime is StepRuntime.INLINE:
            return RuntimeChoice(config.runtime)
        return RuntimeChoice(
            StepRuntime.INLINE,
            f"Step '{step_name}' asks to run isolated, but the orchestrator cannot isolate "
            "steps; it runs inline.",
        )
    resources = config.resources
    if supports_isolated and resources is not None and resources.has_basic_resource_demands:
        return RuntimeChoice(StepRuntime.ISOLATED)
    return RuntimeChoice(StepRuntime.INLINE)


def check_step_operator(step_name: str, config: StepConfig, available: str | None) -> None:
    """Refuse a step that names a step operator other than the stack's (``available``; None:
    the stack has no step operator), before the run is recorded, or before a step launched
    at run time starts."""
    wanted = config.step_operator
    if wanted is None or wanted == available:
        return
    has = f"its step operator is '{available}'" if available else "it has no step operator"
    raise InputError(
        f"Step '{step_name}' asks for step operator '{wanted}', which is not in the active "
        f"stack ({has})."
    )


def check_reclaim_tolerance(step_name: str, config: StepConfig, runtime: StepRuntime) -> None:
    """Refuse resource settings that cannot be honoured (checked when a run is created).

    An inline step shares the orchestration process, so it cannot give its resources back
    early: an explicitly reclaimable tolerance is an error. An isolated step that may be
    reclaimed must renew its lease through heartbeats: with heartbeats off it is an error.
    An unset tolerance is never an error (it defaults per runtime).
    """
    resources = config.resources
    if resources is None or resources.reclaim_tolerance is None:
        return
    tolerance = resources.reclaim_tolerance
    if tolerance is ReclaimTolerance.NONE:
        return
    if runtime is StepRuntime.INLINE:
        raise IllegalOperationError(
            f"Step `{step_name}` is configured with reclaim tolerance `{tolerance.value}` but "
            "will run inline. Inline steps are not reclaimable. Configure the step to run "
            "isolated or set reclaim tolerance to `none`."
        )
    if not config.enable_heartbeat:
        raise IllegalOperationError(
            f"Step `{step_name}` is configured with reclaim tolerance `{tolerance.value}` but "
            "heartbeat is disabled. Enable heartbeat or set reclaim tolerance to `none`."
        )
