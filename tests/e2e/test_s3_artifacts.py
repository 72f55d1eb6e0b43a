"""Pipelines on a stack whose artifact store is S3 (a real moto server over HTTP): the quick-start
pipeline and a dynamic pipeline with isolated steps run, and a second process with a fresh home
loads every output; a server stopped mid-run fails the step with one clear message."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.e2e import steps_lib
from wharf import Client, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import WharfError
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace

s3_server = s3.s3_server
s3_bucket = s3.s3_bucket
REPO = Path(__file__).resolve().parents[2]


def wharf_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=120,
    )


def s3_stack(ws: Workspace, name: str, orchestrator: str, store: str) -> None:
    stacks.register_component(ws, name, ComponentType.ORCHESTRATOR, orchestrator)
    stacks.register_stack(ws, name, orchestrator=name, artifact_store=store)


def test_registration_keeps_secrets_out_and_runs_load_from_a_fresh_home(
    wharf_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
) -> None:
    endpoint = s3_server.endpoint
    refused = wharf_cli(
        *("component", "register", "leaky", "--type", "artifact_store", "--flavor", "fsspec"),
        *("-c", f"path=s3://{s3_bucket}/wharf", "-c", "secret=hunter2"),
    )
    assert refused.returncode != 0 and "clear text" in refused.stderr + refused.stdout
    assert "Traceback" not in refused.stderr
    registered = wharf_cli(
        *("component", "register", "remote", "--type", "artifact_store", "--flavor", "fsspec"),
        *("-c", f"path=s3://{s3_bucket}/wharf/", "-c", f"endpoint_url={endpoint}"),
    )
    assert registered.returncode == 0, registered.stderr

    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import quickstart  # the README's quick-start pipeline

    monkeypatch.setenv("WHARF_ACTIVE_STACK", "on-s3")
    ws = Workspace.open(load_config())
    try:
        s3_stack(ws, "on-s3", "local", "remote")
        s3_stack(ws, "on-s3-procs", "local_process", "remote")
        first = quickstart.quickstart.run_in(ws, count=20)
        second = quickstart.quickstart.run_in(ws, count=20)  # all cached
    finally:
        ws.close()

    @pipeline(dynamic=True)
    def fan_out() -> None:
        doubled = steps_lib.isolated_double(steps_lib.produce(value=5))
        steps_lib.whoami.with_options(runtime="isolated")(label="isolated")
        steps_lib.double(doubled)

    monkeypatch.setenv("WHARF_ACTIVE_STACK", "on-s3-procs")
    ws = Workspace.open(load_config())
    try:
        dynamic = fan_out.run_in(ws)
        runs = [first, second, dynamic]
        for run in runs:
            assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        expected: dict[str, Any] = {}
        with Client(ws.config, ws.store) as client:
            isolated = {s.name: s for s in client.list_run_steps(dynamic.id).items}
            assert isolated["isolated_double"].pid not in (None, os.getpid())
            for run in runs:
                for s in client.list_run_steps(run.id, size=100).items:
                    for output, version_id in s.outputs.items():
                        version = client.get_artifact_version(version_id)
                        assert version.uri.startswith(f"s3://{s3_bucket}/wharf/")
                        value = client.load_artifact(version)
                        expected[f"{run.id}/{s.name}/{output}"] = value
        assert expected[f"{dynamic.id}/double/output"] == 20
        assert len(expected) >= 10
        store_url = ws.config.store_url
    finally:
        ws.close()

    # Another machine: nothing but the metadata store's URL and S3 access.
    fresh = tmp_path / "elsewhere"
    fresh.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WHARF_")},
        "HOME": str(fresh),
        "WHARF_HOME": str(fresh / "wharf"),
        "WHARF_STORE_URL": store_url,
    }
    script = """
import json, sys
from wharf import Client
found = {}
with Client() as client:
    for run_id in sys.argv[1:]:
        for s in client.list_run_steps(run_id, size=100).items:
            for output, version_id in s.outputs.items():
                found[f"{run_id}/{s.name}/{output}"] = client.load_artifact(version_id)
    logs = client.step_logs("fit", run=sys.argv[1])
print(json.dumps(found))
print(logs)
"""
    loaded = subprocess.run(
        [sys.executable, "-c", script, *(str(r.id) for r in runs)],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        cwd=fresh,
        timeout=120,
    )
    assert loaded.returncode == 0, loaded.stderr
    found, logs = loaded.stdout.split("\n", 1)
    assert json.loads(found) == json.loads(json.dumps(expected))
    assert "fitting in step run" in logs  # the step's log, read from S3 too
    assert not (fresh / "wharf" / "artifacts").exists()  # nothing came from a local store


# ----------------------------------------------------------------------------- a server stopped


@step(enable_cache=False)
def first_value() -> list[int]:
    return [1, 2, 3]


@step(enable_cache=False)
def stop_the_server(values: list[int]) -> list[int]:
    """Kill the artifact store's server, then return a value that must be saved there."""
    print("stopping the server")  # the step's log cannot be written either
    pid, port = int(os.environ["TEST_MOTO_PID"]), int(os.environ["TEST_MOTO_PORT"])
    os.kill(pid, 9)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # wait until nothing listens any more
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                break
    return [*values, 4]


@step(enable_cache=False)
def never_reached(values: list[int]) -> int:
    return len(values)


