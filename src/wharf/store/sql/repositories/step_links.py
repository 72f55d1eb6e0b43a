"""The input and output artifact links of step runs, read and written as rows of
``step_run_input`` / ``step_run_output`` keyed by (step run, name), and the step-run record
assembled from a row and its links. Shared by the step-run repository, its heartbeat sweep and
the batch operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, bindparam, literal, select, union_all

from wharf.sql.direct import DirectStatement
from wharf.store.models import StepRunRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import chunks

_IN = t.step_run_input
_OUT = t.step_run_output

Links = dict[UUID, tuple[dict[str, UUID], dict[str, UUID]]]
"""Step run id -> (inputs, outputs)."""


def _links_query(expanding: bool) -> Any:
    """Inputs and outputs of one step run (``step_id``) or of several (``step_ids``)."""
    parts = []
    for kind, table in (("i", _IN), ("o", _OUT)):
        cond = (
            table.c.step_run_id.in_(bindparam("step_ids", expanding=True))
            if expanding
            else table.c.step_run_id == bindparam("step_id")
        )
        parts.append(
            select(
                literal(kind).label("kind"),
                table.c.step_run_id,
                table.c.name,
                table.c.artifact_version_id,
            ).where(cond)
        )
    return union_all(*parts)


_LINKS_OF_ONE = DirectStatement(_links_query(expanding=False))
_LINKS_OF_MANY = _links_query(expanding=True)


def load_links(conn: Connection, step_ids: Sequence[UUID]) -> Links:
    links: Links = {i: ({}, {}) for i in step_ids}
    if len(step_ids) == 1:
        rows: list[Any] = [
            tuple(r.values()) for r in _LINKS_OF_ONE.rows(conn, {"step_id": step_ids[0]})
        ]
    else:
        rows = [r for c in chunks(step_ids) for r in conn.execute(_LINKS_OF_MANY, {"step_ids": c})]
    for kind, step_id, name, version_id in rows:
        links[step_id][0 if kind == "i" else 1][name] = version_id
    return links


def step_record(
    values: dict[str, Any], inputs: dict[str, UUID], outputs: dict[str, UUID]
) -> StepRunRecord:
    return StepRunRecord.model_validate({**values, "inputs": inputs, "outputs": outputs})


def link_rows(step_id: UUID, links: dict[str, UUID]) -> list[dict[str, Any]]:
    return [
        {"step_run_id": step_id, "name": name, "artifact_version_id": version_id}
        for name, version_id in links.items()
    ]
