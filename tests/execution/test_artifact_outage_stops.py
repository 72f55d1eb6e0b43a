"""A run stopped while a step's output save waits through an outage of its S3 artifact store (a
real moto server behind a TCP proxy the step cuts for good): the stop ends the wait at once,
whoever asks it (Ctrl-C, ``wharf runs stop``, a forced stop), well before the run's patience
for the store runs out; the step ends stopped, its output neither recorded nor left in the
store. Unstopped, the wait ends in the write's own error once the outage outlasts it."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.execution.test_artifact_outages import s3_stack_behind_a_proxy
from tests.faults.tcp_proxy import TcpProxy
from wharf import Client, pipeline, step
from wharf.core.enums import ExecutionStatus

s3_server = s3.s3_server
PROXIES: list[TcpProxy] = []
"""The proxy the step cuts: it runs inline, in this process."""
PATIENCE_SECONDS = 11.0
"""How long a save waits through the outage at a heartbeat interval of 2 s."""
PROMPTLY_SECONDS = 5.0
"""How soon a stop must end the run: the run's heartbeat tells a stop asked elsewhere within
its interval (2 s)."""


@step(enable_cache=False)
def cut_then_return() -> bytes:
    PROXIES[0].cut()  # for good: the save of its output waits through the outage
    return b"never stored"


@pipeline(raise_on_failure=False)
def stopped_while_saving() -> None:
    cut_then_return()


@step(enable_cache=False)
def say_then_cut() -> bytes:
    print("a line for the step's log")
    PROXIES[0].cut()  # for good: its output and its log wait through the outage
    return b"never stored"


@pipeline(raise_on_failure=False)
def failed_while_saving() -> None:
    say_then_cut()


class Waiting(logging.Handler):
    """Set once the step's save said it waits through the outage."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Could not save output 'output' of step"):
            self.started.set()


@pytest.fixture
def waiting() -> Iterator[Waiting]:
    handler = Waiting()
    logger = logging.getLogger("wharf")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("how", ["ctrl-c", "runs stop", "forced"])
def test_a_stop_ends_a_save_waiting_through_an_outage_at_once(
    how: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    waiting: Waiting,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    bucket = s3_server.new_bucket()
    asked: list[float] = []
    with TcpProxy("127.0.0.1", s3_server.port) as proxy:
        PROXIES[:] = [proxy]
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy)
        client = Client(ws.config, ws.store)

        def stop() -> None:
            if not waiting.started.wait(PATIENCE_SECONDS):
                return
            asked.append(time.monotonic())
            if how == "ctrl-c":
                os.kill(os.getpid(), signal.SIGINT)
                return
            (run,) = client.list_pipeline_runs().items
            client.stop_run(str(run.id), force=how == "forced")

        helper = threading.Thread(target=stop, daemon=True)
        helper.start()
        try:
            if how == "ctrl-c":
                with pytest.raises(KeyboardInterrupt):
                    stopped_while_saving.run_in(ws)
            else:
                stopped_while_saving.run_in(ws)
            ended = time.monotonic()
            helper.join(PATIENCE_SECONDS)
            (run,) = client.list_pipeline_runs().items
            (found,) = client.list_run_steps(run.id).items
        finally:
            client.close()
            ws.close()
            PROXIES.clear()
    assert asked, "the save never waited through the outage"
    assert ended - asked[0] < PROMPTLY_SECONDS, ended - asked[0]
    assert run.status is ExecutionStatus.STOPPED, run.status_reason
    assert found.status is ExecutionStatus.STOPPED, found.status_reason
    assert not found.outputs
    listing = s3_server.client().list_objects_v2(Bucket=bucket).get("Contents", [])
    assert [o["Key"] for o in listing if not o["Key"].endswith(".log")] == []


def test_a_save_that_outlasts_its_patience_fails_with_the_write_s_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The step failed with the error of the tidy-up before a try ("cannot remove ..."), not
    the write's own, once the outage outlasted the wait; and while its log waited to be stored,
    a heartbeat read its own failure as "asked to stop"."""
    caplog.set_level(logging.INFO, logger="wharf")
    bucket = s3_server.new_bucket()
    with TcpProxy("127.0.0.1", s3_server.port) as proxy:
        PROXIES[:] = [proxy]
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy, heartbeat_interval="0.5")
        try:
            run = failed_while_saving.run_in(ws)
            with Client(ws.config, ws.store) as client:
                (found,) = client.list_run_steps(run.id).items
        finally:
            ws.close()
            PROXIES.clear()
    assert run.status is ExecutionStatus.FAILED, run.status_reason
    reason = found.status_reason or ""
    assert reason.startswith("Output 'output' of step 'say_then_cut': Cannot save "), reason
    assert "cannot write" in reason and "cannot remove" not in reason, reason
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Could not store the log") for m in messages), messages
    assert not [m for m in messages if "asked to stop" in m]
