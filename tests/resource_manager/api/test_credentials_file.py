"""``load_credentials_file``: a credentials file that is no valid YAML is refused in one line
saying where (file, line, column) and what is wrong, never quoting the file: it holds secrets
(a key pasted in by mistake), which PyYAML's own message would show with the offending line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from wharf.core.errors import InputError
from wharf.resource_manager.api.settings import load_credentials_file

SECRET = "S3cretKey"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (f"- name: ci\n  api_key_hash: wrm.ci.{SECRET}: x\n", "line 2, column 33: mapping values"),
        (
            f'- name: ci\n  password: "{SECRET}\\q"\n',
            "line 2, column 24: found unknown escape character (not shown)",
        ),
        (f"- name: ci\n  api_key_hash: !{SECRET} x\n", "line 2, column 17: could not determine"),
        (f"- name: ci\n  api_key_hash: {SECRET}\x07\n", "line 2, column 26: special characters"),
        (
            f'[{{"name": "ci", "api_key_hash": "{SECRET}",,}}]',
            "line 1, column 45: expected the node content, but found ','",
        ),
        (f"- name: ci\n\tapi_key_hash: {SECRET}\n", "line 2, column 1: found character '\\t'"),
    ],
)
def test_invalid_yaml_says_where_without_the_line(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "credentials.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_credentials_file(path)
    message = str(raised.value)
    assert message.startswith(f"The credentials file {path} is not valid YAML at {said}")
    assert SECRET not in message and SECRET[1:] not in message
    assert "\n" not in message


def test_a_file_that_is_no_utf8_says_where(tmp_path: Path) -> None:
    path = tmp_path / "credentials.yaml"
    path.write_bytes(f"- name: ci\n  api_key_hash: {SECRET}\xff\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"is not UTF-8 text \(at byte 37\)") as raised:
        load_credentials_file(path)
    assert SECRET not in str(raised.value)


def test_serve_refuses_it_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "credentials.yaml"
    path.write_text(f"- name: ci\n  api_key_hash: wrm.ci.{SECRET}: x\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    result = run(
        "resource-manager", "serve", "--credentials", str(path),
        "--db-url", f"sqlite:///{tmp_path / 'rm.db'}", env=env,
    )  # fmt: skip
    assert_one_line_error(result, f"{path} is not valid YAML at line 2, column 33")
    assert SECRET not in result.stdout + result.stderr
