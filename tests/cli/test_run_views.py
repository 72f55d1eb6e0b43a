"""Reading runs and steps from the CLI, against real runs of a user's script in real processes:
``runs show`` (the tree), short id prefixes, ``steps logs RUN STEP`` and ``runs logs
[--follow]``."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.e2e.team import ADMIN, ADMIN_PASSWORD, Service, free_port
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.client import Client
from wharf.store.models import PipelineRunRecord

SCRIPT = """
import os, time
from wharf import Client, ResourceSettings, pipeline, step

@step
def load() -> int:
    print("loading data")
    return 1

@step
def left(x: int) -> int:
    print("left side", x)
    return x + 1

@step
def right(x: int) -> int:
    return x + 2

@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def join(a: int, b: int) -> int:
    print("joined", a + b)
    print("second line")
    return a + b

@pipeline(name="diamond")
def diamond() -> None:
    x = load()
    join(left(x), right(x))

if __name__ == "__main__":
    with Client() as client:
        client.ensure_resource_pool("licenses", {"license": 2})
    diamond()
    diamond()
"""

WAITING_SCRIPT = """
import os, pathlib, time
from wharf import pipeline, step

@step(enable_cache=False)
def first() -> int:
    print("first says hi")
    return 1

@step(enable_cache=False)
def wait(x: int) -> int:
    print("waiting for release", flush=True)
    release = pathlib.Path(os.environ["RELEASE_FILE"])
    deadline = time.monotonic() + 60
    while not release.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.05)
    print("released")
    return x

@pipeline(name="waiting")
def waiting() -> None:
    wait(first())

if __name__ == "__main__":
    waiting()
"""

DEADLINE = 60.0


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def run_script(path: Path, text: str, home: Path) -> None:
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "WHARF_STORE_URL"}
    result = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**env, "WHARF_HOME": str(home)},
        cwd=path.parent,
    )
    assert result.returncode == 0, result.stderr


def _runs() -> list[PipelineRunRecord]:
    with Client(load_config()) as client:
        return list(reversed(client.list_pipeline_runs().items))


@pytest.fixture(scope="module")
def diamond_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The diamond pipeline run twice: the first runs every step, the second reuses three
    (read-only for the tests that share it)."""
    root = tmp_path_factory.mktemp("diamond")
    run_script(root / "diamond.py", SCRIPT, root / "home")
    return root / "home"


@pytest.fixture
def two_runs(diamond_home: Path, monkeypatch: pytest.MonkeyPatch) -> list[PipelineRunRecord]:
    monkeypatch.setenv("WHARF_HOME", str(diamond_home))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    return _runs()


def test_show_prints_the_pipeline_duration_and_the_steps_as_a_tree(
    two_runs: list[PipelineRunRecord],
) -> None:
    first, second = two_runs
    result = wharf("runs", "show", str(second.id)[:8])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["Run", second.name, f"({second.id})"]
    assert lines[1].split() == ["Pipeline", "diamond"]
    assert lines[2].split() == ["Stack", "default"]  # the stack it ran on
    assert lines[3].split() == ["Status", "completed"]
    assert any(line.startswith("Duration") for line in lines)
    table = lines[lines.index("Steps (4)") + 1 :]
    assert table[0].split() == ["STEP", "STATUS", "DURATION", "DETAILS"]
    steps = [row.split()[:3] for row in table[1:]]
    assert steps == [
        ["load", "cached", "-"],
        ["├─", "left", "cached"],
        ["│", "└─", "join"],
        ["└─", "right", "cached"],
        ["└─", "↳", "join"],
    ]
    assert table[1].endswith(f"cached from run {first.name}")
    join = table[3]
    assert "completed" in join and "asked 1 license; got 1 license in pool licenses" in join
    assert table[5].endswith("listed under left")


def test_show_as_json_keeps_the_records(two_runs: list[PipelineRunRecord]) -> None:
    _, second = two_runs
    shown = json.loads(wharf("runs", "show", second.name, "-o", "json").stdout)
    assert shown["id"] == str(second.id) and shown["pipeline_name"] == "diamond"
    assert (shown["stack_name"], shown["stack_deleted"]) == ("default", False)
    assert [s["name"] for s in shown["steps"]] == ["load", "left", "right", "join"]


