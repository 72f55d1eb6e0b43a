"""``wharf request list`` as a table: long demands are cut like long reasons, so one request
stays one readable row; ``request show`` and JSON keep them whole."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import wharf

DEMANDS = [
    {"kind": "cpu", "quantity": 16, "unit": "CPU"},
    {"resource": "memory", "quantity": 64, "unit": "GiB"},
    {"kind": "gpu", "quantity": 8, "class": "h100"},
    {"kind": "gpu", "quantity": 4, "class": "a100"},
]
WHOLE = "16 CPU, 64 GiB memory, 8 GPU (h100), 4 GPU (a100)"


def test_request_list_cuts_long_demands_and_show_keeps_them(home: Path) -> None:
    from wharf.config.global_config import load_config
    from wharf.resource_manager.contract.models import ResourceRequestCreate
    from wharf.sdk.client import Client

    body = {
        "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "default"}]}],
        "demands": DEMANDS,
        "lease_seconds": 600,
    }
    with Client(load_config()) as client:
        made = client.resource_manager.requests.create(ResourceRequestCreate.model_validate(body))
    listed = wharf("request", "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[:2]
    demands = row[header.index("DEMANDS") : header.index("CREATED_AT")].rstrip()
    assert demands == WHOLE[:39] + "…", listed.stdout
    shown = wharf("request", "show", str(made.id))
    assert shown.returncode == 0, shown.stderr
    assert f"demands            {WHOLE}" in shown.stdout.splitlines()
    as_json = wharf("request", "list", "-o", "json")
    assert len(json.loads(as_json.stdout)[0]["demands"]) == len(DEMANDS)
