"""A pipeline call whose run creation's answer is lost, on replicas (two ``wharf server serve``
processes on PostgreSQL behind the round-robin balancer of :mod:`tests.faults.balancer`, as in
``test_outages_replicas``): the replica that committed the run is killed -9 before it answers,
or its answer is dropped on the way. The call repeats the creation under the run's and
snapshot's ids it chose beforehand, the other replica answers the run already recorded, and the
run completes, once: one run and one snapshot in the pipeline. Both replicas down for longer
than the run's liveness timeout: the call repeats on, and no sweep takes the run for lost.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import pytest

from tests.e2e import steps_lib, test_outages_replicas
from tests.e2e.test_outages_engine import finished, run_in_thread, steps_of
from tests.e2e.test_outages_replicas import Replicas
from tests.waiting import wait_for
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.execution.heartbeat import liveness_timeout_for
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


HEARTBEAT_SECONDS = 1.0  # a liveness timeout of 6 s, so the outage below outlasts it


def test_a_run_created_through_an_outage_longer_than_its_liveness_timeout_is_not_lost(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both server replicas die right after committing the run (its answer lost) and stay down
    for longer than the run's liveness timeout; when they are back, a sweeper of another machine
    ends the runs whose deadline passed before the call's repeat gets through. The call goes on
    repeating (up to two minutes), the sweep finds nothing lost (the run's first window covers
    its creator's retries), and the run completes, once. Before, the call gave up after the
    liveness timeout and the run was swept as lost."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", str(HEARTBEAT_SECONDS))
    outage = liveness_timeout_for(HEARTBEAT_SECONDS) + 2
    killed_at: list[float] = []
    outage_over = threading.Event()

    def kill_both_after_the_commit(method: str, path: str, upstream: str) -> bool:
        if method != "POST" or path != RUNS or outage_over.is_set():
            return False
        if not killed_at:
            for server in replicas.servers:
                server.stop()  # SIGKILL, the run committed
            killed_at.append(time.monotonic())
        return True  # the answer is lost; a repeat's too until the sweep below is done

    ws = Workspace.open(load_config())
    try:

        @pipeline(name="created_through_an_outage", enable_cache=False)
        def p() -> None:
            steps_lib.double(steps_lib.produce(value=3))

        replicas.balancer.on_answered = kill_both_after_the_commit
        thread, result = run_in_thread(p, ws)
        wait_for(lambda: killed_at, "the run's creation", 60)
        wait_for(lambda: time.monotonic() > killed_at[0] + outage, "the outage", outage + 5)
        for server in replicas.servers:
            server.launch()
        for server in replicas.servers:
            server.wait_until_healthy()
        swept = ws.store.runs.fail_lost_orchestrators(datetime.now(UTC))  # another machine's
        outage_over.set()
        run = finished(thread, result)
        assert [lost.run.id for lost in swept] == []
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        runs = ws.store.runs.list(RunFilter(pipeline_id=run.pipeline_id)).items
        assert [r.id for r in runs] == [run.id]
    finally:
        ws.close()
