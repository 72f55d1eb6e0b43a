"""``wharf artifacts load NAME [--version N] [--out FILE]``: an artifact version's value by the
artifact's name, the latest version unless one is named; bytes only to a file; a one-line
error (non-zero exit, no traceback) for an unknown artifact or version."""

from __future__ import annotations

import enum
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from wharf import Client, pipeline, step
from wharf.artifacts.materializers.base import Materializer
from wharf.sdk.workspace import Workspace

NUMBERS = "numbers_pipeline::numbers::output"
BLOB = "blob_pipeline::blob::output"


@step(enable_cache=False)
def numbers(top: int) -> dict[str, list[int]]:
    return {"numbers": list(range(top))}


@pipeline(name="numbers_pipeline")
def numbers_pipeline(top: int) -> None:
    numbers(top=top)


@step
def blob() -> bytes:
    return bytes(range(256))


@pipeline(name="blob_pipeline")
def blob_pipeline() -> None:
    blob()


@pytest.fixture
def workspace(logs_workspace: Workspace) -> Workspace:
    return logs_workspace


def test_bytes_go_to_a_new_file_with_out(workspace: Workspace, tmp_path: Path) -> None:
    blob_pipeline.run_in(workspace)

    printed = wharf("artifacts", "load", BLOB)
    assert_one_line_error(printed, "256 bytes of binary data; write them to a file with --out")
    out = tmp_path / "blob.bin"
    written = wharf("artifacts", "load", BLOB, "--out", str(out))
    assert written.returncode == 0, written.stderr
    assert out.read_bytes() == bytes(range(256))
    again = wharf("artifacts", "load", BLOB, "--out", str(out))
    assert_one_line_error(again, "exists already")
    assert out.read_bytes() == bytes(range(256))
    empty = wharf("artifacts", "load", BLOB, "--out", "")  # was "'.' exists already"
    assert_one_line_error(empty, "Invalid value for '--out': is empty: name a new file.")


def test_unknown_or_misspelt_names_and_versions_are_one_line_errors(
    workspace: Workspace,
) -> None:
    numbers_pipeline.run_in(workspace, top=2)

    assert_one_line_error(wharf("artifacts", "load", "nope"), "No artifact named 'nope'")
    assert_one_line_error(
        wharf("artifacts", "load", NUMBERS, "--version", "7"),
        f"Artifact '{NUMBERS}' has no version 7; its latest version is 1.",
    )
    assert_one_line_error(wharf("artifacts", "load", NUMBERS, "--version", "0"), "--version")

    # a step name or a misspelt name is answered with the artifacts it may mean: an artifact
    # is <pipeline>::<step>::<output>, a newcomer types the step's name
    for given in ("numbers", "numbers_pipeline::numbers", "numbers_pipeline::number::output"):
        assert_one_line_error(
            wharf("artifacts", "load", given),
            f"No artifact named '{given}'; did you mean '{NUMBERS}'?",
        )
    for listing, what in (
        (("--name", "numbers"), "artifacts"),
        (("--versions", "--name", "numbers"), "artifact versions"),
    ):
        listed = wharf("artifacts", "list", *listing)  # an empty list, and on stderr why
        assert listed.returncode == 0, listed.stderr
        assert NUMBERS not in listed.stdout
        assert listed.stderr == (
            f"No {what} match.\nNo artifact named 'numbers'; did you mean '{NUMBERS}'?\n"
        )


@step(enable_cache=False)
def ranking() -> dict[str, int]:
    return {"zebra": 1, "apple": 2, "mango": 3}


@pipeline(name="ranking_pipeline")
def ranking_pipeline() -> None:
    ranking()


def test_a_dict_is_printed_in_its_own_order(workspace: Workspace, tmp_path: Path) -> None:
    # pprint sorts dict keys by default: the printed value would not be the stored one
    ranking_pipeline.run_in(workspace)
    name = "ranking_pipeline::ranking::output"

    printed = wharf("artifacts", "load", name)
    assert (printed.returncode, printed.stdout) == (0, "{'zebra': 1, 'apple': 2, 'mango': 3}\n")
    out = tmp_path / "ranking.txt"
    assert wharf("artifacts", "load", name, "--out", str(out)).returncode == 0
    assert out.read_text() == "{'zebra': 1, 'apple': 2, 'mango': 3}"


