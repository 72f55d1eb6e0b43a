"""A real S3-compatible server for the tests: ``moto`` in server mode, as a subprocess on 127.0.0.1.

One server per test session (``s3_server``), a fresh bucket per test (``s3_bucket``); clients
are the real s3fs/botocore stack speaking HTTP to it. The server failing to start is a test
failure, never a skip. Fault tests start a server of their own (:class:`MotoServer`) to stop it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from wharf.core.ids import new_id

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "wharf-test-key",
    "AWS_SECRET_ACCESS_KEY": "wharf-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""What the tests' S3 clients sign with (moto accepts any credentials)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


PORT_TRIES = 5
"""Ports a server start tries: a free port can be taken by another process before moto binds it."""


class PortTakenError(RuntimeError):
    """The moto server could not bind its port."""


class MotoServer:
    """``python -m moto.server`` on a free port of 127.0.0.1 until :meth:`stop`."""

    def __init__(self) -> None:
        for tries_left in reversed(range(PORT_TRIES)):
            self._start(free_port())
            try:
                self._wait_ready(deadline=time.monotonic() + 30)
                return
            except PortTakenError:  # another process bound the free port first: pick another
                if not tries_left:
                    raise

    def _start(self, port: int) -> None:
        self.port = port
        self.endpoint = f"http://127.0.0.1:{self.port}"
        # werkzeug logs every request: a file, never a pipe that could fill up
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env={**os.environ, **CREDENTIALS},
        )

    def _wait_ready(self, deadline: float) -> None:
        while True:
            if self.process.poll() is not None:
                self._log.seek(0)
                err = self._log.read().decode(errors="replace")[-2000:]
                self._log.close()
                error = PortTakenError if "in use" in err else RuntimeError
                raise error(f"moto server exited with {self.process.returncode}: {err}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                    return
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto server did not answer at {self.endpoint}") from None
                time.sleep(0.05)  # polling a subprocess' readiness, with a deadline

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        )

    def new_bucket(self) -> str:
        name = f"wharf-{new_id().hex[:20]}"
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoServer]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in CREDENTIALS.items():
            mp.setenv(name, value)
        server = MotoServer()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def s3_bucket(s3_server: MotoServer) -> str:
    """A new, empty bucket on the session's server."""
    return s3_server.new_bucket()
