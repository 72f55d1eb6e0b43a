"""What the store's columns can hold, as field rules its create and update models check before
any write: the longest key and free text, the largest process id, and the constrained string
types ``Key``, ``LongText`` and ``OrchestratorRunId``. One limit on every database: a value
that would not fit one of them is refused before the store is asked.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from wharf.core.names import one_line

MAX_PID = 2**31 - 1  # the largest process id the store holds (a 32-bit signed column)
MAX_KEY_LENGTH = 255
"""Longest key or hash (cache keys, code and content hashes, cron expressions): their columns'."""
MAX_TEXT_LENGTH = 16_383
"""Longest free text (status reasons, URIs, type and materializer paths): MySQL/MariaDB's
``TEXT`` holds 65,535 bytes, which this many characters of up to 4 bytes always fit."""
Key = Annotated[str, Field(max_length=MAX_KEY_LENGTH)]
LongText = Annotated[str, Field(max_length=MAX_TEXT_LENGTH)]


def _orchestrator_run_id(value: str) -> str:
    """An orchestrator's run id: one line (:func:`one_line`) without edge whitespace, which
    MariaDB's unique key would ignore (``'k8s-1 '`` taken for ``'k8s-1'``)."""
    one_line(value)
    if value != value.strip():
        raise ValueError("must not start or end with whitespace")
    return value


OrchestratorRunId = Annotated[str, Field(max_length=255), AfterValidator(_orchestrator_run_id)]
"""The type of ``orchestrator_run_id`` in what creates or changes a run."""
