"""A pipeline on an S3 artifact store (a real moto server, behind a TCP proxy the steps cut until
a try met the cut) rides out the outage: an input loaded and an output saved while the store
cannot be reached (a dynamic pipeline's .load(), a step process's fetch of the code archive, a
step's log and the code archive's upload at the run's start too) are tried again until it is
back, every value read afterwards is whole, and an upload cut after its first part leaves no
incomplete multipart upload behind; an archive upload that gives up says so in one line."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.faults.tcp_proxy import TcpProxy
from wharf import Client, pipeline, step
from wharf.artifacts.materializers.builtin import BuiltInMaterializer
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import WharfError
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace

s3_server = s3.s3_server
FALLBACK_SECONDS = 8.0
"""A cut that no failed try ended is restored after this anyway (shorter than the run's
patience, 11 s): a try that never met the cut then fails the test's assertions on the log, it
does not leave the store cut for good."""
FETCH_OUTAGE_SECONDS = 4.0
"""The cut a step process's fetch of the code archive meets, from its first request on (that
process logs elsewhere, so this cut is timed): longer than one try of the S3 client against a
cut store (0.9-2.6 s measured: s3fs's own retries around botocore's two attempts), so the first
try fails; shorter than the run's patience (11 s)."""
PROXIES: list[TcpProxy] = []
"""The proxy the steps cut: the steps run inline, in this process."""


