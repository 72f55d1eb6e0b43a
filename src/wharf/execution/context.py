"""The step context: what a running step may ask about itself via ``get_step_context()``.

The context is bound to the thread (a ``ContextVar``) for exactly the duration of the user
function, so concurrent inline steps each see their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wharf.core.errors import WharfError
from wharf.store.models import PipelineRunRecord, StepRunRecord

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo

_CURRENT: ContextVar[StepContext | None] = ContextVar("wharf_step_context", default=None)


@dataclass(frozen=True)
class StepContext:
    pipeline_name: str
    pipeline_run: PipelineRunRecord
    step_run: StepRunRecord
    output_uris: dict[str, str]
    """Output name -> the URI its artifact will be written to."""
    allocation: ResourceRequestInfo | None = None
    """The step's allocated resources (per demand: pool, class, resource, quantity, target
    settings), when it asked for any."""

    @property
    def step_name(self) -> str:
        return self.step_run.name


def get_step_context() -> StepContext:
    """The context of the step that is running in this thread."""
    context = _CURRENT.get()
    if context is None:
        raise WharfError("get_step_context() can only be called while a step is running.")
    return context


@contextmanager
def step_context(context: StepContext) -> Iterator[StepContext]:
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)
