"""The table rows ``wharf stack`` and ``wharf component`` print: a component
(:func:`component_rows`), a stack (:func:`stack_rows`) and the header of ``stack show``
(:class:`StackHeader`).

Invariant: pure rendering of the records it is given. The rows are pydantic models (``emit``
and ``emit_one`` take models), so the command modules import this one only when a command runs:
their ``--help`` builds no model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import BaseModel

if TYPE_CHECKING:
    from wharf.sdk.stacks import StackDescription
    from wharf.store.models import ComponentRecord


class ComponentRow(BaseModel):
    """A component as a table row: its configuration as compact JSON."""

    name: str
    type: str
    flavor: str
    configuration: str
    created: datetime
    id: UUID


def component_rows(records: Iterable[ComponentRecord]) -> list[ComponentRow]:
    return [
        ComponentRow(
            name=r.name,
            type=r.type.value,
            flavor=r.flavor,
            configuration=json.dumps(r.configuration, sort_keys=True) if r.configuration else "",
            created=r.created,
            id=r.id,
        )
        for r in records
    ]


class StackRow(BaseModel):
    """A stack as a table row: ``*`` marks the active stack; components by name."""

    active: str
    name: str
    orchestrator: str | None
    artifact_store: str | None
    step_operator: str | None
    created: datetime
    id: UUID


def stack_rows(stacks: Iterable[StackDescription]) -> list[StackRow]:
    return [
        StackRow(
            active="*" if s.active else "",
            name=s.name,
            orchestrator=s.orchestrator,
            artifact_store=s.artifact_store,
            step_operator=s.step_operator,
            created=s.created,
            id=s.id,
        )
        for s in stacks
    ]


class StackHeader(BaseModel):
    """The first lines of ``stack show``."""

    name: str
    id: UUID
    active: str
    created: datetime
