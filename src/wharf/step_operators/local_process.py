"""The ``local_process`` step operator: runs a step in its own process on this machine, through
the local-process backend (``wharf.execution.local_process``) the ``local_process`` orchestrator
uses too. Configuration: ``python`` — the interpreter that runs steps (default: this one);
``code_travels`` — run steps as if on another machine, with the pipeline's code from the run's
code archive (default false; for testing what remote orchestrators do); ``stop_grace_period`` —
the seconds a cancelled step's process has to end before it is cut off (default 30; as a
Kubernetes step pod's ``pod_stop_grace_period``)."""

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
from wharf.step_operators.base import BaseStepOperator


class LocalProcessStepOperator(BaseStepOperator):
    flavor = "local_process"

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
