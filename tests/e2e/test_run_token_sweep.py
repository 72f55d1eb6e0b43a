"""A run's process on a workspace server (replicas behind the balancer of
:mod:`tests.faults.balancer`, as in ``test_outages_replicas``, which records every refused call)
reaches the server with the run's own token, which may not sweep lost runs (the server sweeps
itself): it does not ask, so the server refuses nothing (its heartbeat used to ask once, 403).
"""

from __future__ import annotations

from tests.e2e import steps_lib, test_outages_replicas
from tests.e2e.test_outages_replicas import Replicas
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

_replicas_module = test_outages_replicas._replicas_module  # the replicas, started for this module
replicas = test_outages_replicas.replicas


def test_a_run_token_never_asks_to_sweep_lost_runs(replicas: Replicas) -> None:
    """A run on the server: its process beats and writes with the run's token, and asks for
    nothing the server refuses (its heartbeat used to ask to sweep once, refused 403)."""
    ws = Workspace.open(load_config())
    try:

        @pipeline(name="swept_by_the_server", enable_cache=False)
        def p() -> None:
            steps_lib.double(steps_lib.produce(value=2))

        run = p.run_in(ws)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        assert replicas.balancer.failures == []
    finally:
        ws.close()
