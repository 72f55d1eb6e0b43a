"""A schedule's own credential over REST: issuing a schedule token and firing its runs.

A workspace server issues a token scoped to one schedule (``POST /schedules/{id}/token``, by an
account that may create runs in its project) for the processes a cluster starts when the schedule
fires; with it such a process gets or creates its run (``POST /schedules/{id}/runs``) and a run
token for that run, which serves everything after. Not part of the store ports: only a workspace
server has these credentials (an embedded SQL store needs none).
"""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel

from wharf.store.models import PipelineRunRecord
from wharf.store.rest.store import RestStore


class _Token(BaseModel):
    access_token: str


class FiredRun(BaseModel):
    """The run a firing runs and a run token for it."""

    run: PipelineRunRecord
    created: bool
    access_token: str


def issue_schedule_token(store: RestStore, schedule_id: UUID) -> str:
    """A token scoped to schedule ``schedule_id``, issued to ``store``'s credential."""
    path = f"/api/v1/schedules/{schedule_id}/token"
    return store.http.model(_Token, "POST", path).access_token


def fire_schedule(
    store: RestStore, schedule_id: UUID, orchestrator_run_id: str, name: str
) -> FiredRun:
    """The run of the schedule with ``orchestrator_run_id`` (created as ``name``, recorded with
    the schedule, unless a firing with that id created it before) and a run token for it."""
    body = {"orchestrator_run_id": orchestrator_run_id, "name": name}
    path = f"/api/v1/schedules/{schedule_id}/runs"
    return store.http.model(FiredRun, "POST", path, body=body)
