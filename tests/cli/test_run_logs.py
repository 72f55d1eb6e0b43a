"""``wharf runs logs`` of a run whose step was retried: every attempt's output is printed, a
retried attempt (``retrying``, final) as having ended, against a real run of a user's script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import wharf
from tests.cli.test_run_views import run_script

RETRY_SCRIPT = """
import pathlib
from wharf import pipeline, step

COUNTER = pathlib.Path(__file__).with_name("attempts")

@step(enable_cache=False, retry={"max_retries": 2})
def flaky() -> int:
    n = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(n + 1))
    print("attempt", n + 1)
    if n < 2:
        raise RuntimeError(f"flaky failure {n + 1}")
    return n

@pipeline(name="retrying")
def retrying() -> None:
    flaky()

if __name__ == "__main__":
    retrying()
"""


@pytest.fixture
def retried_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    run_script(tmp_path / "retrying.py", RETRY_SCRIPT, home)
    listed = wharf("runs", "list", "--pipeline", "retrying", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)
    return str(run["name"])


@pytest.mark.parametrize("follow", [(), ("--follow",)], ids=["once", "follow"])
def test_every_attempt_of_a_retried_step_is_printed(
    retried_run: str, follow: tuple[str, ...]
) -> None:
    result = wharf("runs", "logs", retried_run, *follow)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "its output appears when it ends" not in result.stdout
    assert "[flaky] attempt 1" in lines
    assert "[flaky] RuntimeError: flaky failure 1" in lines
    assert "[flaky (attempt 2)] attempt 2" in lines
    assert "[flaky (attempt 2)] RuntimeError: flaky failure 2" in lines
    assert lines[-1] == "[flaky (attempt 3)] attempt 3"