class Cutter(logging.Handler):
    """Cuts the store (``PROXIES[0]``) and restores it as soon as this process logs that a try
    met the cut: the engine logs "Could not …" once its first try failed, then waits a quarter
    of a second before the next. Each cut so outlasts one whole try (with the S3 client's own
    retries, all refused) and the engine's next try finds the store back: the retry through
    an outage longer than a try is what is shown, without a fixed window to wait out."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._timer: threading.Timer | None = None
        self._cuts = threading.Lock()

    def cut(self) -> None:
        with self._cuts:
            PROXIES[0].cut()
            self._timer = threading.Timer(FALLBACK_SECONDS, self.restore)
            self._timer.daemon = True
            self._timer.start()

    def restore(self) -> None:
        with self._cuts:
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
                if PROXIES:
                    PROXIES[0].restore()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Could not "):
            self.restore()


CUTTER = Cutter()


@pytest.fixture(autouse=True)
def _cuts_end_once_a_try_failed() -> Iterator[None]:
    logger = logging.getLogger("wharf")
    logger.addHandler(CUTTER)
    try:
        yield
    finally:
        logger.removeHandler(CUTTER)
        CUTTER.restore()


def cut_the_store_for_a_while() -> None:
    CUTTER.cut()


@step(enable_cache=False)
def produce() -> list[int]:
    return list(range(1000))


@step(enable_cache=False)
def cut_before_the_next_load() -> None:
    cut_the_store_for_a_while()


@step(enable_cache=False)
def load_then_cut_before_saving(values: list[int]) -> bytes:
    cut_the_store_for_a_while()
    return bytes(v % 256 for v in values) * 7000  # 7 MB: a multipart upload of two parts


class CutAfterTheFirstPart(BuiltInMaterializer):
    """Bytes, whose first save cuts the store once a part of the upload went through."""

    cut = False

    def save(self, data: object) -> None:
        assert isinstance(data, bytes)
        with self.artifact_store.open(self.file_uri("data.bin"), "wb") as f:
            f.write(data[: 6 * 2**20])  # the first 5 MiB part is uploaded
            if not CutAfterTheFirstPart.cut:
                CutAfterTheFirstPart.cut = True
                cut_the_store_for_a_while()
            f.write(data[6 * 2**20 :])


@step(enable_cache=False, output_materializers=CutAfterTheFirstPart)
def measure(data: bytes) -> bytes:
    return str(len(data)).encode() * 2**20


@pipeline(raise_on_failure=False)
def through_outages() -> None:
    values = produce()
    cut = cut_before_the_next_load(after=values)
    measure(load_then_cut_before_saving(values, after=cut))


LOADED: list[int] = []


@pipeline(dynamic=True, raise_on_failure=False)
def loads_through_an_outage() -> None:
    values = produce()
    cut_before_the_next_load(after=values)  # returns once it ran: it has no outputs
    LOADED.append(sum(values.load()))  # read from the store, cut until a moment ago


@step(enable_cache=False, runtime="isolated")
def in_its_own_process() -> int:
    return 42


ARCHIVE_CUTS: list[CutAtTheArchive] = []
"""The cut :func:`arm_the_cut_at_the_archive` arms: at the step process's fetch of the archive,
the next request naming it (the upload came at the run's start)."""


@step(enable_cache=False)
def arm_the_cut_at_the_archive() -> None:
    ARCHIVE_CUTS[0].armed.set()


@pipeline(dynamic=True, raise_on_failure=False)
def fetches_code_through_an_outage() -> None:
    arm_the_cut_at_the_archive.with_options(runtime="inline")()  # after the archive's upload
    LOADED.append(in_its_own_process().load())  # its process fetches the code archive first


@step(enable_cache=False)
def prints_then_cuts() -> None:
    print("a line worth keeping")
    cut_the_store_for_a_while()  # its log is stored once it returned


@pipeline(raise_on_failure=False)
def logs_through_an_outage() -> None:
    prints_then_cuts()


@pipeline(raise_on_failure=False)
def ships_its_code() -> None:
    in_its_own_process()


class CutAtTheArchive:
    """Cuts the store just before the first request naming the code archive reaches it once
    armed (from the start: the upload at the run's start; else once a step armed it: the step
    process's fetch), and restores it after ``until`` seconds, once a try failed in this
    process (:class:`Cutter`) or never (the test's end)."""

    def __init__(
        self, until: float | Literal["a try failed", "the end"], *, armed: bool = True
    ) -> None:
        self.until = until
        self.armed = threading.Event()
        if armed:
            self.armed.set()
        self.cut = threading.Event()

    def __call__(self, data: bytes) -> None:
        if b".tar.gz" not in data or not self.armed.is_set() or self.cut.is_set():
            return
        self.cut.set()
        if self.until == "a try failed":
            CUTTER.cut()
            return
        proxy = PROXIES[0]
        proxy.cut()
        if not isinstance(self.until, str):
            timer = threading.Timer(self.until, proxy.restore)
            timer.daemon = True
            timer.start()


def s3_stack_behind_a_proxy(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    bucket: str,
    proxy: TcpProxy,
    orchestrator: str = "local",
    heartbeat_interval: str = "2",
) -> Workspace:
    """A workspace whose active stack runs steps on S3 reached through ``proxy``; on
    ``local_process``, code travels as archives."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", heartbeat_interval)  # "2": patience 11 s
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "behind-a-proxy")
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT"):
        monkeypatch.delenv(var, raising=False)
    ws = Workspace.open(load_config())
    config = {
        "path": f"s3://{bucket}/w",
        "endpoint_url": f"http://127.0.0.1:{proxy.port}",
        "default_block_size": 5 * 2**20,
    }
    stacks.register_component(ws, "s3", ComponentType.ARTIFACT_STORE, "fsspec", config)
    travels = {"code_travels": True} if orchestrator == "local_process" else {}
    stacks.register_component(ws, "steps", ComponentType.ORCHESTRATOR, orchestrator, travels)
    stacks.register_stack(ws, "behind-a-proxy", orchestrator="steps", artifact_store="s3")
    return ws


def test_a_dynamic_pipeline_loads_a_value_through_a_short_outage(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    LOADED.clear()
    with TcpProxy("127.0.0.1", s3_server.port) as proxy:
        PROXIES[:] = [proxy]
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, s3_server.new_bucket(), proxy)
        try:
            run = loads_through_an_outage.run_in(ws)
        finally:
            ws.close()
            PROXIES.clear()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert list(LOADED) == [sum(range(1000))]
    assert any(r.getMessage().startswith("Could not load artifact s3://") for r in caplog.records)


def test_a_step_process_fetches_its_code_archive_through_a_short_outage(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
) -> None:
    LOADED.clear()
    cutter = CutAtTheArchive(FETCH_OUTAGE_SECONDS, armed=False)
    ARCHIVE_CUTS[:] = [cutter]
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        PROXIES[:] = [proxy]
        bucket = s3_server.new_bucket()
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy, "local_process")
        try:
            run = fetches_code_through_an_outage.run_in(ws)
            with Client(ws.config, ws.store) as client:
                logs = client.step_logs("in_its_own_process", run=str(run.id))
        finally:
            ws.close()
            PROXIES.clear()
            ARCHIVE_CUTS.clear()
    assert cutter.cut.is_set()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert list(LOADED) == [42]
    assert "Could not fetch the run's code archive" in logs, logs


def test_inputs_and_outputs_ride_out_a_short_outage_of_the_store(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bucket = s3_server.new_bucket()
    CutAfterTheFirstPart.cut = False
    caplog.set_level(logging.INFO, logger="wharf")
    with TcpProxy("127.0.0.1", s3_server.port) as proxy:
        PROXIES[:] = [proxy]
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy)
        try:
            run = through_outages.run_in(ws)
            with Client(ws.config, ws.store) as client:
                found = {s.name: s for s in client.list_run_steps(run.id).items}
                values = {
                    name: client.load_artifact(s.outputs["output"])
                    for name, s in found.items()
                    if s.outputs
                }
        finally:
            ws.close()
            PROXIES.clear()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert values["measure"] == b"7000000" * 2**20
    assert values["load_then_cut_before_saving"] == bytes(v % 256 for v in range(1000)) * 7000
    messages = [r.getMessage() for r in caplog.records]
    waited = [m for m in messages if m.startswith("Could not ")]
    assert any("load input 'values' of step 'load_then_cut_before_saving'" in m for m in waited)
    assert any("save output 'output' of step 'load_then_cut_before_saving'" in m for m in waited)
    assert all("ArtifactStoreUnreachableError" in m or "Connect" in m for m in waited), waited
    assert any("save output 'output' of step 'measure'" in m for m in waited)
    assert sum(m.startswith("Managed to ") for m in messages) == 3
    uploads = s3_server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert uploads == []  # the cut upload was aborted before the save was tried again


def test_a_step_log_is_stored_through_a_short_outage(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    with TcpProxy("127.0.0.1", s3_server.port) as proxy:
        PROXIES[:] = [proxy]
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, s3_server.new_bucket(), proxy)
        try:
            run = logs_through_an_outage.run_in(ws)
            with Client(ws.config, ws.store) as client:
                logs = client.step_logs("prints_then_cuts", run=str(run.id))
        finally:
            ws.close()
            PROXIES.clear()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert "a line worth keeping" in logs, logs
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Could not store the log of step 'prints_then_cuts'") for m in messages)
    assert not any("its log could not be stored" in m for m in messages)


def test_the_code_archive_is_uploaded_through_a_short_outage(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wharf")
    cutter = CutAtTheArchive("a try failed")
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        PROXIES[:] = [proxy]
        bucket = s3_server.new_bucket()
        ws = s3_stack_behind_a_proxy(tmp_path, monkeypatch, bucket, proxy, "local_process")
        try:
            run = ships_its_code.run_in(ws)
        finally:
            ws.close()
            PROXIES.clear()
    assert cutter.cut.is_set()
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Could not upload the pipeline's code archive") for m in messages)


def test_a_code_archive_upload_that_gives_up_says_so_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cutter = CutAtTheArchive("the end")  # gone for longer than the run's patience (3.5 s)
    with TcpProxy("127.0.0.1", s3_server.port, sent=cutter) as proxy:
        PROXIES[:] = [proxy]
        bucket = s3_server.new_bucket()
        ws = s3_stack_behind_a_proxy(
            tmp_path, monkeypatch, bucket, proxy, "local_process", heartbeat_interval="0.5"
        )
        try:
            with pytest.raises(WharfError) as caught:
                ships_its_code.run_in(ws)
            with Client(ws.config, ws.store) as client:
                assert client.list_pipeline_runs().items == []
        finally:
            ws.close()
            PROXIES.clear()
    message = str(caught.value)
    assert message.startswith("The pipeline's code archive could not be uploaded: "), message
    assert "cannot be reached" in message or "Connect" in message, message
    assert "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert "Traceback" not in capfd.readouterr().err
