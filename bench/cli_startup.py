"""Start-up time of the CLI: ``wharf --help`` and ``wharf runs list`` with 1,000 runs stored.

Each command runs as a fresh process, as a user would start it; the figure is the median wall
time over ``--repeat`` runs.

    python bench/cli_startup.py [--runs 1000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import RunCreate, RunUpdate


def populate(home: str, runs: int) -> None:
    os.environ["WHARF_HOME"] = home
    workspace = Workspace.open(load_config())
    from wharf.config.spec import PipelineSpec
    from wharf.store.models import SnapshotCreate

    store = workspace.store
    pipeline = store.pipelines.get_or_create(workspace.project.id, "bench")
    snapshot = store.snapshots.create(
        SnapshotCreate(
            project_id=workspace.project.id, pipeline_id=pipeline.id, spec=PipelineSpec(name="b")
        )
    )
    for i in range(runs):
        run = store.runs.create(
            RunCreate(
                project_id=workspace.project.id,
                pipeline_id=pipeline.id,
                snapshot_id=snapshot.id,
                name=f"bench-{i:05d}",
                status=ExecutionStatus.RUNNING,
                orchestrator_run_id=f"o{i}",
            )
        )
        store.runs.update(run.id, RunUpdate(status=ExecutionStatus.COMPLETED))
    workspace.close()


def time_command(args: list[str], repeat: int, env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "cli_startup.json"
    )
    args = parser.parse_args()
    wharf = shutil.which("wharf") or str(Path(sys.executable).parent / "wharf")
    with tempfile.TemporaryDirectory() as home:
        populate(home, args.runs)
        env = {**os.environ, "WHARF_HOME": home}
        results = {}
        for label, command in {
            "python_startup": [sys.executable, "-c", "pass"],
            "wharf_help": [wharf, "--help"],
            "wharf_runs_list": [wharf, "runs", "list"],
            "wharf_runs_list_json": [wharf, "runs", "list", "-o", "json"],
        }.items():
            times = time_command(command, args.repeat, env)
            results[label] = {"median_s": statistics.median(times), "min_s": min(times)}
            print(f"{label:22s} median {statistics.median(times):.3f} s  min {min(times):.3f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"benchmark": "cli_startup", "stored_runs": args.runs, "results": results}, indent=2
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
