"""``wharf pool | policy`` on the embedded RM, as real subprocesses: what they refuse before
doing anything (an unknown name before asking to confirm), each as one line on stderr."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import ok, run


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    values["WHARF_HOME"] = str(tmp_path / "home")
    return values


@pytest.mark.parametrize("entity", ["pool", "policy"])
def test_deleting_an_unknown_name_says_so_before_asking(entity: str, env: dict[str, str]) -> None:
    result = run(entity, "delete", "nope", env=env, stdin="y\n")
    assert_one_line_error(result, f"Resource {entity} 'nope' not found")
    assert "Delete" not in result.stdout  # no confirmation was asked


def test_a_known_pool_is_still_confirmed_before_deletion(env: dict[str, str]) -> None:
    ok("pool", "create", "gpus", "-c", "gpu:a100=2", env=env)
    declined = run("pool", "delete", "gpus", env=env, stdin="n\n")
    assert "Delete pool 'gpus' and its policies?" in declined.stdout
    assert declined.returncode != 0
    assert "gpus" in ok("pool", "list", env=env)
    assert "Deleted pool 'gpus'" in run("pool", "delete", "gpus", env=env, stdin="y\n").stdout
