"""A run that nothing matches, as a new user names one (``wharf.core.ids.run_not_found``): a
pipeline's name given for a run says how to list its runs, a hex prefix too short to be an id
says how long one must be; the quick read path (``runs show``) and the ``Client`` (``runs logs``,
``runs stop``) say the same one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.cli.test_run_views import run_script

SCRIPT = """
from wharf import pipeline, step

@step
def load() -> int:
    return 1

@pipeline(name="training")
def training() -> None:
    load()

if __name__ == "__main__":
    training()
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lookup")
    run_script(root / "training.py", SCRIPT, root / "home")
    return root / "home"


@pytest.mark.parametrize("command", ["show", "logs", "stop"])
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            "training",
            "Error: No pipeline run with id or name 'training'. 'training' is a pipeline: "
            "wharf runs list --pipeline 'training' lists its runs.",
        ),
        (
            "abc",
            "Error: No pipeline run with id or name 'abc'. "
            "An id prefix needs at least 4 hex digits.",
        ),
        ("trainin", "Error: No pipeline run with id or name 'trainin'."),
    ],
)
def test_a_run_nothing_matches_is_one_line_with_a_hint(
    home: Path, monkeypatch: pytest.MonkeyPatch, command: str, given: str, expected: str
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    result = wharf("runs", command, given)
    assert_one_line_error(result, expected)
    assert result.stderr.strip() == expected


def test_the_hint_is_given_for_a_steps_list_too(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    result = wharf("steps", "list", "--run", "training")
    assert_one_line_error(result, "'training' is a pipeline: wharf runs list --pipeline")


@pytest.mark.parametrize("command", ["show", "logs", "stop"])
@pytest.mark.parametrize("length", [8, 36], ids=["prefix", "full id"])
def test_a_step_run_s_id_given_for_a_run_names_its_step_and_run(
    home: Path, monkeypatch: pytest.MonkeyPatch, command: str, length: int
) -> None:
    """An id copied from ``wharf steps list``: before, only 'No pipeline run with id ...'."""
    from wharf.config.global_config import load_config
    from wharf.sdk.client import Client

    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.delenv("WHARF_STORE_URL", raising=False)
    with Client(load_config()) as client:
        run = client.list_pipeline_runs().items[0]
        step = client.get_run_step(run.id, "load")
    given = str(step.id)[:length]
    result = wharf("runs", command, given)
    assert_one_line_error(result, "No pipeline run with id")
    assert result.stderr.strip().endswith(
        f" '{given}' is a step run (step 'load') of run '{run.name}': wharf runs show "
        f"{run.name} shows that run, wharf steps logs {given} the step's output."
    ), result.stderr
