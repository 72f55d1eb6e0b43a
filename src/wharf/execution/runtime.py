"""Choosing where a step runs: inline (a thread of the orchestration process) or isolated
(its own process), as a pure function of the step's settings and the orchestrator.

Rules, first match wins:
1. a step with a step operator is isolated;
2. an explicit ``runtime`` is honoured when the orchestrator can isolate steps;
3. an explicit ``isolated`` on an orchestrator that cannot isolate runs inline, with a warning;
4. otherwise a step is isolated iff the orchestrator can isolate and the step requests basic
   infrastructure resources (cpu, memory, gpu); custom resources alone stay inline.
"""

from __future__ import annotations

from dataclasses import dataclass

from wharf.config.spec import StepConfig
from wharf.core.enums import StepRuntime


@dataclass(frozen=True)
class RuntimeChoice:
    runtime: StepRuntime
    warning: str | None = None


def select_runtime(step_name: str, config: StepConfig, supports_isolated: bool) -> RuntimeChoice:
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
