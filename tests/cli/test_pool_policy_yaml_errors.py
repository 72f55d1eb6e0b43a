"""A pool or policy file (``-f FILE``) that is no valid YAML, no UTF-8 text or no mapping is
refused in one line naming the file, and for YAML the line and column, never quoting the
offending line (``wharf.yaml_files``); nothing is created. So is a policy's ``--selector``
YAML, the option named as the file. Real ``wharf`` processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf

BROKEN = "name: gpus\nclasses:\n  - name: h100\n   capacity: {GPU: 8}\n"
"""The fourth line is indented one space short of the class it belongs to."""


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (
            BROKEN.encode(),
            "is not valid YAML at line 4, column 4: expected <block end>, but found "
            "'<block mapping start>' (while parsing a block collection).",
        ),
        (b"- name: gpus\n- name: cpus\n", "must hold a mapping of fields (name: ...), not a list."),
        (b"gpus\n", "must hold a mapping of fields (name: ...), not a single value."),
        (b"", "holds nothing: it must hold a mapping of fields (name: ...)."),
        (b"# only a comment\n", "holds nothing: it must hold a mapping of fields"),
        ("name: gpüs\n".encode("latin-1"), "is not UTF-8 text (at byte 9)."),
    ],
)
def test_pool_create_refuses_the_file_in_one_line(
    home: Path, tmp_path: Path, content: bytes, said: str
) -> None:
    path = tmp_path / "pool.yaml"
    path.write_bytes(content)
    result = wharf("pool", "create", "-f", str(path))
    assert_one_line_error(result, f"Error: {path} {said}")
    assert "capacity" not in result.stderr  # the offending line is not quoted
    listed = wharf("pool", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [pool["name"] for pool in json.loads(listed.stdout)] == ["local"]  # the embedded one


def test_every_file_option_refuses_broken_yaml_in_one_line(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    said = f"Error: {path} is not valid YAML at line 4, column 4: expected <block end>"
    for command in (
        ("pool", "update", "gpus"),
        ("policy", "create", "team", "--pool", "gpus"),
        ("policy", "update", "team"),
    ):
        assert_one_line_error(wharf(*command, "-f", str(path)), said)


def test_a_broken_selector_option_is_refused_as_a_file_is(home: Path) -> None:
    """``--selector`` YAML goes through the file options' path: the option is named with the
    line and column, the offending value not quoted."""
    selector = "any:\n  - {subject_type: account}\n   - {subject_id: s3cret}\n"
    said = (
        "Error: --selector is not valid YAML at line 3, column 4: expected <block end>, but "
        "found '<block sequence start>' (while parsing a block collection)."
    )
    for command in (("policy", "create", "team", "--pool", "local"), ("policy", "update", "team")):
        result = wharf(*command, "--selector", selector)
        assert_one_line_error(result, said)
        assert "s3cret" not in result.stderr
    flow = wharf("policy", "create", "team", "--pool", "local", "--selector", "{subject_id: [a}")
    assert_one_line_error(flow, "Error: --selector is not valid YAML at line 1, column 16: ")
    listed = wharf("policy", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [policy["name"] for policy in json.loads(listed.stdout)] == ["local-default"]
