"""An isolated step's log, copied into its S3 artifact store by the orchestrating process once
the step's process ended, survives a short outage of the store at that very moment (a real moto
server behind a TCP proxy, cut just before the log's upload reaches it): the copy is tried
again until the store is back, the step's end is unchanged, and its log is all there. A stop of
the run while the copy waits for a store gone for good ends the wait at once (a warning: only
the log is lost)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.execution.test_artifact_outages import s3_stack_behind_a_proxy
from tests.faults.tcp_proxy import TcpProxy
from wharf import Client, pipeline, step
from wharf.core.enums import ExecutionStatus

s3_server = s3.s3_server
OUTAGE_SECONDS = 4.0
"""Longer than the S3 client's own retries, shorter than the run's patience (11 s)."""
PROMPTLY_SECONDS = 5.0
"""How soon a stop must end the copy's wait (the run hears of it within its heartbeat, 2 s)."""


class CutAtTheLog:
    """Cuts the store (for :data:`OUTAGE_SECONDS` unless told) just before the first request naming a step's
    log (``….log``) reaches it: the copy of the isolated step's log."""

    def __init__(self, seconds: float | None = OUTAGE_SECONDS) -> None:
        self.proxy: TcpProxy | None = None
        self.seconds = seconds
        """How long the cut lasts (None: until the test ends)."""
        self.cut = threading.Event()

    def __call__(self, data: bytes) -> None:
        if b".log HTTP/" in data and not self.cut.is_set() and self.proxy is not None:
            self.cut.set()
            self.proxy.cut()
            if self.seconds is not None:
                threading.Timer(self.seconds, self.proxy.restore).start()


@step(enable_cache=False)
def prints_in_its_own_process() -> None:
    print("a line printed in the step's own process")


@pipeline(raise_on_failure=False)
def isolated_log_through_an_outage() -> None:
    prints_in_its_own_process()


def test_an_isolated_step_log_is_copied_through_a_short_outage(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    cutter = CutAtTheLog()
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        cutter.proxy = proxy
        bucket = s3_server.new_bucket()
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy, "local_process")
        try:
            run = isolated_log_through_an_outage.run_in(ws)
            with Client(ws.config, ws.store) as client:
                logs = client.step_logs("prints_in_its_own_process", run=str(run.id))
        finally:
            ws.close()
    assert cutter.cut.is_set()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert "a line printed in the step's own process" in logs, logs
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith("Could not store the log of step 'prints_in_its_own_process'")
        for m in messages
    ), messages


def test_a_stop_ends_the_copy_waiting_for_a_store_gone_for_good(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    waiting = threading.Event()
    asked: list[float] = []

    class Waiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("Could not store the log of step"):
                waiting.set()

    handler = Waiting()
    logging.getLogger("wharf").addHandler(handler)
    cutter = CutAtTheLog(seconds=None)
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        cutter.proxy = proxy
        bucket = s3_server.new_bucket()
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy, "local_process")
        client = Client(ws.config, ws.store)

        def stop() -> None:
            if waiting.wait(30):
                asked.append(time.monotonic())
                (run,) = client.list_pipeline_runs().items
                client.stop_run(str(run.id))

        helper = threading.Thread(target=stop, daemon=True)
        helper.start()
        try:
            run = isolated_log_through_an_outage.run_in(ws)
            ended = time.monotonic()
            helper.join(5)
            (found,) = client.list_run_steps(run.id).items
        finally:
            logging.getLogger("wharf").removeHandler(handler)
            client.close()
            ws.close()
    assert asked, "the copy never waited through the outage"
    assert ended - asked[0] < PROMPTLY_SECONDS, ended - asked[0]
    assert found.status is ExecutionStatus.COMPLETED, found.status_reason  # its end stands
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "Step 'prints_in_its_own_process': its log could not be stored: the artifact store "
        "could not be reached when the step was stopped." in messages
    ), messages