def test_the_latest_version_or_the_one_named_by_name_or_id(workspace: Workspace) -> None:
    # The README: an artifact is named by its name, its id or a prefix of its id; the ids are
    # those `wharf artifacts list` (artifacts) and `list --versions` (versions) show.
    numbers_pipeline.run_in(workspace, top=3)
    numbers_pipeline.run_in(workspace, top=5)

    latest = wharf("artifacts", "load", NUMBERS)
    assert (latest.returncode, latest.stdout) == (0, "{'numbers': [0, 1, 2, 3, 4]}\n")
    first = wharf("artifacts", "load", NUMBERS, "--version", "1")
    assert (first.returncode, first.stdout) == (0, "{'numbers': [0, 1, 2]}\n"), first.stderr
    with Client() as client:
        (artifact,) = client.list_artifacts(name=NUMBERS).items
        _latest, first_version = client.list_artifact_versions(name=NUMBERS).items

    by_artifact = wharf("artifacts", "load", artifact.id.hex[:8])
    assert (by_artifact.returncode, by_artifact.stdout) == (0, "{'numbers': [0, 1, 2, 3, 4]}\n")
    older = wharf("artifacts", "load", str(artifact.id), "--version", "1")
    assert (older.returncode, older.stdout) == (0, "{'numbers': [0, 1, 2]}\n"), older.stderr
    by_version = wharf("artifacts", "load", str(first_version.id))
    assert (by_version.returncode, by_version.stdout) == (0, "{'numbers': [0, 1, 2]}\n")
    prefix = first_version.id.hex[:8]
    assert_one_line_error(
        wharf("artifacts", "load", prefix, "--version", "2"),
        f"'{prefix}' is version 1 of artifact '{NUMBERS}'",
    )
    assert_one_line_error(
        wharf("artifacts", "load", "0000abcd"),
        "No artifact named '0000abcd', and no artifact or artifact version has an id that",
    )


@step(enable_cache=False)
def big_blob() -> bytes:
    return bytes(2 * 2**20)


@pipeline(name="big_blob_pipeline")
def big_blob_pipeline() -> None:
    big_blob()


def _with_file_size_limit(limit: int) -> None:
    """In the child: a write past ``limit`` bytes fails (EFBIG; Python ignores SIGXFSZ), as a
    full disk fails it."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_write_that_fails_leaves_no_partial_file(workspace: Workspace, tmp_path: Path) -> None:
    # the partial file stayed, and the retry was refused with "exists already"
    big_blob_pipeline.run_in(workspace)
    name = "big_blob_pipeline::big_blob::output"
    out = tmp_path / "blob.bin"

    failed = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "artifacts", "load", name, "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        preexec_fn=lambda: _with_file_size_limit(2**20),
    )
    assert_one_line_error(failed, f"Cannot write '{out}'")
    assert not out.exists()
    retried = wharf("artifacts", "load", name, "--out", str(out))
    assert retried.returncode == 0, retried.stderr
    assert out.read_bytes() == bytes(2 * 2**20)


@step(enable_cache=False)
def weights() -> tuple[Annotated[np.ndarray, "weights"], Annotated[pd.DataFrame, "table"]]:
    return np.arange(5000), pd.DataFrame({"row": range(300), "label": ["x"] * 300})


@pipeline(name="weights_pipeline")
def weights_pipeline() -> None:
    weights()


def test_a_file_gets_every_item_of_a_big_array_or_table(
    workspace: Workspace, tmp_path: Path
) -> None:
    # numpy and pandas print big values abridged ("..."): the file held a summary, silently
    weights_pipeline.run_in(workspace)

    out = tmp_path / "weights.txt"
    written = wharf("artifacts", "load", "weights_pipeline::weights::weights", "--out", str(out))
    assert written.returncode == 0, written.stderr
    text = out.read_text()
    assert "..." not in text
    assert [int(n) for n in re.findall(r"\d+", text.partition("(")[2])] == list(range(5000))
    table = tmp_path / "table.txt"
    written = wharf("artifacts", "load", "weights_pipeline::weights::table", "--out", str(table))
    assert written.returncode == 0, written.stderr
    lines = table.read_text().splitlines()
    assert "..." not in table.read_text()
    assert len(lines) == 301
    assert lines[-1].split() == ["299", "299", "x"]
    printed = wharf("artifacts", "load", "weights_pipeline::weights::weights")
    assert "..." in printed.stdout  # on the terminal a summary is what one wants


class Grade(enum.Enum):
    """A class of the user's code: the CLI process never imports its module."""

    PASS = "pass"


