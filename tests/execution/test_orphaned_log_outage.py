"""An isolated step whose orchestrator is killed stores its own log (``log_capture.OwnLog``)
through a short outage of its S3 artifact store, as the run would have
(``log_capture.store_step_log`` with ``artifact_outages.through_artifact_outage``): a real moto
server behind a TCP proxy cut just before the log's upload reaches it. The wait is bounded:
the parent watch's exit (``OwnLog.store_then_exit``, its grace over) ends it, the file deleted
and only the log lost (a warning). Real processes and servers; waits are on conditions."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.execution.test_artifact_outages import s3_stack_behind_a_proxy
from tests.execution.test_entrypoint_orphaned import SCRIPT
from tests.execution.test_isolated_log_outage import CutAtTheLog
from tests.faults.tcp_proxy import TcpProxy
from tests.store.conftest import make_world
from tests.waiting import wait_until
from wharf import Client
from wharf.artifacts.fsspec_store import FsspecArtifactStore
from wharf.artifacts.materializers.registry import MaterializerRegistry
from wharf.execution.artifact_outages import step_logs_through_outage
from wharf.execution.log_capture import OwnLog
from wharf.execution.services import RunServices
from wharf.store.sql import SqlStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

s3_server = s3.s3_server
DEADLINE_SECONDS = 120
PROMPTLY_SECONDS = 5.0
"""How soon the watch's exit must end the wait (a pause is a quarter second, a try is short)."""


def test_an_orphaned_step_stores_its_log_through_a_short_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: MotoServer
) -> None:
    # Short: the fork server's socket lives in the temporary directory too (107 bytes at most).
    temp_dir = Path(tempfile.mkdtemp(prefix="wharf-orphan-"))
    script = tmp_path / "orphaned.py"
    script.write_text(SCRIPT)
    release, started, output = tmp_path / "release", tmp_path / "started", tmp_path / "out.txt"
    cutter = CutAtTheLog()  # 4 s: longer than the S3 client's retries, within the patience
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        cutter.proxy = proxy
        ws = s3_stack_behind_a_proxy(
            tmp_path, monkeypatch, s3_server.new_bucket(), proxy, "local_process"
        )
        try:
            with output.open("w") as out:
                process = subprocess.Popen(
                    [sys.executable, str(script), str(release), str(started)],
                    cwd=tmp_path,
                    env={**os.environ, "TMPDIR": str(temp_dir)},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            try:
                started_or_ended = lambda: started.exists() or process.poll() is not None  # noqa: E731
                assert wait_until(started_or_ended, DEADLINE_SECONDS) and started.exists(), (
                    output.read_text()
                )
                (logs,) = temp_dir.glob("wharf-step-*.log")
                os.kill(process.pid, signal.SIGKILL)
                assert process.wait(timeout=DEADLINE_SECONDS) == -signal.SIGKILL
                # The step's process stores its log, then deletes the file, as it ends.
                assert wait_until(lambda: not logs.exists(), DEADLINE_SECONDS), "temp log left"
            finally:
                release.write_text("go")
                if process.poll() is None:
                    process.kill()
                    process.wait()
                shutil.rmtree(temp_dir, ignore_errors=True)
            with Client(ws.config, ws.store) as client:
                (run,) = client.list_pipeline_runs().items
                shown = client.step_logs("wait_for_release", run=str(run.id))
        finally:
            ws.close()
    assert cutter.cut.is_set()
    assert "the step printed this before its orchestrator was killed" in shown, shown
    assert "Could not store the log of step 'wait_for_release'" in shown, shown  # it waited
    assert "its log could not be stored" not in shown, shown


def test_the_watch_exit_ends_the_wait_for_a_store_gone_for_good(
    tmp_path: Path, s3_server: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The wait is the run's patience (76 s here) unless the parent watch's exit, its grace
    over, ends it: then at once, between two tries; the file is deleted all the same. The
    exit itself (``exit_with_group``) is left out: it would end the test's process."""
    caplog.set_level(logging.INFO, logger="wharf")
    path = tmp_path / "wharf-step-1-x.log"
    path.write_text("what the step printed\n")
    store = SqlStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    with TcpProxy("127.0.0.1", s3_server.port) as proxy:
        endpoint = {"endpoint_url": f"http://127.0.0.1:{proxy.port}"}
        logs = FsspecArtifactStore(f"s3://{s3_server.new_bucket()}/w", options=endpoint)
        services = RunServices(
            store, logs, MaterializerRegistry(), make_world(store).project.id, heartbeat_interval=15
        )
        own = OwnLog(str(path))
        own.destination(
            logs,
            logs.new_uri("p", "r") + ".log",
            "gone",
            step_logs_through_outage(services, own.waits),
        )
        own.orphan()
        proxy.cut()
        storing = threading.Thread(target=own.store_if_orphaned, daemon=True)
        storing.start()
        waited = lambda: any(  # noqa: E731
            r.getMessage().startswith("Could not store the log of step 'gone'")
            for r in caplog.records
        )
        try:
            assert wait_until(waited, DEADLINE_SECONDS), "the store was not waited for"
            asked = time.monotonic()
            own.waits.end_waits("its grace ran out")  # what store_then_exit does first
            storing.join(DEADLINE_SECONDS)
            ended = time.monotonic()
        finally:
            proxy.restore()
            store.close()
    assert not storing.is_alive()
    assert ended - asked < PROMPTLY_SECONDS, ended - asked
    assert not path.exists()
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "Step 'gone': its log could not be stored: the artifact store could not be reached "
        "when the step was stopped." in messages
    ), messages
