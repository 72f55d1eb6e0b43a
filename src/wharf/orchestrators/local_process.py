"""The ``local_process`` orchestrator: isolated steps run in their own processes on this machine.

Owns :class:`LocalProcessOrchestrator`; its steps run through the local-process backend
(``wharf.execution.local_process``), the one the ``local_process`` step operator uses too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wharf.execution.local_process import (
    CODE_TRAVELS,
    LocalProcessBackend,
    check_configuration,
    configured_flag,
    configured_stop_grace,
)
from wharf.orchestrators.base import BaseOrchestrator


class LocalProcessOrchestrator(BaseOrchestrator):
    """Static pipelines run every step isolated; in dynamic pipelines the runtime rules decide
    (``wharf.execution.runtime``) and inline steps run in threads of the orchestration process.

    Configuration: ``python``, the interpreter that runs steps (default: this one);
    ``code_travels``, run steps as if on another machine, with the pipeline's code from the
    run's code archive (default false; for testing what remote orchestrators do);
    ``stop_grace_period``, the seconds a cancelled step's process has to end before it is cut
    off (default 30; as a Kubernetes step pod's ``pod_stop_grace_period``).
    """

    flavor = "local_process"
    supports_isolated_steps = True
    isolates_static_steps = True

    @classmethod
    def check_configuration(cls, configuration: Mapping[str, Any]) -> None:
        """Refuse an unknown key or an unusable value when the component is registered."""
        check_configuration(configuration)

    @property
    def code_travels(self) -> bool:
        return configured_flag(self.component.configuration, CODE_TRAVELS)

    def step_backend(self) -> LocalProcessBackend:
        configuration = self.component.configuration
        return LocalProcessBackend(
            configuration.get("python"),
            code_travels=self.code_travels,
            stop_grace=configured_stop_grace(configuration),
        )