def test_short_ids_everywhere_a_full_id_is_accepted(two_runs: list[PipelineRunRecord]) -> None:
    first, _ = two_runs
    with Client(load_config()) as client:
        join = client.get_run_step(first.id, "join")
        version = next(iter(join.outputs.values()))
    assert wharf("runs", "show", str(first.id)[:4]).returncode == 0
    shown = wharf("steps", "list", "--run", first.id.hex[:6], "-o", "json")
    assert len(json.loads(shown.stdout)) == 4
    assert "joined 5" in wharf("steps", "logs", join.id.hex[:6]).stdout
    assert wharf("runs", "list", "--pipeline", str(first.pipeline_id)[:5]).returncode == 0
    with Client(load_config()) as client:
        assert client.get_artifact_version(version.hex[:7]).id == version
    assert_one_line_error(wharf("runs", "show", str(first.id)[:3]), "No pipeline run")


def test_an_ambiguous_prefix_is_a_one_line_error_naming_the_candidates(
    diamond_home: Path, home: Path
) -> None:
    """On a copy of the diamond's home, its two runs' ids made to start alike."""
    shutil.copytree(diamond_home, home)
    two_runs = _runs()
    twins = [UUID("abcd1" + "0" * 27), UUID("abcd2" + "0" * 27)]
    with closing(sqlite3.connect(home / "wharf.db")) as conn, conn:
        for run, new in zip(two_runs, twins, strict=True):
            for sql in (
                "UPDATE pipeline_run SET id = ? WHERE id = ?",
                "UPDATE step_run SET run_id = ? WHERE run_id = ?",
            ):
                conn.execute(sql, (new.hex, run.id.hex))
    result = wharf("runs", "show", "abcd")
    assert_one_line_error(result, "'abcd' is the start of several pipeline run ids")
    assert str(twins[0]) in result.stderr and str(twins[1]) in result.stderr
    assert wharf("runs", "show", "abcd2").returncode == 0
    assert_one_line_error(wharf("runs", "logs", "ABCD"), "several pipeline run ids")


def test_steps_logs_by_run_and_step_name(two_runs: list[PipelineRunRecord]) -> None:
    first, second = two_runs
    assert wharf("steps", "logs", first.name, "join").stdout == "joined 5\nsecond line\n"
    assert wharf("steps", "logs", str(second.id)[:8], "load").stdout == "loading data\n"
    assert_one_line_error(
        wharf("steps", "logs", first.name, "nope"), f"Run '{first.name}' has no step 'nope'"
    )
    with Client(load_config()) as client:
        join = client.get_run_step(second.id, "join")
    by_id = wharf("steps", "logs", str(join.id))  # the old form keeps working
    assert by_id.stdout == "joined 5\nsecond line\n"
    assert_one_line_error(wharf("steps", "logs", str(first.id), str(join.id)), "is not a step")


def test_runs_logs_prints_every_step_with_its_name(two_runs: list[PipelineRunRecord]) -> None:
    first, second = two_runs
    result = wharf("runs", "logs", str(first.id))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "[load] loading data",
        "[left] left side 1",
        "[join] joined 5",
        "[join] second line",
    ]
    cached = wharf("runs", "logs", second.name).stdout.splitlines()
    assert cached == [
        f"[load] cached from run {first.name}.",
        f"[left] cached from run {first.name}.",
        f"[right] cached from run {first.name}.",
        "[join] joined 5",
        "[join] second line",
    ]


@pytest.fixture
def waiting_run(home: Path, tmp_path: Path) -> Iterator[tuple[PipelineRunRecord, Path]]:
    """A run whose ``wait`` step runs until the yielded file exists (created at the end)."""
    yield from _waiting(tmp_path, WAITING_SCRIPT)


