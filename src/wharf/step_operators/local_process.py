"""The ``local_process`` step operator: runs a step in its own process on this machine, through
the local-process backend (``wharf.execution.local_process``) the ``local_process`` orchestrator
uses too. Configuration: ``python`` — the interpreter that runs steps (default: this one)."""

from __future__ import annotations

from wharf.execution.local_process import LocalProcessBackend
from wharf.step_operators.base import BaseStepOperator


class LocalProcessStepOperator(BaseStepOperator):
    flavor = "local_process"

    def step_backend(self) -> LocalProcessBackend:
        return LocalProcessBackend(self.component.configuration.get("python"))
