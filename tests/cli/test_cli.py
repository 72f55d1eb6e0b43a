"""The ``wharf`` command, run as a real subprocess against a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.import_probe import loaded_after
from wharf import pipeline
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


def wharf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=60,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    return home


@pytest.fixture
def finished_run(home: Path):
    @pipeline(name="cli_pipeline")
    def p() -> None:
        steps_lib.double(steps_lib.produce())

    workspace = Workspace.open(load_config())
    try:
        yield p.run_in(workspace)
    finally:
        workspace.close()


def test_version_and_help() -> None:
    result = wharf("--version")
    assert result.returncode == 0 and "0.1.0" in result.stdout
    result = wharf("--help")
    assert result.returncode == 0
    for group in ("runs", "steps", "pipelines", "artifacts"):
        assert group in result.stdout


def test_help_does_not_import_the_engine() -> None:
    code = "from wharf.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    assert loaded_after(code, ["sqlalchemy", "wharf.execution", "wharf.sdk", "pydantic"]) == []


def test_lists_as_json(finished_run) -> None:
    runs = json.loads(wharf("runs", "list", "--output", "json").stdout)
    assert [r["id"] for r in runs] == [str(finished_run.id)]
    assert runs[0]["status"] == "completed"
    steps = json.loads(wharf("steps", "list", "--run", finished_run.name, "-o", "json").stdout)
    assert [s["name"] for s in steps] == ["produce", "double"]
    pipelines = json.loads(wharf("pipelines", "list", "-o", "json").stdout)
    assert [p["name"] for p in pipelines] == ["cli_pipeline"]
    artifacts = json.loads(wharf("artifacts", "list", "-o", "json").stdout)
    assert {a["name"] for a in artifacts} == {
        "cli_pipeline::produce::output",
        "cli_pipeline::double::output",
    }
    versions = json.loads(wharf("artifacts", "list", "--versions", "-o", "json").stdout)
    assert len(versions) == 2


def test_tables(finished_run) -> None:
    result = wharf("runs", "list")
    assert result.returncode == 0 and finished_run.name[:20] in result.stdout
    shown = wharf("runs", "show", str(finished_run.id))
    assert shown.returncode == 0 and "double" in shown.stdout and "completed" in shown.stdout
    shown_json = json.loads(wharf("runs", "show", finished_run.name, "-o", "json").stdout)
    assert [s["name"] for s in shown_json["steps"]] == ["produce", "double"]


def test_a_filter_matching_nothing_says_so_on_stderr(finished_run) -> None:
    """Not a bare header, as if the table failed to load; stdout stays the header (for
    scripts) and JSON stays ``[]``."""
    empty = wharf("runs", "list", "--status", "failed")
    assert empty.returncode == 0
    assert empty.stdout.splitlines() == [
        "Pipeline runs",
        "NAME  STATUS  STACK  CREATED  END_TIME  ID",
    ]
    assert empty.stderr == "No pipeline runs match.\n"
    versions = wharf("artifacts", "list", "--versions", "--name", "cli_pipeline::nothing")
    assert versions.stderr.splitlines()[0] == "No artifact versions match."
    as_json = wharf("runs", "list", "--status", "failed", "-o", "json")
    assert json.loads(as_json.stdout) == [] and as_json.stderr == ""
    assert wharf("runs", "list").stderr == ""  # something to show: no note


def test_an_empty_store_says_there_is_nothing_yet_not_that_nothing_matches(home: Path) -> None:
    """No filter given: "No ... match." would blame a filter there is none of."""
    runs = wharf("runs", "list")
    assert runs.returncode == 0, runs.stderr
    assert runs.stderr == (
        "No pipeline runs yet: running a pipeline (python my_pipeline.py) makes one.\n"
    )
    assert wharf("pipelines", "list").stderr.startswith("No pipelines yet: ")
    assert wharf("artifacts", "list").stderr.startswith("No artifacts yet: ")
    assert wharf("artifacts", "list", "--versions").stderr.startswith("No artifact versions yet")
    # a filter on the same empty store still says nothing matches it
    assert wharf("runs", "list", "--status", "failed").stderr == "No pipeline runs match.\n"


def test_unknown_run(home: Path) -> None:
    assert_one_line_error(wharf("runs", "show", "no-such-run"), "no-such-run")
    assert_one_line_error(
        wharf("runs", "stop", "00000000-0000-0000-0000-000000000000"), "No pipeline run"
    )


def test_stop_finished_run(finished_run) -> None:
    assert_one_line_error(wharf("runs", "stop", str(finished_run.id)), "already finished")


def test_unreachable_database(home: Path) -> None:
    result = wharf("runs", "list", env={"WHARF_STORE_URL": "postgresql://postgres@127.0.0.1:1/x"})
    assert_one_line_error(result, "127.0.0.1:1")


def test_bad_page_size(home: Path) -> None:
    result = wharf("runs", "list", "--size", "5000")
    assert result.returncode != 0 and "Traceback" not in result.stderr


def test_schema_newer_than_code(home: Path) -> None:
    import sqlite3

    assert wharf("runs", "list").returncode == 0  # creates and migrates the store
    with sqlite3.connect(home / "wharf.db") as db:
        db.execute("UPDATE alembic_version SET version_num = 'f00dfeedbeef'")
    assert_one_line_error(wharf("runs", "list"), "newer")


def test_unreadable_store_url(home: Path) -> None:
    result = wharf("runs", "list", env={"WHARF_STORE_URL": "nosuchdb://x"})
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_tables_are_plain_aligned_columns(finished_run) -> None:
    lines = wharf("runs", "list").stdout.splitlines()
    assert lines[0] == "Pipeline runs"
    header, row = lines[1], lines[2]
    assert header.split() == ["NAME", "STATUS", "STACK", "CREATED", "END_TIME", "ID"]
    assert row.startswith(finished_run.name) and row.endswith(f"  {finished_run.id.hex[:8]}")
    assert header.index("STATUS") == row.index("completed")  # columns line up
    shown = wharf("runs", "show", row.split()[-1])  # the short id is one RUN takes
    assert shown.returncode == 0 and finished_run.name in shown.stdout, shown.stderr
    paged = wharf("steps", "list", "--run", finished_run.name, "--size", "1").stdout
    assert paged.splitlines()[-1] == "1 of 2 shown; use --page/--size for more."


def test_table_cells_are_literal_one_line_text_aligned_by_display_width() -> None:
    from wharf.cli.output import format_table

    lines = format_table(("name", "note"), [["[bold]x[/]", "two\nlines\x1b[31m"], ["表表", "-"]])
    assert lines == [
        "NAME        NOTE",
        "[bold]x[/]  two lines [31m",
        "表表        -",
    ]


def test_main_in_process_leaves_the_garbage_collector_as_it_was() -> None:
    import gc

    from wharf.cli.main import main

    assert gc.isenabled()
    main(["runs", "--help"])  # a short-lived group: runs with the collector off
    assert gc.isenabled()
    gc.disable()
    try:
        main(["server", "--help"])  # a group that turns the collector on
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_commands_that_may_run_for_long_keep_the_garbage_collector_on() -> None:
    import gc

    import click

    from wharf.cli.main import COMMANDS, SHORT_LIVED, cli

    assert SHORT_LIVED.issubset(COMMANDS)
    ctx = click.Context(cli)
    gc.disable()
    try:
        cli.get_command(ctx, "runs")
        assert not gc.isenabled()
        cli.get_command(ctx, "server")
        assert gc.isenabled()
    finally:
        gc.enable()


def test_listing_an_up_to_date_store_imports_no_migration_or_rendering_machinery(
    home: Path,
) -> None:
    assert wharf("runs", "list").returncode == 0  # creates and migrates the store
    code = "from wharf.cli.main import main\nmain(['runs', 'list'])\n"
    assert loaded_after(code, ["alembic", "sqlalchemy.orm", "rich.console", "rich.table"]) == []


def test_short_run_ids_grow_until_the_listed_ones_differ() -> None:
    from uuid import UUID

    from wharf.cli.runs import short_ids

    a, b = (
        UUID("12345678-9abc-4def-8123-456789abcdef"),
        UUID("12345678-9abd-4def-8123-456789abcdef"),
    )
    assert short_ids([a], 1) == {a: "12345678"}
    assert short_ids([a, b], 2) == {a: "123456789abc", b: "123456789abd"}
    assert short_ids([a], 70_000) == {a: "123456789"}  # git's rule past 65535 runs
