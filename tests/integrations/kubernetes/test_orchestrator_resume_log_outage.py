"""A resumed orchestrator pod keeps the logs of the step Jobs it does not adopt through an outage
of its S3 artifact store without holding the run up (``orchestrator_resume.collect_left_jobs``
with ``LeftLogs``): the pods' logs are read and the Jobs deleted at once, the copies wait for
the store in a thread of their own for up to the run's patience, and the pod waits for them at
the run's end (``LeftLogs.close``). A store gone for longer loses the log with a warning naming
its step, no traceback and nothing raised. On the step backend's bed (:mod:`.step_backend_bed`:
the API emulator, the process kubelet, a stand-in entry point) with a real moto server behind a
TCP proxy cut just before the first request naming the log reaches it."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.execution.test_isolated_log_outage import CutAtTheLog
from tests.faults.tcp_proxy import TcpProxy
from tests.integrations.kubernetes.step_backend_bed import SPEC, BackendFactory, job_names, wait_all
from tests.store.conftest import World
from tests.waiting import wait_until
from wharf.artifacts.fsspec_store import FsspecArtifactStore
from wharf.artifacts.materializers.registry import MaterializerRegistry
from wharf.core.enums import ExecutionStatus
from wharf.execution.backends import Ended, StepLaunch
from wharf.execution.log_capture import read_log
from wharf.execution.run_lifecycle import Resumption
from wharf.execution.services import RunServices
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, label_value
from wharf.integrations.kubernetes.orchestrator_resume import LeftLogs, collect_left_jobs
from wharf.store.models import StepRunRecord

s3_server = s3.s3_server
NS = "default"


def left_job(
    backend_for: BackendFactory, world: World, logs: FsspecArtifactStore
) -> tuple[StepRunRecord, Resumption]:
    """A step Job of a running run that finished while no orchestrator pod was alive (nothing
    cleaned it up); its step run, and the resumption that does not adopt it."""
    run = world.run(status=ExecutionStatus.RUNNING)
    backend = backend_for(labels={RUN_ID_KEY: label_value(str(run.id))})
    record = world.step(run_id=run.id, logs_uri=logs.new_uri("p", "r") + ".log", spec=SPEC)
    handle = backend.submit(StepLaunch(record, SPEC, {"STAND_IN": "ok"}, logs), None)
    assert wait_all(backend, [handle]) == {handle: (Ended.SUCCEEDED, "exited with code 0")}
    return record, Resumption({record.name: record}, frozenset())


def collect(
    clients: KubeClients,
    world: World,
    logs: FsspecArtifactStore,
    interval: float,
    resumed: Resumption,
) -> LeftLogs:
    services = RunServices(
        world.store, logs, MaterializerRegistry(), world.project.id, heartbeat_interval=interval
    )
    run_id = next(iter(resumed.steps.values())).run_id
    return collect_left_jobs(clients, NS, services, run_id, resumed)


@contextmanager
def left_job_collected_in_an_outage(
    backend_for: BackendFactory,
    clients: KubeClients,
    world: World,
    s3_server: MotoServer,
    interval: float,
) -> Iterator[tuple[TcpProxy, FsspecArtifactStore, StepRunRecord, LeftLogs]]:
    """A left Job collected while its store is out: the TCP proxy in front of the moto server
    (cut just before the first request naming the log reaches it, until the test restores it),
    the store through it, the Job's step run and the ``LeftLogs`` of the collection, made with
    heartbeats every ``interval`` s (its patience, the liveness timeout, follows from it)."""
    cutter = CutAtTheLog(seconds=None)  # until the test brings the store back
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        cutter.proxy = proxy
        endpoint = {"endpoint_url": f"http://127.0.0.1:{proxy.port}"}
        logs = FsspecArtifactStore(f"s3://{s3_server.new_bucket()}/w", options=endpoint)
        record, resumed = left_job(backend_for, world, logs)
        kept = collect(clients, world, logs, interval, resumed)
        assert cutter.cut.is_set()
        yield proxy, logs, record, kept


def test_a_left_job_log_is_stored_through_an_outage_while_the_run_goes_on(
    backend_for: BackendFactory,
    clients: KubeClients,
    world: World,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    outage = left_job_collected_in_an_outage(backend_for, clients, world, s3_server, 2.0)
    with outage as (proxy, logs, record, kept):  # patience: 11 s
        # Back with the store still out: the run goes on meanwhile, the Job is gone.
        assert wait_until(lambda: job_names(clients) == [], 30), job_names(clients)
        assert wait_until(
            lambda: any(
                r.getMessage().startswith(f"Could not store the log of step '{record.name}'")
                for r in caplog.records
            ),
            30,
        ), "the copy did not wait for the store"
        proxy.restore()
        kept.close()  # the run's end: waits for the copy
        assert record.logs_uri is not None
        text = read_log(logs, record.logs_uri)
    assert text.startswith(f"hello from {record.id}\n"), text
    messages = [r.getMessage() for r in caplog.records]
    assert not any("could not be stored" in m for m in messages), messages


def test_a_store_gone_for_longer_loses_the_log_with_a_warning_and_nothing_raised(
    backend_for: BackendFactory,
    clients: KubeClients,
    world: World,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    outage = left_job_collected_in_an_outage(backend_for, clients, world, s3_server, 0.4)
    with outage as (proxy, logs, record, kept):  # patience: 3 s
        started = time.monotonic()
        kept.close()  # the run's end: waits no longer than the patience
        waited = time.monotonic() - started
        gave_up = f"Step '{record.name}': its log could not be stored: "
        assert wait_until(  # the copy's own wait ended too (no thread left behind)
            lambda: any(r.getMessage().startswith(gave_up) for r in caplog.records), 30
        )
        proxy.restore()
        assert record.logs_uri is not None
        assert wait_until(lambda: job_names(clients) == [], 30), job_names(clients)
        assert not logs.exists(record.logs_uri)
    assert waited < 3.0 + 5.0, waited  # the patience, and a try in flight
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(
        f"'{record.name}'" in r.getMessage() and "could not be stored" in r.getMessage()
        for r in warnings
    ), [r.getMessage() for r in warnings]
    assert not any(r.exc_info for r in warnings if "log" in r.getMessage()), "a traceback"
