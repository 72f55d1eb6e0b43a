"""Runs' liveness records as a state machine (Hypothesis, SQLite, fake clock).

Model: a run started in a process has a deadline (last beat + timeout) until it ends; a beat
moves it only while the run is running or stopping; the sweep ends failed exactly the live runs
whose deadline passed or that were reported orphaned, minus the spared, with every unfinished
step; nothing else changes.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from tests.conftest import FakeClock
from tests.store.conftest import make_world
from wharf.core.enums import ExecutionStatus as S
from wharf.store.models import OrchestratorProcess, RunUpdate, StepRunCreate
from wharf.store.sql import SqlStore

TIMEOUT = 30.0
LIVE = (S.RUNNING, S.STOPPING)


def process(timeout: float = TIMEOUT) -> OrchestratorProcess:
    return OrchestratorProcess(host="h", pid=7, start="b:1", liveness_timeout_seconds=timeout)


class RunLivenessMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="wharf-liveness-"))
        self.clock = FakeClock()
        self.store = SqlStore.open(f"sqlite:///{self.dir / 'store.db'}", clock=self.clock)
        self.world = make_world(self.store)
        self.status: dict[UUID, S] = {}
        self.deadline: dict[UUID, datetime | None] = {}
        self.steps: dict[UUID, list[UUID]] = {}

    runs = Bundle("runs")

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(target=runs, recorded=st.booleans(), steps=st.integers(0, 2))
    def start(self, recorded: bool, steps: int) -> UUID:
        run = self.world.run(status=S.RUNNING, orchestrator=process() if recorded else None)
        self.status[run.id] = S.RUNNING
        self.deadline[run.id] = run.heartbeat_deadline
        if recorded:
            assert run.heartbeat_deadline == run.created + timedelta(seconds=TIMEOUT)
        self.steps[run.id] = [
            self.store.steps.create(
                StepRunCreate(run_id=run.id, name=f"s{i}-{uuid.uuid4().hex[:6]}", status=S.RUNNING)
            ).id
            for i in range(steps)
        ]
        return run.id

    @rule(run_id=runs, timeout=st.sampled_from([1.0, TIMEOUT, 120.0]))
    def beat(self, run_id: UUID, timeout: float) -> None:
        response = self.store.runs.update_heartbeat(run_id, process(timeout))
        assert response.status is self.status[run_id]
        if self.status[run_id] in LIVE:
            self.deadline[run_id] = self.store.runs.get(run_id).last_heartbeat + timedelta(  # type: ignore[operator]
                seconds=timeout
            )

    @rule(seconds=st.sampled_from([0.5, 10.0, 40.0]))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(run_id=runs, to=st.sampled_from([S.STOPPING, S.COMPLETED, S.FAILED]))
    def change(self, run_id: UUID, to: S) -> None:
        current = self.status[run_id]
        allowed = {S.RUNNING: {S.STOPPING, S.COMPLETED, S.FAILED}, S.STOPPING: {S.FAILED}}
        if to not in allowed.get(current, set()):
            return
        self.store.runs.update(run_id, RunUpdate(status=to))
        self.status[run_id] = to
        if to.is_finished:
            self.deadline[run_id] = None

    @rule(data=st.data())
    def sweep(self, data: st.DataObject) -> None:
        known = sorted(self.status)
        orphaned = data.draw(st.lists(st.sampled_from(known), unique=True)) if known else []
        spared = data.draw(st.lists(st.sampled_from(known), unique=True)) if known else []
        now = self.clock.now
        expected = {
            run_id
            for run_id, status in self.status.items()
            if status in LIVE
            and (deadline := self.deadline[run_id]) is not None
            and (deadline < now or run_id in orphaned)
            and run_id not in spared
        }
        lost = self.store.runs.fail_lost_orchestrators(now, orphaned, spared)
        assert {r.run.id for r in lost} == expected
        for ended in lost:
            run_id = ended.run.id
            assert ended.run.status is S.FAILED
            assert ended.run.status_reason and ended.run.status_reason.startswith(
                "orchestrator lost (last seen "
            )
            assert {s.id for s in ended.steps} == set(self.steps[run_id])
            self.status[run_id] = S.FAILED
            self.deadline[run_id] = None

    @invariant()
    def the_store_agrees(self) -> None:
        for run_id, status in self.status.items():
            run = self.store.runs.get(run_id)
            assert run.status is status
            assert run.heartbeat_deadline == self.deadline[run_id]
            if status.is_finished:
                assert run.heartbeat_deadline is None


TestRunLivenessMachine = RunLivenessMachine.TestCase
TestRunLivenessMachine.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
