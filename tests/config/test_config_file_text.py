"""A user config file (``<WHARF_HOME>/config.json``) that is not UTF-8 text or not JSON is
refused in one line naming the file and what to do, from the ``wharf`` command (a real process)
and from a pipeline call; a pool file (``wharf pool create -f``) that is not UTF-8 likewise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from wharf.config.global_config import load_config
from wharf.core.errors import InputError

GARBAGE = b"\xff\xfe garbage"
"""What QA wrote: a UTF-16 byte order mark and ASCII, no UTF-8 text."""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Wharf home (``WHARF_HOME``, 0700) in the environment, without a config file yet; no
    store or server from the outer environment."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_ACTIVE_STACK", "WHARF_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return home


def config_file(home: Path, content: bytes) -> Path:
    path = home / "config.json"
    path.write_bytes(content)
    path.chmod(0o600)
    return path


def test_the_cli_names_a_config_file_that_is_not_utf8(home: Path) -> None:
    # it said "Error: 'utf-8' codec can't decode byte 0xff in position 0: ...", no file named
    path = config_file(home, GARBAGE)
    result = wharf("runs", "list")
    assert_one_line_error(
        result,
        f"Error: Wharf config file {path} is not valid UTF-8 text (at byte 1): fix it, or "
        "delete it and log in again.",
    )


def test_a_pipeline_call_names_a_config_file_that_is_not_utf8(home: Path) -> None:
    from wharf import pipeline, step

    @step
    def produce() -> int:
        return 1

    @pipeline(name="config_text")
    def config_text() -> None:
        produce()

    path = config_file(home, b'{"project": "caf\xe9"}')  # Latin-1, as an old editor saved it
    with pytest.raises(InputError) as caught:
        config_text()
    assert str(caught.value) == (
        f"Wharf config file {path} is not valid UTF-8 text (at byte 17): fix it, or delete it "
        "and log in again."
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"{", "is not valid JSON (line 1, column 2: Expecting property name enclosed in"),
        (b'{"a": 1}\n}', "is not valid JSON (line 2, column 1: Extra data): fix it, or delete"),
    ],
)
def test_a_config_file_that_is_not_json_is_named(home: Path, content: bytes, said: str) -> None:
    path = config_file(home, content)
    with pytest.raises(InputError) as caught:
        load_config()
    assert str(caught.value).startswith(f"Wharf config file {path} {said}"), caught.value


def test_a_config_file_with_a_byte_order_mark_is_read(home: Path) -> None:
    # as some editors save UTF-8
    config_file(home, b"\xef\xbb\xbf" + json.dumps({"project": "caf\u00e9"}).encode())
    assert load_config().project == "caf\u00e9"


def test_a_pool_file_that_is_not_utf8_is_named_with_what_to_do(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_bytes(GARBAGE)
    result = wharf("pool", "create", "-f", str(path))
    assert_one_line_error(
        result, f"Error: {path} is not UTF-8 text (at byte 1). Save it as UTF-8 and try again."
    )
