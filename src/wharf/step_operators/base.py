"""The step operator interface: the step backend that runs the steps naming this operator.

A step operator runs single steps somewhere else (another process, a cluster) through a step
backend (``wharf.execution.backends``): the orchestrator that runs the pipeline submits the
steps that name the operator to it, polls them, cancels and cleans them up.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from wharf.execution.backends import StepBackend
from wharf.store.models import ComponentRecord


class BaseStepOperator(ABC):
    flavor: ClassVar[str]

    def __init__(self, component: ComponentRecord) -> None:
        self.component = component

    @property
    def code_travels(self) -> bool:
        """Its steps run outside this file system: they import the pipeline's code from the
        run's code archive (``wharf.execution.code_archive``)."""
        return False

    @abstractmethod
    def step_backend(self) -> StepBackend[Any]:
        """Where this operator runs steps; a new backend per call (each run gets its own)."""
