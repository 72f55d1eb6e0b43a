"""``wharf pool show|update|delete|queue`` and ``wharf policy show|update|delete`` take a
pool's or policy's name, id or id prefix, as ``pool list`` / ``policy list`` show ids; a
deletion names what it deleted. Against the embedded Resource Manager."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def wharf(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
        timeout=60,
    )
    assert "Traceback" not in result.stderr
    return result


def ok(*args: str) -> str:
    result = wharf(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_pools_and_policies_by_id_and_id_prefix(home: Path) -> None:
    pool_id = json.loads(ok("pool", "create", "p9", "-c", "cpu=2", "-o", "json"))["id"]
    assert json.loads(ok("pool", "show", pool_id[:8], "-o", "json"))["name"] == "p9"
    assert ok("pool", "queue", pool_id[:8]).strip() == "No requests wait in pool 'p9'."
    assert json.loads(ok("pool", "update", pool_id[:8], "--rank", "3", "-o", "json"))["rank"] == 3

    made = ok("policy", "create", "pol9", "--pool", "p9", "--subject-type", "account", "-o", "json")
    policy_id = json.loads(made)["id"]
    assert json.loads(ok("policy", "show", policy_id[:8], "-o", "json"))["name"] == "pol9"
    updated = ok("policy", "update", policy_id[:8], "--priority", "2", "-o", "json")
    assert json.loads(updated)["priority"] == 2
    assert ok("policy", "delete", policy_id[:8], "--yes").strip() == "Deleted policy 'pol9'."
    assert ok("pool", "delete", pool_id, "--yes").strip() == "Deleted pool 'p9'."


def test_an_unknown_id_prefix_is_the_usual_one_line_error(home: Path) -> None:
    for args, message in [
        (("pool", "show", "0000dead"), "Error: Resource pool '0000dead' not found."),
        (("policy", "delete", "0000dead", "--yes"), "Error: Resource policy '0000dead' not found."),
    ]:
        result = wharf(*args)
        assert result.returncode == 1
        assert result.stderr.strip() == message


def test_a_misspelt_pool_or_policy_name_suggests_the_close_names(home: Path) -> None:
    ok("policy", "create", "mine", "--pool", "local", "--subject-type", "account")
    pool_hint = "Error: Resource pool 'lcal' not found; did you mean 'local'?"
    policy_hint = "Error: Resource policy 'mien' not found; did you mean 'mine'?"
    # every command finds pools and policies through one lookup (rm_names; the test above shows
    # each takes what it finds): checked for a reading and a changing command of each
    for args, message in [
        (("pool", "show", "lcal"), pool_hint),
        (("pool", "delete", "lcal", "--yes"), pool_hint),
        (("policy", "show", "mien"), policy_hint),
        (("policy", "update", "mien", "--priority", "2"), policy_hint),
        (("policy", "list", "--pool", "lcal"), pool_hint),
        (("pool", "show", "zzzz"), "Error: Resource pool 'zzzz' not found."),
    ]:
        result = wharf(*args)
        assert (result.returncode, result.stderr.strip()) == (1, message), args
