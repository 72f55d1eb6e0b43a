"""Matrix rows: a schedule's token and its firings (what the token itself may do:
``test_schedule_tokens``)."""

from __future__ import annotations

from tests.server.things import Route

R = Route
SCHEDULE_TOKEN_ROUTES: list[Route] = [
    R(
        "POST",
        "/api/v1/schedules/{schedule_id}/token",
        "write_a",
        200,
        lambda t: f"/api/v1/schedules/{t.schedule.id}/token",
    ),
    R(
        "POST",
        "/api/v1/schedules/{schedule_id}/runs",
        "write_a",
        200,
        lambda t: f"/api/v1/schedules/{t.schedule.id}/runs",
        lambda t: {"orchestrator_run_id": t.name("fired"), "name": t.name("fired")},
    ),
]
