"""A step pod keeping its own log (``step_main.FinalLog``: its Job deleted while no orchestrator
is alive to copy it) waits through a short outage of its S3 artifact store (a real moto server
behind a TCP proxy, cut just before the first request naming the log reaches it), as the run's
other writes to the store do: the log is kept once the store is back.

The step run is a real one (a pipeline run on that store, its log then removed, as if its
orchestrator never stored it); the pod is a stand-in's on the API emulator and process kubelet
(:mod:`.step_backend_bed`), whose log the keeper reads through the API."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.execution.test_artifact_outages import s3_stack_behind_a_proxy
from tests.execution.test_isolated_log_outage import CutAtTheLog
from tests.faults.tcp_proxy import TcpProxy
from tests.integrations.kubernetes.step_backend_bed import NS, BackendFactory, launch, wait_all
from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import PODS
from tests.store.conftest import World
from wharf import Client, pipeline, step
from wharf.artifacts.fsspec_store import FsspecArtifactStore
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.enums import ExecutionStatus
from wharf.execution.backends import Ended
from wharf.execution.log_capture import read_log
from wharf.integrations.kubernetes.step_main import FinalLog

s3_server = s3.s3_server


@step(enable_cache=False)
def talks() -> None:
    print("a line its orchestrator stored")


@pipeline(raise_on_failure=False)
def talking() -> None:
    talks()


def test_a_step_pod_keeps_its_log_through_a_short_outage_of_the_store(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    emulator: Emulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cutter = CutAtTheLog()  # armed once the run stored its log
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        bucket = s3_server.new_bucket()
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy, heartbeat_interval="2")
        try:
            run = talking.run_in(ws)
            with Client(ws.config, ws.store) as client:
                (kept,) = client.list_run_steps(run.id).items
        finally:
            ws.close()
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        assert kept.logs_uri is not None
        s3_server.client().delete_object(
            Bucket=bucket, Key=kept.logs_uri.removeprefix(f"s3://{bucket}/")
        )
        pod_launch = launch(world, logs, STAND_IN="ok")
        backend = backend_for()
        handle = backend.submit(pod_launch, None)
        assert wait_all(backend, [handle]) == {handle: (Ended.SUCCEEDED, "exited with code 0")}
        (pod,) = emulator.store.list(PODS, NS)["items"]
        monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig_path))
        caplog.set_level(logging.INFO, logger="wharf")
        cutter.proxy = proxy
        FinalLog(kept.id, NS, pod["metadata"]["name"]).keep()
        direct = FsspecArtifactStore(
            f"s3://{bucket}/w", options={"endpoint_url": s3_server.endpoint}
        )
        text = read_log(direct, kept.logs_uri)
    assert cutter.cut.is_set()
    assert text.startswith(f"hello from {pod_launch.record.id}\n"), text
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Could not ") and "the step's log" in m for m in messages), messages
    assert not any("could not be kept" in m for m in messages), messages
