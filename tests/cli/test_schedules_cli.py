"""``wharf schedule list | show | pause | resume | delete``, run as real subprocesses against the
embedded store, and the ``Client`` methods behind them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, home, wharf  # noqa: F401 (fixture)
from tests.e2e import steps_lib
from wharf import Client, Schedule, pipeline
from wharf.config.global_config import load_config
from wharf.core.errors import EntityExistsError, EntityNotFoundError


@pytest.fixture
def scheduled(home: Path) -> None:  # noqa: F811
    """Two pipelines, each run once with a schedule recorded (the local orchestrator runs it
    once now)."""

    @pipeline(
        name="nightly_training", schedule=Schedule(cron_expression="0 3 * * *", name="nightly")
    )
    def nightly() -> None:
        steps_lib.produce()

    @pipeline(name="polling", schedule=Schedule(interval_seconds=600, name="poll"))
    def poll() -> None:
        steps_lib.produce()

    nightly()
    poll()


def test_list_show_pause_resume_delete(scheduled: None) -> None:
    table = wharf("schedule", "list")
    assert table.returncode == 0, table.stderr
    assert "cron 0 3 * * *" in table.stdout and "every 600 s" in table.stdout
    listed = json.loads(wharf("schedule", "list", "--pipeline", "polling", "-o", "json").stdout)
    assert [s["name"] for s in listed] == ["poll"]

    shown = json.loads(wharf("schedule", "show", "nightly", "-o", "json").stdout)
    assert shown["cron_expression"] == "0 3 * * *" and shown["active"] is True
    assert wharf("schedule", "pause", "nightly").stdout.strip() == "Schedule 'nightly' is paused."
    assert (
        json.loads(wharf("schedule", "show", shown["id"], "-o", "json").stdout)["active"] is False
    )
    assert (
        wharf("schedule", "resume", shown["id"]).stdout.strip() == "Schedule 'nightly' is active."
    )

    refused = wharf("schedule", "delete", "nightly")  # no terminal to confirm on: aborted
    assert refused.returncode != 0
    deleted = wharf("schedule", "delete", "nightly", "--yes")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "Deleted schedule 'nightly'."
    remaining = json.loads(wharf("schedule", "list", "-o", "json").stdout)
    assert [s["name"] for s in remaining] == ["poll"]
    runs = json.loads(wharf("runs", "list", "-o", "json").stdout)
    assert len(runs) == 2  # the runs a deleted schedule started stay


def test_bad_input_is_one_line(scheduled: None) -> None:
    assert_one_line_error(wharf("schedule", "show", "never"), "No schedule named 'never'")
    assert_one_line_error(wharf("schedule", "delete", "never", "--yes"), "No schedule named")
    assert_one_line_error(
        wharf("schedule", "list", "--pipeline", "nope"), "No pipeline named 'nope'"
    )
    hint = "No schedule named 'nigthly'; did you mean 'nightly'?"
    assert_one_line_error(wharf("schedule", "show", "nigthly"), hint)
    assert_one_line_error(wharf("schedule", "pause", "nigthly"), hint)
    assert_one_line_error(wharf("schedule", "delete", "nigthly", "--yes"), hint)
    assert_one_line_error(
        wharf("schedule", "list", "--pipeline", "poling"),
        "No pipeline named 'poling'; did you mean 'polling'?",
    )


def test_the_client_finds_schedules_by_name_or_id(scheduled: None) -> None:
    with Client(load_config()) as client:
        nightly = client.get_schedule("nightly")
        assert client.get_schedule(str(nightly.id)) == nightly
        assert client.list_schedules(name="poll").total == 1
        assert not client.set_schedule_active(nightly.id, False).active
        assert client.delete_schedule("nightly").id == nightly.id
        with pytest.raises(EntityNotFoundError):
            client.get_schedule(nightly.id)


def test_a_second_schedule_of_the_same_name_says_how_to_replace_it(scheduled: None) -> None:
    @pipeline(name="polling", schedule=Schedule(interval_seconds=60, name="poll"))
    def poll() -> None:
        steps_lib.produce()

    with pytest.raises(EntityExistsError, match="wharf schedule delete poll"):
        poll()
    with Client(load_config()) as client:
        assert client.get_schedule("poll").interval_seconds == 600  # the first one, unchanged
        assert client.list_pipeline_runs(pipeline="polling").total == 1  # no run was left