@pipeline(raise_on_failure=False)
def doomed() -> None:
    never_reached(stop_the_server(first_value()))


def test_a_server_stopped_mid_run_fails_the_step_with_one_clear_message(
    wharf_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name, value in s3.CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "1")  # an outage is waited out for 6 s
    server = MotoServer()
    try:
        bucket = server.new_bucket()
        monkeypatch.setenv("TEST_MOTO_PID", str(server.process.pid))
        monkeypatch.setenv("TEST_MOTO_PORT", str(server.port))
        monkeypatch.setenv("WHARF_ACTIVE_STACK", "on-s3")
        ws = Workspace.open(load_config())
        try:
            config = {"path": f"s3://{bucket}/w", "endpoint_url": server.endpoint}
            stacks.register_component(ws, "s3", ComponentType.ARTIFACT_STORE, "fsspec", config)
            s3_stack(ws, "on-s3", "local", "s3")
            started = time.monotonic()
            run = doomed.run_in(ws)
            elapsed = time.monotonic() - started
            with Client(ws.config, ws.store) as client:
                found = {s.name: s for s in client.list_run_steps(run.id).items}
        finally:
            ws.close()
    finally:
        server.stop()
    assert run.status is ExecutionStatus.FAILED
    assert elapsed < 60  # no retry storm
    assert found["first_value"].status is ExecutionStatus.COMPLETED
    assert len(found["first_value"].outputs) == 1
    failed = found["stop_the_server"]
    assert failed.status is ExecutionStatus.FAILED
    assert failed.outputs == {}  # nothing recorded that was not stored
    reason = failed.status_reason or ""
    assert f"Artifact store 's3://{bucket}/w' at {server.endpoint}" in reason, reason
    assert "Could not connect" in reason and "\n" not in reason
    assert "never_reached" not in found
    assert not [r for r in caplog.records if r.exc_info]  # no internal error, no traceback


# ----------------------------------------------------------------------------- an unusable store


@step(enable_cache=False)
def must_not_run() -> int:
    raise AssertionError("a step ran on an unusable artifact store")


@pipeline
def on_an_unusable_store() -> None:
    must_not_run()


@contextlib.contextmanager
def a_web_server(status: int) -> Iterator[str]:
    """The address of an HTTP server that is not S3: every request gets ``status`` and a page."""

    class Page(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<html><body>Welcome to the console</body></html>"
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


FAULTS = ["no bucket", "no server", "wrong credentials", "a web page", "not found everywhere"]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("orchestrator", ["local", "local_process"])
def test_an_unusable_store_fails_the_run_before_it_starts_in_one_line(
    fault: str,
    orchestrator: str,
    wharf_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
) -> None:
    """A missing bucket, an endpoint nobody answers at, refused credentials and an endpoint
    that is not S3 (a web page; a server answering 404) are one line naming the store and what
    is wrong, raised by the pipeline call before anything is recorded or run (code archives
    included), with no botocore traceback chained."""
    server: MotoServer = s3_server
    config: dict[str, Any] = {}
    if fault == "wrong credentials":
        monkeypatch.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "1")  # then moto checks signatures
        server = MotoServer()
        monkeypatch.setenv("WRONG_KEY", "AKIANOTAKEY")
        monkeypatch.setenv("WRONG_SECRET", "not-the-secret")
        config = {"key_env": "WRONG_KEY", "secret_env": "WRONG_SECRET"}
    with contextlib.ExitStack() as cleanup:
        if server is not s3_server:
            cleanup.callback(server.stop)
        bucket = "no-such-bucket" if fault == "no bucket" else server.new_bucket()
        endpoint = server.endpoint
        if fault == "no server":
            endpoint = f"http://127.0.0.1:{s3.free_port()}"
        elif fault in ("a web page", "not found everywhere"):
            endpoint = cleanup.enter_context(a_web_server(200 if fault == "a web page" else 404))
        monkeypatch.setenv("WHARF_ACTIVE_STACK", "unusable")
        ws = Workspace.open(load_config())
        try:
            config |= {"path": f"s3://{bucket}/w", "endpoint_url": endpoint}
            stacks.register_component(ws, "s3", ComponentType.ARTIFACT_STORE, "fsspec", config)
            travels = {"code_travels": True} if orchestrator == "local_process" else {}
            kind = ComponentType.ORCHESTRATOR
            stacks.register_component(ws, "unusable", kind, orchestrator, travels)
            stacks.register_stack(ws, "unusable", orchestrator="unusable", artifact_store="s3")
            with pytest.raises(WharfError) as caught:
                on_an_unusable_store.run_in(ws)
            with Client(ws.config, ws.store) as client:
                assert client.list_pipeline_runs().items == []
        finally:
            ws.close()
    message = str(caught.value)
    assert message.startswith(f"Artifact store 's3://{bucket}/w' at {endpoint} cannot be used: ")
    expected = {
        "no bucket": f"the bucket '{bucket}' does not exist",
        "no server": f"{endpoint} cannot be reached",
        "wrong credentials": "its credentials were refused",
        "a web page": f"did not answer a listing of the bucket '{bucket}' as S3 does",
        "not found everywhere": f"answered a listing of the bucket '{bucket}' with OSError",
    }[fault]
    assert expected in message and "\n" not in message, message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
