"""A pipeline call whose run creation's answer is lost, on replicas (two ``wharf server serve``
processes on PostgreSQL behind the round-robin balancer of :mod:`tests.faults.balancer`, as in
``test_outages_replicas``): the replica that committed the run is killed -9 before it answers,
or its answer is dropped on the way. The call repeats the creation under the run's and
snapshot's ids it chose beforehand, the other replica answers the run already recorded, and the
run completes, once: one run and one snapshot in the pipeline.
"""

from __future__ import annotations

import logging

import pytest

from tests.e2e import steps_lib, test_outages_replicas
from tests.e2e.test_outages_engine import finished, run_in_thread, steps_of
from tests.e2e.test_outages_replicas import Replicas
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunFilter

RUNS = "/api/v1/runs/record"  # a pipeline call's records, one transaction
_replicas_module = test_outages_replicas._replicas_module  # the replicas, started for this module
replicas = test_outages_replicas.replicas


@pytest.mark.parametrize("replica", ["killed", "answer-dropped"])
def test_a_run_whose_creation_answer_is_lost_is_created_once_and_completes(
    replicas: Replicas, replica: str, caplog: pytest.LogCaptureFixture
) -> None:
    lost: list[str] = []

    def lose_the_creation(method: str, path: str, upstream: str) -> bool:
        if method != "POST" or path != RUNS or lost:
            return False
        lost.append(upstream)
        if replica == "killed":
            replicas.server_at(upstream).stop()  # SIGKILL, after its commit
        return True

    caplog.set_level(logging.WARNING, logger="wharf")
    ws = Workspace.open(load_config())
    try:
        name = f"created_once_{replica.replace('-', '_')}"

        @pipeline(name=name, enable_cache=False)
        def p() -> None:
            steps_lib.double(steps_lib.produce(value=3))

        replicas.balancer.on_answered = lose_the_creation
        thread, result = run_in_thread(p, ws)
        run = finished(thread, result)
        assert lost, "no answer was lost"
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        assert {n: s.status for n, s in steps_of(ws, run.id).items()} == {
            "produce": ExecutionStatus.COMPLETED,
            "double": ExecutionStatus.COMPLETED,
        }
        runs = ws.store.runs.list(RunFilter(pipeline_id=run.pipeline_id)).items
        assert [r.id for r in runs] == [run.id]  # one run: the repeat got the one recorded
        assert ws.store.snapshots.get(run.snapshot_id).id == run.snapshot_id
        creations = [f for f in replicas.balancer.failures if f[:2] == ("POST", RUNS)]
        assert [f[2] for f in creations] == [502], creations  # the lost answer alone
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == []
    finally:
        ws.close()
