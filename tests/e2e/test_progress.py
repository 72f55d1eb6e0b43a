"""Progress on the submitting terminal: a pipeline script run in its own process prints one line
per step event on stderr and a summary; ``WHARF_LOGGING_VERBOSITY`` turns it down,
``WHARF_LOGGING_FORMAT=json`` makes each line a JSON object, and an application's own logging
configuration is used as it is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.team import ADMIN, start_team
from tests.e2e.test_isolated import make_stack
from wharf.config.global_config import load_config
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace

SCRIPT = """
import pathlib
import sys
import time

from wharf import ResourceSettings, RetryConfig, pipeline, step

WORK = pathlib.Path(sys.argv[2])


@step
def load() -> int:
    return 1


@step(retry=RetryConfig(max_retries=1))
def flaky(x: int) -> int:
    marker = WORK / "flaky-tried"
    if not marker.exists():
        marker.write_text("once")
        raise RuntimeError("first try fails")
    return x


@step
def boom(x: int) -> int:
    raise ValueError("boom\\nsecond line")


@step(settings={"resources": ResourceSettings(cpu_count=1)})
def hold(label: str) -> str:
    deadline = time.monotonic() + 120
    while not (WORK / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return label


@step(settings={"resources": ResourceSettings(resources={"license": 1})})
def hold_license(label: str) -> str:
    return hold.func(label)


@pipeline(execution_mode="continue_on_failure")
def basic() -> None:
    x = load()
    flaky(x)
    boom(x)


@pipeline(execution_mode="continue_on_failure")
def queued() -> None:
    hold(label="a")
    hold(label="b")
    boom(1)


@pipeline
def licensed() -> None:
    hold_license(label="a")
    hold_license(label="b")


@pipeline
def quiet() -> None:
    load()


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "app-logging":
        import logging

        logging.basicConfig(level=logging.INFO, format="APP %(levelname)s %(name)s %(message)s")
    try:
        globals()[sys.argv[1]]()
    except Exception:
        sys.exit(3)  # a failed run raises; the lines before are what is tested
"""

LINE = re.compile(r"^\d\d:\d\d:\d\d \[wharf\] ")


@pytest.fixture
def script(wharf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("WHARF_LOGGING_VERBOSITY", "WHARF_LOGGING_FORMAT"):
        monkeypatch.delenv(name, raising=False)
    # 1 s: a liveness timeout of 6 s, which a step process started on a busy machine meets
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "1")
    path = tmp_path / "pipelines.py"
    path.write_text(SCRIPT)
    return path


def run_script(script: Path, which: str, *extra: str, **env: str) -> list[str]:
    """The stderr lines of ``python script which`` (the pipeline ``which``)."""
    done = subprocess.run(
        [sys.executable, str(script), which, str(script.parent), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
        cwd=script.parent,
    )
    assert done.returncode in (0, 3), done.stderr
    return done.stderr.splitlines()


def run_until_waiting(script: Path, which: str, **env: str) -> list[str]:
    """The stderr lines of ``python script which``, whose steps ``hold`` until the test saw a
    step say it waits for resources."""
    process = subprocess.Popen(
        [sys.executable, str(script), which, str(script.parent)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        cwd=script.parent,
    )
    lines: list[str] = []
    waiting = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            if "waiting for resources" in line:
                waiting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert waiting.wait(120), "no step said it waits:\n" + "\n".join(lines)
    finally:
        (script.parent / "release").write_text("go")
        process.wait(timeout=120)
        reader.join(timeout=30)
    assert process.returncode == 0 or which == "queued", "\n".join(lines)
    return lines


def progress(lines: list[str]) -> list[str]:
    """The progress lines, without their time prefix."""
    return [LINE.sub("", line) for line in lines if LINE.match(line)]


def has(lines: list[str], pattern: str) -> bool:
    return any(re.fullmatch(pattern, line) for line in lines)


def test_inline_steps_print_started_completed_failed_retrying_and_a_summary(script: Path):
    lines = progress(run_script(script, "basic"))
    assert has(lines, r"Run 'basic-\S+' of pipeline 'basic' started\.")
    assert has(lines, r"Step 'load' started \(inline\)\.")
    assert has(lines, r"Step 'load' completed in \d+\.\d+ s\.")
    assert has(
        lines,
        r"WARNING: Step 'flaky' attempt 1 of 2 failed, retrying: RuntimeError: first try fails",
    )
    assert has(lines, r"Step 'flaky' started \(attempt 2 of 2, inline\)\.")
    assert has(lines, r"Step 'flaky' completed in \d+\.\d+ s\.")
    assert has(lines, r"ERROR: Step 'boom' failed in \d+\.\d+ s: ValueError: boom")
    assert lines[-1].startswith("ERROR: Run 'basic-")
    assert re.search(r" failed in \d+\.\d+ s: 2 completed, 1 failed, 1 retried\. ", lines[-1])

    again = progress(run_script(script, "basic"))
    name = re.search(r"Run '(\S+)'", lines[-1])
    assert name is not None
    workspace = Workspace.open(load_config())
    try:
        first = next(r for r in workspace.store.runs.list().items if r.name == name.group(1))
    finally:
        workspace.close()
    assert f"Step 'load' cached (from run {first.id.hex[:8]})." in again
    assert f"Step 'flaky' cached (from run {first.id.hex[:8]})." in again
    assert re.search(r": 2 cached, 1 failed\. ", again[-1])


def test_isolated_steps_waiting_for_the_local_pool(script: Path, wharf_home: Path):
    """Two steps ask for a CPU while the local pool admits one step at a time: the second
    waits, and says for what, until the test lets the first finish."""
    workspace = Workspace.open(load_config())
    try:
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    lines = run_until_waiting(
        script, "queued", WHARF_ACTIVE_STACK="procs", WHARF_LOCAL_STEP_SLOTS="1"
    )
    shown = progress(lines)
    assert has(shown, r"Step 'hold(_2)?' started in its own process\.")
    assert has(
        shown,
        r"Step 'hold(_2)?' waiting for resources in pool 'local': 1 CPU \(Waiting .+\)",
    )
    assert has(shown, r"Step 'hold' completed in \d+\.\d+ s\.")
    assert has(shown, r"Step 'hold_2' completed in \d+\.\d+ s\.")
    assert has(shown, r"Step 'boom' started in its own process\.")
    assert has(shown, r"ERROR: Step 'boom' failed in \d+\.\d+ s: ValueError: boom")
    assert re.search(r"Run 'queued-\S+' failed in .*: 2 completed, 1 failed\.", shown[-1])


def test_verbosity_warning_silences_progress(script: Path):
    assert progress(run_script(script, "quiet")) != []
    lines = run_script(script, "quiet", WHARF_LOGGING_VERBOSITY="WARNING")
    assert "[wharf]" not in "\n".join(lines)
    failing = progress(run_script(script, "basic", WHARF_LOGGING_VERBOSITY="warning"))
    assert not has(failing, r"Step '\w+' (started|completed).*")
    assert has(failing, r"ERROR: Step 'boom' failed in .*")


def test_json_format_gives_one_object_per_line(script: Path):
    lines = run_script(script, "basic", WHARF_LOGGING_FORMAT="json")
    objects = [json.loads(line) for line in lines if line.strip()]
    events = [o for o in objects if o["event"] != "log"]
    kinds = {(o["event"], o.get("step")) for o in events}
    assert {
        ("run_started", None),
        ("step_started", "load"),
        ("step_completed", "load"),
        ("step_retrying", "flaky"),
        ("step_failed", "boom"),
        ("run_finished", None),
    } <= kinds
    failed = next(o for o in events if o["event"] == "step_failed")
    assert failed["status"] == "failed" and failed["reason"] == "ValueError: boom"
    assert isinstance(failed["duration_s"], float | int)
    summary = events[-1]
    assert summary["event"] == "run_finished" and summary["status"] == "failed"
    assert summary["counts"] == {"completed": 2, "failed": 1, "retried": 1}
    assert all(o["run"] == summary["run"] for o in events)


def test_an_application_logging_configuration_is_used_as_it_is(script: Path):
    lines = run_script(script, "quiet", "app-logging")
    assert not any(LINE.match(line) for line in lines)
    assert any(
        re.fullmatch(r"APP INFO wharf\.progress Step 'load' (started \(inline\)|cached .*)\.", x)
        for x in lines
    )
    assert any(line.startswith("APP INFO wharf.progress Run 'quiet-") for line in lines)


def test_team_mode_prints_the_same_lines(
    script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_database_url: Any
):
    """Against a workspace server and a Resource Manager service (real processes on
    PostgreSQL): a step waiting for a licence names the team's pool, and re-runs are cached."""
    team = start_team(
        empty_database_url("postgresql"), empty_database_url("postgresql"), tmp_path / "team"
    )
    try:
        for name, value in team.user_env().items():
            monkeypatch.setenv(name, value)
        rm = team.rm_client()
        try:
            ensure_pool(rm, "licenses", {"license": 1}, account=ADMIN)
        finally:
            rm.close()
        shown = progress(run_until_waiting(script, "licensed"))
        assert has(
            shown,
            r"Step 'hold_license(_2)?' waiting for resources in pool 'licenses': 1 license "
            r"\(Waiting .+\)",
        )
        assert has(shown, r"Step 'hold_license_2' completed in \d+\.\d+ s\.")
        assert re.search(r"Run 'licensed-\S+' completed in .*: 2 completed\.", shown[-1])
        first = progress(run_script(script, "basic"))
        assert has(first, r"ERROR: Step 'boom' failed in \d+\.\d+ s: ValueError: boom")
        assert has(first, r"WARNING: Step 'flaky' attempt 1 of 2 failed, retrying: .+")
        again = progress(run_script(script, "basic"))
        assert has(again, r"Step 'load' cached \(from run [0-9a-f]{8}\)\.")
        assert re.search(r": 2 cached, 1 failed\. ", again[-1])
    finally:
        team.stop()
