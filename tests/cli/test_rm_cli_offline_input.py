"""``wharf pool | policy create | update`` with an unreachable Resource Manager, as real
subprocesses: a bad quantity of a built-in kind (CPU, memory, GPU), inline or in a create
file, is refused at once with the words it always had, without a network call (it was the RM's
seconds of retries ending in 'unreachable'); a quantity of a custom kind still needs the RM's
registry, so it still says the RM is unreachable."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port bound but not listening (connections to it are refused) for the test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def env(tmp_path: Path, closed_port: int) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    values["WHARF_HOME"] = str(tmp_path / "home")
    values["WHARF_RM_URL"] = f"http://127.0.0.1:{closed_port}"
    values["WHARF_RM_API_KEY"] = "an-api-key-nobody-checks"
    return values


NEW_POLICY = ("policy", "create", "y", "--pool", "p", "--subject-type", "project")
BAD_BUILTIN: list[tuple[tuple[str, ...], str]] = [
    (("pool", "create", "x", "-c", "cpu=8cores"), "Unknown unit 'cores' for resource 'CPU'"),
    (
        ("pool", "update", "x", "-c", "gpu:h100=4", "-c", "Memory:h100=1zz"),
        "Unknown unit 'zz' for resource 'memory'",
    ),
    (
        (*NEW_POLICY, "--reserved", "gpu:h100=1.5"),
        "Quantity '1.5' of resource 'GPU' is not a whole number of GPU.",
    ),
    (("policy", "update", "y", "--limit", "cpu:a=-1"), "resource 'CPU' must not be negative"),
    (("policy", "update", "y", "--reserved", "gpu=1"), "--reserved needs a class"),
]


@pytest.mark.parametrize(
    ("args", "fragment"), BAD_BUILTIN, ids=[" ".join(a) for a, _ in BAD_BUILTIN]
)
def test_a_bad_quantity_of_a_built_in_kind_is_refused_without_the_rm(
    args: tuple[str, ...], fragment: str, env: dict[str, str]
) -> None:
    result = run(*args, env=env)
    assert_one_line_error(result, fragment)
    assert "unreachable" not in result.stderr


def test_a_custom_kind_still_asks_the_rm_which_is_unreachable(env: dict[str, str]) -> None:
    result = run("pool", "create", "x", "-c", "cpu=8", "-c", "license:a=2", env=env)
    assert_one_line_error(result, f"The Resource Manager at {env['WHARF_RM_URL']} is unreachable")


BAD_FILES: list[tuple[str, str, str]] = [
    (
        "pool",
        "name: x\nclasses: [{name: a, capacity: {GPU: 2, Memory: 2zz}}]\n",
        "Unknown unit 'zz' for resource 'memory'",
    ),
    (
        "policy",
        "name: y\npool: p\nsubject_selector: {subject_type: project}\n"
        "grants: [{class: a, resources: {gpu: {reserved: '1', limit: '1.5'}}}]\n",
        "Quantity '1.5' of resource 'GPU' is not a whole number of GPU.",
    ),
]


@pytest.mark.parametrize(("command", "text", "fragment"), BAD_FILES, ids=["pool", "policy"])
def test_a_bad_quantity_of_a_built_in_kind_in_a_file_is_refused_without_the_rm(
    command: str, text: str, fragment: str, env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "body.yaml"
    path.write_text(text)
    result = run(command, "create", "-f", str(path), env=env)
    assert_one_line_error(result, fragment)
    assert "unreachable" not in result.stderr
