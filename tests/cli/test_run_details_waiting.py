"""``wharf runs show`` of a step waiting for resources says why it waits (the Resource
Manager's reason, as the pipeline's own output says it); before, only 'got nothing (pending)'.
A real pipeline process on the embedded Resource Manager, whose only license another request
holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_cli import wharf
from tests.waiting import wait_until
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.resource_manager.contract.models import ResourceRequestCreate
from wharf.sdk.client import Client

SCRIPT = """
from wharf import ResourceSettings, pipeline, step

@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def licensed() -> int:
    return 1

@pipeline(name="licensed")
def licensed_pipeline() -> None:
    licensed()

if __name__ == "__main__":
    licensed_pipeline()
"""


def _queued() -> bool:
    with Client(load_config()) as client:
        runs = client.list_pipeline_runs().items
        steps = client.list_run_steps(runs[0].id).items if runs else []
        return any(s.status is ExecutionStatus.QUEUED for s in steps)


def test_a_step_waiting_for_resources_shows_why(home: Path, tmp_path: Path) -> None:
    with Client(load_config()) as client:
        client.ensure_resource_pool("licenses", {"license": 1})
        holder = {
            "subjects": [
                {"nodes": [{"subject_type": "account", "subject_id": client.workspace.user.name}]}
            ],
            "demands": [{"resource": "license", "quantity": 1}],
            "lease_seconds": 600,
        }
        held = client.resource_manager.requests.create(ResourceRequestCreate.model_validate(holder))
    assert held.status.value == "allocated"
    script = tmp_path / "licensed.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "WHARF_STORE_URL"}
    process = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**env, "WHARF_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(_queued, timeout=60)
        with Client(load_config()) as client:
            run = client.list_pipeline_runs().items[0]
            waiting = client.list_run_steps(run.id).items[0]
            assert waiting.resource_request_id is not None
            request = client.get_resource_request(waiting.resource_request_id)
        reason = (request.status_reason or "").strip()
        assert reason.startswith("Waiting for"), reason
        shown = wharf("runs", "show", run.name)
        assert shown.returncode == 0, shown.stderr
        (row,) = [line for line in shown.stdout.splitlines() if line.startswith("licensed ")]
        assert row.split()[1] == "queued"
        assert row.endswith(f"asked 1 license; got nothing yet (pending: {reason})"), row
        assert wharf("runs", "stop", run.name).returncode == 0
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    shown = wharf("runs", "show", run.name).stdout
    assert "got nothing (cancelled)" in shown, shown  # a request that no longer waits: no why