class GradeMaterializer(Materializer):
    ASSOCIATED_TYPES = (Grade,)

    def save(self, data: Any) -> None:
        self.write_bytes("grade.txt", data.value.encode())

    def load(self, data_type: type[Any]) -> Any:
        return data_type(self.read_bytes("grade.txt").decode())


@step(enable_cache=False)
def grades() -> tuple[Annotated[Grade, "plain"], Annotated[Grade, "custom"]]:
    return Grade.PASS, Grade.PASS


@pipeline(name="grades_pipeline")
def grades_pipeline() -> None:
    grades.with_options(output_materializers={"custom": GradeMaterializer})()


def test_a_class_of_the_users_code_says_how_to_load_it_in_python(workspace: Workspace) -> None:
    # "import it first" / "import the module that defines it first": no CLI user can
    grades_pipeline.run_in(workspace)
    with Client() as client:
        (plain,) = client.list_artifact_versions(name="grades_pipeline::grades::plain").items
        (custom,) = client.list_artifact_versions(name="grades_pipeline::grades::custom").items

    for version in (plain, custom):
        assert_one_line_error(
            wharf("artifacts", "load", version.name),
            "'wharf artifacts load' never imports a recorded class path: load it in Python "
            "where that class is defined (the pipeline's script, or after importing its module) "
            f"with wharf.Client().load_artifact('{version.id}').",
        )


def test_a_value_whose_module_the_cli_cannot_import_says_where_to_run_it(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a dataclass of the user's project module: pickled by reference, and the `wharf` script
    # does not have the project's directory on its path ("No module named 'project_types'")
    project = tmp_path / "project"
    project.mkdir()
    (project / "project_types.py").write_text(
        "import dataclasses\n\n\n@dataclasses.dataclass\nclass Config:\n    rate: float\n"
    )
    monkeypatch.syspath_prepend(str(project))
    import project_types  # type: ignore[import-not-found]

    @step(enable_cache=False)
    def configure() -> object:
        return project_types.Config(rate=0.5)

    @pipeline(name="config_pipeline")
    def config_pipeline() -> None:
        configure()

    config_pipeline.run_in(workspace)
    name = "config_pipeline::configure::output"

    failed = wharf("artifacts", "load", name)
    assert_one_line_error(
        failed,
        "'wharf artifacts load' imports your modules only from its path: run it where module "
        "'project_types' is importable (from your project's directory: PYTHONPATH=. wharf "
        "artifacts load ...).",
    )
    assert "No module named 'project_types'" in failed.stderr
    loaded = wharf("artifacts", "load", name, env={"PYTHONPATH": str(project)})
    assert (loaded.returncode, loaded.stdout) == (0, "Config(rate=0.5)\n"), loaded.stderr


@step(enable_cache=False)
def huge() -> dict[str, int]:
    return {"huge": 1 << 20_000}


@pipeline(name="huge_pipeline")
def huge_pipeline() -> None:
    huge()


def digits_of(number: int) -> str:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return str(number)
    finally:
        sys.set_int_max_str_digits(limit)


def test_an_int_of_more_than_4300_digits_is_printed_whole(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Python refuses to turn such an int into text unless told: the command failed with
    'Exceeds the limit (4300 digits)...; use sys.set_int_max_str_digits()'."""
    huge_pipeline.run_in(workspace)
    name = "huge_pipeline::huge::output"
    expected = "{'huge': " + digits_of(1 << 20_000) + "}"

    printed = wharf("artifacts", "load", name)
    assert (printed.returncode, printed.stdout) == (0, expected + "\n"), printed.stderr
    out = tmp_path / "huge.txt"
    assert wharf("artifacts", "load", name, "--out", str(out)).returncode == 0
    assert out.read_text() == expected