def _waiting(tmp_path: Path, text: str) -> Iterator[tuple[PipelineRunRecord, Path]]:
    release = tmp_path / "release"
    script = tmp_path / "waiting.py"
    script.write_text(text)
    env = {**os.environ, "RELEASE_FILE": str(release)}
    process = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        yield _wait_for_running_step(process), release
    finally:
        release.touch()
        _, err = process.communicate(timeout=DEADLINE)
        assert process.returncode == 0, err


def _wait_for_running_step(process: subprocess.Popen[bytes]) -> PipelineRunRecord:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert process.poll() is None, "the pipeline ended early"
        with Client(load_config()) as client:
            runs = client.list_pipeline_runs().items
            if runs and client.list_run_steps(runs[0].id, names=["wait"], status="running").total:
                return runs[0]
        time.sleep(0.05)
    raise TimeoutError("the wait step never started")


def _follow(run: PipelineRunRecord) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "wharf.cli.main", "runs", "logs", str(run.id)[:8], "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_running_step_s_logs_say_when_they_come_and_follow_streams_them_to_the_end(
    waiting_run: tuple[PipelineRunRecord, Path],
) -> None:
    """One run waiting in its ``wait`` step: ``runs logs`` and ``steps logs`` say when its
    output comes, a ``--follow`` ends cleanly on Ctrl-C, another streams every step until the
    run finishes, and then ``steps logs`` prints the step's output."""
    run, release = waiting_run
    result = wharf("runs", "logs", run.name)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "[first] first says hi",
        "[wait] running: its output appears when it ends (--follow waits for it).",
    ]
    running = wharf("steps", "logs", run.name, "wait")
    assert running.returncode == 0 and running.stdout == ""
    assert running.stderr == (
        "Step 'wait' is running: its output is stored when it ends "
        "(wharf runs logs RUN --follow prints it then).\n"
    )

    interrupted, follower = _follow(run), _follow(run)
    assert interrupted.stdout is not None and follower.stdout is not None
    assert interrupted.stdout.readline() == "[first] first says hi\n"
    assert interrupted.stdout.readline().startswith("[wait] running")
    interrupted.send_signal(signal.SIGINT)  # Ctrl-C ends a follow quietly
    _, err = interrupted.communicate(timeout=DEADLINE)
    assert interrupted.returncode == 130, err  # as any interrupted command
    assert err == ""

    assert follower.stdout.readline() == "[first] first says hi\n"
    assert follower.stdout.readline() == "[wait] running: its output appears when it ends.\n"
    release.touch()
    rest, err = follower.communicate(timeout=DEADLINE)
    assert follower.returncode == 0, err
    assert rest.splitlines() == ["[wait] waiting for release", "[wait] released"]
    with Client(load_config()) as client:
        assert client.get_pipeline_run(run.id).status is ExecutionStatus.COMPLETED
    ended = wharf("steps", "logs", run.name, "wait")
    assert (ended.returncode, ended.stdout, ended.stderr) == (
        0,
        "waiting for release\nreleased\n",
        "",
    )


@pytest.fixture
def waiting_before_two_steps(
    home: Path, tmp_path: Path
) -> Iterator[tuple[PipelineRunRecord, Path]]:
    """As ``waiting_run``, with two more steps after ``wait``."""
    text = WAITING_SCRIPT.replace(
        "    wait(first())",
        "    report(score(wait(first())))",
    ).replace(
        '@pipeline(name="waiting")',
        "@step\ndef score(x: int) -> int:\n    return x\n\n"
        "@step\ndef report(x: int) -> None:\n    pass\n\n"
        '@pipeline(name="waiting")',
    )
    yield from _waiting(tmp_path, text)


