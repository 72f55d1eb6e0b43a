"""An isolated step's log, copied into its S3 artifact store by the orchestrating process once
the step's process ended, survives a short outage of the store at that very moment (a real moto
server behind a TCP proxy, cut just before the log's upload reaches it): the copy is tried
again until the store is back, the step's end is unchanged, and its log is all there."""

from __future__ import annotations

import logging
import threading
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


class CutAtTheLog:
    """Cuts the store for :data:`OUTAGE_SECONDS` just before the first request naming a step's
    log (``….log``) reaches it: the copy of the isolated step's log."""

    def __init__(self) -> None:
        self.proxy: TcpProxy | None = None
        self.cut = threading.Event()

    def __call__(self, data: bytes) -> None:
        if b".log HTTP/" in data and not self.cut.is_set() and self.proxy is not None:
            self.cut.set()
            self.proxy.cut()
            threading.Timer(OUTAGE_SECONDS, self.proxy.restore).start()


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
