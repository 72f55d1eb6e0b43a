"""Schemathesis against the served ``/openapi.json``: every operation, with generated valid and
invalid requests, as an admin (so requests reach the store) and with path ids of records that
exist half of the time. No response may be a 5xx; every error the application answers is JSON
with a ``detail``. (A request that is not valid HTTP — generated query bytes the HTTP parser
rejects — never reaches the application: uvicorn answers it ``400 Invalid HTTP request
received.`` in plain text.)

Examples per operation and mode are bounded (``MAX_EXAMPLES``) to keep the suite short; search
deeper locally with ``WHARF_SCHEMATHESIS_EXAMPLES=200``. (Schemathesis' own pytest plugin does not
run on this pytest version, so operations are parametrised from the route table and each runs
its own Hypothesis test.)
"""

from __future__ import annotations

import functools
import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.conftest import World
from tests.server.matrix import NEEDS_RESOURCE_MANAGER, ROUTES, UNAUTHENTICATED, Things

MAX_EXAMPLES = int(os.environ.get("WHARF_SCHEMATHESIS_EXAMPLES", "8"))
NOT_HTTP = (400, "Invalid HTTP request received.")
"""uvicorn's answer to bytes its HTTP parser rejects, before any application code runs."""
OPERATIONS = sorted(
    {(r.method, r.template) for r in ROUTES} | UNAUTHENTICATED | NEEDS_RESOURCE_MANAGER
)


@functools.cache
def _schema(url: str) -> Any:
    return schemathesis.openapi.from_url(f"{url}/openapi.json")


def _real_ids(things: Things) -> dict[str, Any]:
    return {
        "user_id": str(things.world.users["member"].id),
        "project_id": str(things.world.a.id),
        "account_id": str(things.account.id),
        "key_id": str(things.fresh_key().id),
        "component_id": str(things.component.id),
        "stack_id": str(things.stack.id),
        "pipeline_id": str(things.pipeline.id),
        "snapshot_id": str(things.snapshot.id),
        "run_id": str(things.run.id),
        "step_id": str(things.step.id),
        "version_id": str(things.version.id),
        "artifact_id": str(things.version.artifact_id),
        "schedule_id": str(things.schedule.id),
    }


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=str)
def test_no_server_errors(world: World, method: str, path: str) -> None:
    operation = _schema(world.url)[path][method]
    names = {p.name for p in operation.path_parameters}
    real = {k: v for k, v in _real_ids(Things(world)).items() if k in names}
    modes = [operation.as_strategy(mode) for mode in schemathesis.GenerationMode]
    if real:
        modes.append(operation.as_strategy(path_parameters=real))
    headers = {"Authorization": f"Bearer {world.credentials['admin']}"}

    @given(case=st.one_of(modes))
    @settings(
        max_examples=MAX_EXAMPLES * len(modes),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case) -> None:
        response = case.call(headers=headers)
        assert response.status_code < 500, (case.method, case.formatted_path, response.text)
        if response.status_code >= 400 and (response.status_code, response.text) != NOT_HTTP:
            answer = response.json()
            assert isinstance(answer, dict) and isinstance(answer.get("detail"), str), answer

    run()
