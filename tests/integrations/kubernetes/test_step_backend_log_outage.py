"""The Kubernetes step backend (the ``kubernetes`` orchestrator's and step operator's) copies an
attempt's pod log into an S3 artifact store through a short outage of the store at that very
moment, as the run's other writes to the store wait one out (the launch's
``logs_through_outage``): a real moto server behind a TCP proxy cut just before the log's upload
reaches it; the cleanup raises nothing and the log is all there (:mod:`.step_backend_bed`)."""

from __future__ import annotations

import logging

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.execution.test_isolated_log_outage import CutAtTheLog
from tests.faults.tcp_proxy import TcpProxy
from tests.integrations.kubernetes.step_backend_bed import SPEC, BackendFactory, wait_all
from tests.store.conftest import World
from wharf.artifacts.fsspec_store import FsspecArtifactStore
from wharf.artifacts.materializers.registry import MaterializerRegistry
from wharf.execution.artifact_outages import step_logs_through_outage
from wharf.execution.backends import Ended, StepLaunch
from wharf.execution.log_capture import read_log
from wharf.execution.services import RunServices
from wharf.execution.step_region import StepRegion

s3_server = s3.s3_server


def test_a_pod_log_is_copied_through_a_short_outage_of_the_store(
    backend_for: BackendFactory,
    world: World,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    cutter = CutAtTheLog()
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        cutter.proxy = proxy
        endpoint = {"endpoint_url": f"http://127.0.0.1:{proxy.port}"}
        logs = FsspecArtifactStore(f"s3://{s3_server.new_bucket()}/w", options=endpoint)
        services = RunServices(
            world.store, logs, MaterializerRegistry(), world.project.id, heartbeat_interval=2.0
        )  # patience: 11 s
        record = world.step(logs_uri=logs.new_uri("p", "r") + ".log", spec=SPEC)
        wait = step_logs_through_outage(services, StepRegion())
        launch = StepLaunch(record, SPEC, {"STAND_IN": "ok"}, logs, wait)
        backend = backend_for()
        handle = backend.submit(launch, None)
        assert wait_all(backend, [handle]) == {handle: (Ended.SUCCEEDED, "exited with code 0")}
        backend.cleanup(handle)
        assert record.logs_uri is not None
        text = read_log(logs, record.logs_uri)
    assert cutter.cut.is_set()
    assert text.startswith(f"hello from {record.id}\n"), text
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"Could not store the log of step '{record.name}'") for m in messages)
    assert not any("its log could not be stored" in m for m in messages), messages
