"""A graceful stop reaches the steps that wait for resources, end to end with a real pipeline.

A pool has one licence; two steps ask for it: one holds it (and holds on through the stop's
interrupt until the test lets it go), the other waits. The run is stopped gracefully, from
another process's entry (``Client.stop_run``, as ``wharf runs stop`` does: the orchestrating
process learns it from its run heartbeat) or by a Ctrl-C of the orchestrating process (the
signal handler's ``RunStopper.stop``). The waiting step must end stopped at once, its request
given back, while the holder still holds; the holder's request is released when it ends, and
the run ends stopped. Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from tests.e2e.test_resources import (  # noqa: F401 (fixtures)
    LICENSE,
    Mode,
    mode,
    rm_workspace,
    steps,
)
from tests.waiting import wait_for
from wharf import Client, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunRecord

BOUND = 60.0
PROMPT = 5.0
"""Seconds a waiting step may take to end after the stop (a heartbeat is 0.2 s here)."""


@step(enable_cache=False)
def hold_until(go: str, started: str, interrupted: str) -> int:
    """Hold the licence until ``go`` exists, through a stop's interrupt (re-raised then)."""
    import time
    from pathlib import Path

    Path(started).write_text("started")
    stopped: BaseException | None = None
    deadline = time.monotonic() + 60
    while True:
        try:
            while not Path(go).exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            break
        except BaseException as exc:  # the stop's interrupt: hold on until told
            stopped = exc
            Path(interrupted).write_text("yes")
    if stopped is not None:
        raise stopped
    return 1


class Contention:
    """The two steps of the pipeline below, as the store and the Resource Manager see them."""

    def __init__(self, how: Mode, workspace: Workspace, tmp_path: Path) -> None:
        self.mode, self.workspace = how, workspace
        self.go, self.tmp = tmp_path / "go", tmp_path

    def args(self, label: str) -> dict[str, str]:
        return {
            "go": str(self.go),
            "started": str(self.tmp / f"{label}.started"),
            "interrupted": str(self.tmp / f"{label}.interrupted"),
        }

    def request_status(self, request_id: UUID | None) -> ResourceRequestStatus:
        assert request_id is not None
        rm = self.mode.rm(self.workspace)
        try:
            return rm.requests.get(request_id).status
        finally:
            if self.mode.team is not None:
                rm.close()

    def all_steps(self) -> list[StepRunRecord]:
        from wharf.store.models import PageRequest, StepRunFilter

        return self.workspace.store.steps.list(StepRunFilter(), PageRequest(size=100)).items

    def holder_and_waiter(self) -> tuple[StepRunRecord, StepRunRecord] | None:
        """The step holding the licence (its code started) and the one waiting for it."""
        found = {s.status: s for s in self.all_steps()}
        holder, waiter = found.get(ExecutionStatus.RUNNING), found.get(ExecutionStatus.QUEUED)
        if holder is None or waiter is None or waiter.resource_request_id is None:
            return None
        if not (self.tmp / f"{holder.name}.started").exists():
            return None
        if self.request_status(waiter.resource_request_id) is not ResourceRequestStatus.PENDING:
            return None
        return holder, waiter

    def get(self, record: StepRunRecord) -> StepRunRecord:
        return self.workspace.store.steps.get(record.id)

    def stop_and_check(self, stop: Callable[[UUID], object]) -> StepRunRecord:
        """Stop the run once a step holds the licence and the other waits for it; check that
        the waiter ended stopped at once while the holder held on; let the holder go. The
        holder."""
        try:
            holder, waiter = wait_for(self.holder_and_waiter, "a holder and a waiter", BOUND)
            stop(holder.run_id)
            ended = wait_for(
                lambda: w if (w := self.get(waiter)).status.is_finished else None,
                "the waiting step to end",
                timeout=PROMPT,
            )
            assert ended.status is ExecutionStatus.STOPPED, ended.status_reason
            assert "Stopped" in (ended.status_reason or ""), ended.status_reason
            given_back = (ResourceRequestStatus.RELEASED, ResourceRequestStatus.CANCELLED)
            wait_for(
                lambda: self.request_status(ended.resource_request_id) in given_back,
                "the waiting step's request to be given back",
                timeout=PROMPT,
            )
            # The holder holds on meanwhile: the waiter did not wait for its licence.
            assert not self.get(holder).status.is_finished
            assert self.request_status(holder.resource_request_id) is (
                ResourceRequestStatus.ALLOCATED
            )
            wait_for(
                (self.tmp / f"{holder.name}.interrupted").exists, "the holder's interrupt", BOUND
            )
            return holder
        finally:
            self.go.write_text("go")

    def check_end(self, run_id: UUID, holder: StepRunRecord) -> None:
        found = {s.name: s for s in steps(self.workspace, run_id)}
        assert len(found) == 2
        assert all(s.status is ExecutionStatus.STOPPED for s in found.values()), found
        assert self.request_status(holder.resource_request_id) is ResourceRequestStatus.RELEASED
        run = self.workspace.store.runs.get(run_id)
        assert run.status is ExecutionStatus.STOPPED, run.status_reason


def contended(contention: Contention) -> Any:
    a = hold_until.with_options(settings={"resources": LICENSE})
    b = hold_until.with_options(settings={"resources": LICENSE})

    @pipeline
    def contend() -> None:
        a(**contention.args("hold_until"))
        b(**contention.args("hold_until_2"))

    return contend


def test_a_stop_from_elsewhere_ends_the_waiting_step_at_once(
    mode: Mode,  # noqa: F811
    rm_workspace: Workspace,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``wharf runs stop`` (``Client.stop_run``) while one step waits for the other's licence."""
    mode.ensure_pool(rm_workspace, "licenses", {"license": 1})
    contention = Contention(mode, rm_workspace, tmp_path)
    p = contended(contention)
    ended: list[Any] = []
    runner = threading.Thread(target=lambda: ended.append(p.run_in(rm_workspace)), daemon=True)
    runner.start()
    client = Client(rm_workspace.config, rm_workspace.store)
    try:
        holder = contention.stop_and_check(lambda run_id: client.stop_run(str(run_id)))
    finally:
        runner.join(BOUND)
    assert ended, "the pipeline call did not return"
    assert ended[0].status is ExecutionStatus.STOPPED
    contention.check_end(ended[0].id, holder)


def test_ctrl_c_ends_the_waiting_step_at_once(
    wharf_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A Ctrl-C of the orchestrating process (this one: the run is in the main thread) while
    one step waits for the other's licence."""
    assert threading.current_thread() is threading.main_thread()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    ws = Workspace.open(load_config())
    try:
        embedded = Mode("embedded")
        embedded.ensure_pool(ws, "licenses", {"license": 1})
        contention = Contention(embedded, ws, tmp_path)
        p = contended(contention)
        checked: list[StepRunRecord] = []
        failures: list[BaseException] = []

        def ctrl_c(run_id: UUID) -> None:
            os.kill(os.getpid(), signal.SIGINT)

        def stop_and_check() -> None:
            try:
                checked.append(contention.stop_and_check(ctrl_c))
            except BaseException as exc:
                failures.append(exc)

        helper = threading.Thread(target=stop_and_check, daemon=True)
        helper.start()
        with pytest.raises(KeyboardInterrupt, match="stopped after Ctrl-C"):
            p.run_in(ws)
        helper.join(BOUND)
        if failures:
            raise failures[0]
        (holder,) = checked
        contention.check_end(holder.run_id, holder)
    finally:
        ws.close()
