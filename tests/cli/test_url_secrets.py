"""A server or Resource Manager URL carrying a secret query parameter (``?token=``) is shown
with that value as ``***`` in the CLI's error line (``wharf.core.url_credentials``). Real
``wharf`` processes against a port that refuses connections."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.resource_manager.api.live import free_socket

SECRET = "S3cretTok"


@pytest.fixture
def refused() -> Iterator[str]:
    """``http://127.0.0.1:PORT``: a port bound, never listening, so connections are refused."""
    sock = free_socket()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    return {**env, "WHARF_HOME": str(tmp_path / "home"), **extra}


def test_an_unreachable_server_url_is_shown_without_its_token(tmp_path: Path, refused: str) -> None:
    url = f"{refused}/?token={SECRET}"
    env = _env(tmp_path, WHARF_SERVER_URL=url, WHARF_API_KEY="k" * 20)
    result = run("runs", "list", env=env)
    assert_one_line_error(result, f"Cannot reach the Wharf server at {refused}/?token=***")
    assert SECRET not in result.stdout + result.stderr


def test_an_unreachable_resource_manager_url_is_shown_without_its_key(
    tmp_path: Path, refused: str
) -> None:
    url = f"{refused}/?api_key={SECRET}&sig={SECRET}"
    result = run("pool", "list", "--rm-url", url, "--api-key", "k" * 20, env=_env(tmp_path))
    assert_one_line_error(
        result, f"The Resource Manager at {refused}/?api_key=***&sig=*** is unreachable"
    )
    assert SECRET not in result.stdout + result.stderr