def test_show_lists_the_steps_a_running_run_has_not_started(
    waiting_before_two_steps: tuple[PipelineRunRecord, Path],
) -> None:
    run, release = waiting_before_two_steps
    result = wharf("runs", "show", run.name)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Steps (4)" in lines
    table = [line.split(None, 2)[:2] for line in lines[lines.index("Steps (4)") + 2 :]]
    assert table == [
        ["first", "completed"],
        ["└─", "wait"],
        ["└─", "score"],
        ["└─", "report"],
    ]
    assert lines[-2].split()[2:] == ["pending", "-", "waits", "for", "wait"]
    assert lines[-1].split()[2:] == ["pending", "-", "waits", "for", "score"]
    shown = json.loads(wharf("runs", "show", run.name, "--output", "json").stdout)
    assert shown["steps_not_started"] == ["score", "report"]
    release.touch()


TEAM_SCRIPT = SCRIPT.replace(
    ', settings={"resources": ResourceSettings(resources={"license": 1})}', ""
).replace(
    """    with Client() as client:
        client.ensure_resource_pool("licenses", {"license": 2})
""",
    "",
)


def _workspace_server(database_url: str, workdir: Path) -> tuple[Service, dict[str, str]]:
    """A ``wharf server serve`` process on ``database_url`` with no Resource Manager (the
    team script asks for no resources), and what its admin's SDK sets to use it."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(workdir / "service-home")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = Service(
        "workspace server",
        [
            *("server", "serve", "--port", str(port), "--db-url", database_url),
            *("--secret-key", secrets.token_urlsafe(48)),
            *("--admin-username", ADMIN, "--admin-password", ADMIN_PASSWORD),
            *("--artifact-root", str(workdir / "shared-artifacts"), "--log-level", "warning"),
        ],
        env,
        f"{url}/health",
        workdir / "server.log",
    )
    server.start()
    try:
        answer = httpx.post(
            f"{url}/api/v1/auth/login",
            json={"username": ADMIN, "password": ADMIN_PASSWORD},
            timeout=30,
        )
        answer.raise_for_status()
    except BaseException:
        server.stop()
        raise
    return server, {"WHARF_SERVER_URL": url, "WHARF_API_KEY": answer.json()["access_token"]}


@pytest.mark.slow
def test_team_mode_reads_through_the_workspace_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_database_url: Any
) -> None:
    """Short ids, the tree, and logs by step name, over REST (a real server process on
    PostgreSQL)."""
    assert "ensure_resource_pool" not in TEAM_SCRIPT and "license" not in TEAM_SCRIPT
    server, user_env = _workspace_server(empty_database_url("postgresql"), tmp_path / "team")
    try:
        home = tmp_path / "home"
        monkeypatch.setenv("WHARF_HOME", str(home))
        monkeypatch.delenv("WHARF_STORE_URL", raising=False)
        for name, value in user_env.items():
            monkeypatch.setenv(name, value)
        run_script(tmp_path / "diamond.py", TEAM_SCRIPT, home)
        first, second = _runs()
        shown = wharf("runs", "show", second.id.hex[:8])
        assert shown.returncode == 0, shown.stderr
        assert f"cached from run {first.name}" in shown.stdout and "└─ ↳ join" in shown.stdout
        logs = wharf("steps", "logs", first.id.hex[:6], "join")
        assert logs.stdout == "joined 5\nsecond line\n", logs.stderr
        all_logs = wharf("runs", "logs", str(first.id)[:8]).stdout.splitlines()
        assert all_logs[0] == "[load] loading data" and all_logs[-1] == "[join] second line"
        assert_one_line_error(wharf("runs", "show", "ffff-ffff"), "ffff-ffff")
    finally:
        server.stop()


def test_a_schedule_by_short_id(home: Path) -> None:
    from tests.e2e import steps_lib
    from wharf import Schedule, pipeline

    @pipeline(name="polling", schedule=Schedule(interval_seconds=600, name="poll"))
    def poll() -> None:
        steps_lib.produce()

    poll()
    with Client(load_config()) as client:
        schedule = client.get_schedule("poll")
    shown = wharf("schedule", "show", schedule.id.hex[:6], "-o", "json")
    assert json.loads(shown.stdout)["id"] == str(schedule.id), shown.stderr
    paused = wharf("schedule", "pause", str(schedule.id)[:9])
    assert paused.stdout.strip() == "Schedule 'poll' is paused."
