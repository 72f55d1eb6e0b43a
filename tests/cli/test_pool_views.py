"""Pools from the CLI as a new user meets them: the pool file documented by an example that
works as printed, memory in human units, missing values as ``-``, demands written one way."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.cli.test_cli import wharf
from tests.cli.test_first_hour import write


def test_the_pool_file_example_in_the_help_creates_that_pool(home: Path, tmp_path: Path) -> None:
    shown = wharf("pool", "create", "--help")
    assert shown.returncode == 0 and "Pool file (-f FILE)" in shown.stdout
    assert "Pool file (-f FILE)" in wharf("pool", "update", "--help").stdout
    lines = shown.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("name: gpus"))
    example = textwrap.dedent("\n".join(lines[start:]))
    path = write(tmp_path / "pool.yaml", example)
    created = wharf("pool", "create", "-f", str(path), "-o", "json")
    assert created.returncode == 0, created.stderr
    pool = json.loads(created.stdout)
    classes = {c["name"]: c for c in pool["classes"]}
    assert classes["h100"]["capacity"] == {"GPU": 8, "CPU": 64_000, "memory": 512 * 1024**3}
    assert classes["spot"]["capacity"] == {"GPU": 4, "CPU": None}
    assert (pool["rank"], pool["concurrency_limit"], pool["attributes"]) == (
        10,
        20,
        {"site": "lab"},
    )


def test_pools_show_memory_in_human_units_and_missing_values_as_a_dash(home: Path) -> None:
    made = wharf("pool", "create", "machine", "-c", "memory=24683664KiB", "-c", "cpu=2")
    assert made.returncode == 0, made.stderr
    listed, shown_text = wharf("pool", "list").stdout, wharf("pool", "show", "machine").stdout
    for text in (listed, shown_text):
        assert "23.5 GiB" in text and "KiB" not in text, text
    shown = shown_text.splitlines()
    assert "None" not in shown_text
    fields = dict(line.split(None, 1) for line in shown[:6])
    assert fields["concurrency_limit"] == "-" and fields["attributes"] == "-"


def test_requests_list_their_demands_as_runs_show_does(home: Path) -> None:
    from wharf.config.global_config import load_config
    from wharf.resource_manager.contract.models import ResourceRequestCreate
    from wharf.sdk.client import Client

    demands = [
        {"kind": "cpu", "quantity": 1, "unit": "CPU"},
        {"resource": "memory", "quantity": 1, "unit": "GiB"},
    ]
    body = {
        "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "default"}]}],
        "demands": demands,
        "lease_seconds": 600,
    }
    with Client(load_config()) as client:
        client.resource_manager.requests.create(ResourceRequestCreate.model_validate(body))
    listed = wharf("request", "list")
    assert listed.returncode == 0, listed.stderr
    assert "1 CPU, 1 GiB memory" in listed.stdout and "CPU cpu" not in listed.stdout


def test_docs_resources_prints_the_pool_file_example_the_help_prints() -> None:
    """docs/resources.md says ``wharf pool create --help`` prints its pool file example."""
    import re

    from wharf.cli.pools import POOL_FILE_HELP

    docs = Path(__file__).resolve().parents[2] / "docs" / "resources.md"
    found = re.search(r"prints\s+this example.*?```yaml\n(.*?)\n```", docs.read_text(), re.S)
    assert found is not None, "docs/resources.md no longer shows the pool file example"
    lines = POOL_FILE_HELP.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("name: gpus"))
    assert textwrap.dedent("\n".join(lines[start:])).strip() == found[1].strip()
