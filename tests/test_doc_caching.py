"""The examples of ``docs/caching.md``, run as printed, as ``tests/test_doc_artifacts.py`` runs
those of ``docs/artifacts.md``.

Each Python block starts with a comment naming the file a reader saves it as
(``# features.py: ...``); the blocks are written so beside each other and run in order, each as
a script, in a fresh ``WHARF_HOME``. The statuses the page's comments promise are checked in the
output, and so is what the page says of editing the helper module.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_doc_artifacts import run

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "caching.md"
_BLOCK = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S | re.M)
_FILE = re.compile(r"^# (?P<name>\w+\.py)\b")


def blocks(lang: str) -> list[str]:
    return [m["body"] for m in _BLOCK.finditer(DOC.read_text()) if m["lang"] == lang]


def file_name(block: str) -> str:
    named = _FILE.match(block)
    assert named is not None, f"a Python block of {DOC.name} names no file:\n{block}"
    return named["name"]


def test_the_examples_are_found() -> None:
    assert {m["lang"] for m in _BLOCK.finditer(DOC.read_text())} == {"python"}
    assert [file_name(b) for b in blocks("python")] == ["features.py", "pipeline.py"]


def test_the_examples_run_and_print_what_the_page_says(tmp_path: Path) -> None:
    home = tmp_path / "home"
    printed = []
    for block in blocks("python"):
        (tmp_path / file_name(block)).write_text(block + "\n")
        printed.append(run([file_name(block)], home, tmp_path).splitlines())
    assert printed == [[], ["completed", "cached"]]

    helpers = tmp_path / "features.py"
    helpers.write_text(helpers.read_text().replace("float(r)", "float(r) / 2"))
    assert run(["pipeline.py"], home, tmp_path).split() == ["completed", "cached"]
    assert run(["pipeline.py"], home, tmp_path).split() == ["cached", "cached"]


def test_without_the_source_dependency_an_edited_helper_is_not_seen(tmp_path: Path) -> None:
    """What the page says of a step keyed without its helpers: their edit goes unseen."""
    home = tmp_path / "home"
    for block in blocks("python"):
        (tmp_path / file_name(block)).write_text(block + "\n")
    script = tmp_path / "pipeline.py"
    dependency = "source_dependencies=[features], "
    assert dependency in script.read_text()
    script.write_text(script.read_text().replace(dependency, ""))
    assert run(["pipeline.py"], home, tmp_path).split() == ["completed", "cached"]
    helpers = tmp_path / "features.py"
    helpers.write_text(helpers.read_text().replace("float(r)", "float(r) / 2"))
    assert run(["pipeline.py"], home, tmp_path).split() == ["cached", "cached"]
