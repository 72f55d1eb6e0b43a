"""A step log the artifact store cannot give (here: its path is a directory; on S3, a
laptop without the pods' credentials) no longer ends ``wharf runs logs`` with a traceback: the
other steps still print, that step gets a note saying why, and the command exits 1 with one
line naming it; ``wharf steps logs`` says it in one line. A real run, real ``wharf`` commands."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.cli.test_run_views import run_script
from wharf.config.global_config import load_config
from wharf.sdk.client import Client

SCRIPT = """
from wharf import pipeline, step

@step(enable_cache=False)
def first() -> int:
    print("first says hi")
    return 1

@step(enable_cache=False)
def second(x: int) -> int:
    print("second says hi")
    return x

@pipeline(name="two")
def two() -> None:
    second(first())

if __name__ == "__main__":
    two()
"""


def test_an_unreadable_step_log_is_a_note_and_exit_code_1(home: Path, tmp_path: Path) -> None:
    run_script(tmp_path / "two.py", SCRIPT, home)
    with Client(load_config()) as client:
        run = client.list_pipeline_runs().items[0]
        step = client.get_run_step(run.id, "first")
    assert step.logs_uri is not None
    log = Path(step.logs_uri)
    log.unlink()
    log.mkdir()  # the store cannot read it as a file

    for follow in ((), ("--follow",)):
        shown = wharf("runs", "logs", run.name, *follow)
        assert "Traceback" not in shown.stderr, shown.stderr
        assert shown.returncode == 1
        lines = shown.stdout.splitlines()
        assert lines[0].startswith("[first] its log cannot be read: IsADirectoryError: ")
        assert lines[1] == "[second] second says hi"
        assert shown.stderr.splitlines()[-1] == "Error: Could not read the log of: first."

    assert_one_line_error(
        wharf("steps", "logs", run.name, "first"),
        "Error: Step 'first': its log cannot be read: IsADirectoryError: ",
    )
    assert wharf("steps", "logs", run.name, "second").stdout == "second says hi\n"
