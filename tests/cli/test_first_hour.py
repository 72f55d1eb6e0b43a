"""What a new user meets first: typos, bad files, a mistyped store path, quiet HTTP clients.

Each runs the real ``wharf`` command in a subprocess against a fresh home.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from wharf.config.global_config import load_config
from wharf.sdk.client import Client

PYDANTIC_WORDING = ("should be", "should have", "after validation", "validation error", "[type=")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("run", "list"), "Error: No such command 'run'. Did you mean 'runs'?"),
        (("runs", "lst"), "Error: No such command 'lst'. Did you mean 'list'?"),
        (("pool", "craete"), "Error: No such command 'craete'. Did you mean 'create'?"),
        (("xyzzy",), "Error: No such command 'xyzzy'. Try 'wharf --help'."),
        (("runs", "show"), "Error: Missing argument 'RUN'. Try 'wharf runs show --help'."),
        (
            ("runs", "show", "a", "b"),
            "Error: Got unexpected extra argument (b). Try 'wharf runs show --help'.",
        ),
    ],
)
def test_usage_errors_are_one_line_and_typos_name_the_closest_command(
    args: tuple[str, ...], expected: str
) -> None:
    result = wharf(*args)
    assert result.returncode == 2
    assert result.stderr.strip() == expected and result.stdout == ""


@pytest.mark.parametrize("args", [(), ("stack",)])
def test_a_group_without_a_command_prints_its_help(args: tuple[str, ...]) -> None:
    result = wharf(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("Usage: wharf") and "Commands:" in result.stderr
    assert "Error" not in result.stderr


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("name: p1\nclasses: []\n", "Invalid pool: 'classes' must not be empty"),
        (
            "name: p1\nclasses:\n  - name: a\n    capacity: {GPU: -1}\n",
            "Invalid pool: 'classes[0].capacity.GPU' must be at least 0",
        ),
        (
            "name: p1\nclasses:\n  - name: a\n    capacity: {GPU: 1.5}\n",
            "'classes[0].capacity.GPU' must be a whole number (got 1.5)",
        ),
        ("name: p1\nclasses:\n  - name: a\n    capacity: {}\n", "'classes[0].capacity' must not"),
        ("nme: p1\nclasses:\n  - name: a\n    capacity: {GPU: 1}\n", "did you mean 'name'?"),
        (
            "name: p1\nclasses:\n  - name: a\n    capacity: {GPU: 1}\n    reclaimable: maybe\n",
            "'classes[0].reclaimable' must be 'never', 'coordinated' or 'unsafe'",
        ),
        ("name: p1\nclasses:\n  - name: a\n    capacity: {memory: 2zz}\n", "Unknown unit 'zz'"),
    ],
)
def test_pool_files_with_bad_fields_give_one_plain_line(
    home: Path, tmp_path: Path, body: str, expected: str
) -> None:
    result = wharf("pool", "create", "-f", str(write(tmp_path / "pool.yaml", body)))
    assert_one_line_error(result, expected)
    for words in PYDANTIC_WORDING:
        assert words not in result.stderr
    with Client(load_config()) as client:  # nothing made
        assert "p1" not in [pool.name for pool in client.resource_manager.pools.list()]


def test_a_store_url_in_a_missing_directory_is_refused_and_nothing_is_created(
    home: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "missing" / "dir"
    result = wharf("runs", "list", env={"WHARF_STORE_URL": f"sqlite:///{missing}/x.db"})
    assert_one_line_error(result, f"the directory {missing} does not exist")
    assert not (tmp_path / "missing").exists()


def test_the_default_store_makes_its_home_directory(home: Path) -> None:
    assert not home.exists()
    assert wharf("runs", "list").returncode == 0
    assert (home / "wharf.db").is_file()


def test_the_cli_never_lets_http_clients_log_their_requests() -> None:
    """Whatever logging a command sets up (INFO on the root logger here), httpx's one line per
    request stays out of its output."""
    code = (
        "import logging, httpx\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from wharf.cli.main import main\n"
        "try:\n    main(['runs', '--help'])\nexcept SystemExit:\n    pass\n"
        "transport = httpx.MockTransport(lambda request: httpx.Response(200))\n"
        "httpx.Client(transport=transport).get('http://wharf.invalid/api')\n"
        "logging.getLogger('wharf.test').info('own line')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "HTTP Request" not in result.stderr
    assert "own line" in result.stderr
