"""The policy file documented by ``wharf policy create --help``: its example works as printed,
on the pool the pool file's example (``wharf pool create --help``) makes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.cli.test_cli import wharf


def example(help_text: str, first_line: str) -> str:
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(first_line))
    return textwrap.dedent("\n".join(lines[start:]))


def test_the_policy_file_example_in_the_help_creates_that_policy(
    home: Path, tmp_path: Path
) -> None:
    from wharf.cli.pools import POOL_FILE_HELP

    shown = wharf("policy", "create", "--help")
    assert shown.returncode == 0 and "Policy file (-f FILE)" in shown.stdout
    assert "Policy file (-f FILE)" in wharf("policy", "update", "--help").stdout
    pool_file = tmp_path / "pool.yaml"
    pool_file.write_text(example(POOL_FILE_HELP, "name: gpus"))
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(example(shown.stdout, "name: research"))

    made = wharf("pool", "create", "-f", str(pool_file), "-o", "json")
    assert made.returncode == 0, made.stderr
    created = wharf("policy", "create", "-f", str(policy_file), "-o", "json")
    assert created.returncode == 0, created.stderr
    policy = json.loads(created.stdout)
    assert (policy["name"], policy["priority"], policy["concurrency_limit"]) == ("research", 10, 4)
    assert policy["fair_share_weight"] == 2
    assert policy["subject_selector"]["any"][1]["attributes"] == {"name": "vision"}
    grants = {g["class_name"]: g["resources"] for g in policy["grants"]}
    assert grants.keys() == {"h100", "spot"} and grants["spot"] == {}
    assert (grants["h100"]["GPU"]["reserved"], grants["h100"]["GPU"]["limit"]) == (2, 6)
