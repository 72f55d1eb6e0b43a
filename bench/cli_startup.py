"""Start-up time of the CLI: ``wharf --help`` and the listing commands with 1,000 runs stored
(the last one with ``--steps`` step runs, each with an output artifact).

Each command runs as a fresh process, as a user would start it; the figures are the median and
minimum wall time over ``--repeat`` runs, and the median CPU time (user + system) of the
process, which other jobs on a shared machine disturb less than wall time.

Bytecode. An installed Wharf has its bytecode compiled (pip does it at install time; any other
install writes ``__pycache__`` on first import), so the goal figures are measured with a warm
bytecode cache: the timed commands get a private ``PYTHONPYCACHEPREFIX`` (nothing is written
into the source tree) and one untimed warm-up run. A development environment that sets
``PYTHONDONTWRITEBYTECODE=1`` recompiles every Wharf module on every start; that is measured
separately as ``wharf_runs_list_no_bytecode_cache`` (the environment as given, bytecode
writing off), for comparison only.

The listing commands read an up-to-date embedded SQLite store through the CLI's quick path
(``wharf.cli.quick_reads``, no SQLAlchemy); ``wharf_runs_list_sqlalchemy`` is the same command
through the normal store (a ``sqlite+pysqlite://`` URL, which the quick path leaves to it).

    python bench/cli_startup.py [--runs 1000] [--steps 10] [--repeat 15]
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
from wharf.store.models import (
    ArtifactVersionCreate,
    RunCreate,
    RunUpdate,
    StepRunCreate,
    StepRunUpdate,
)

STEPS_RUN = "bench-steps"


def populate(home: str, runs: int, steps: int = 0) -> None:
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
        last = i == runs - 1
        run = store.runs.create(
            RunCreate(
                project_id=workspace.project.id,
                pipeline_id=pipeline.id,
                snapshot_id=snapshot.id,
                name=STEPS_RUN if last else f"bench-{i:05d}",
                status=ExecutionStatus.RUNNING,
                orchestrator_run_id=f"o{i}",
            )
        )
        for j in range(steps if last else 0):
            step = store.steps.create(
                StepRunCreate(
                    run_id=run.id,
                    name=f"step-{j}",
                    status=ExecutionStatus.RUNNING,
                    parameters={"j": j},
                )
            )
            output = store.artifacts.create_version(
                ArtifactVersionCreate(
                    project_id=workspace.project.id,
                    name=f"bench::step-{j}::output",
                    uri=f"/bench/{j}",
                    data_type="builtins.int",
                    materializer="bench",
                    producer_step_run_id=step.id,
                )
            )
            update = StepRunUpdate(status=ExecutionStatus.COMPLETED, outputs={"output": output.id})
            store.steps.update(step.id, update)
        store.runs.update(run.id, RunUpdate(status=ExecutionStatus.COMPLETED))
    workspace.close()


def time_command(args: list[str], repeat: int, env: dict[str, str]) -> dict[str, float]:
    subprocess.run(args, check=True, capture_output=True, env=env)  # warm-up, not timed
    walls, cpus = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        process = subprocess.Popen(
            args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(process.pid, 0)
        walls.append(time.perf_counter() - t0)
        if status != 0:
            raise SystemExit(f"{args} failed with wait status {status}")
        cpus.append(usage.ru_utime + usage.ru_stime)
    return {
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "cpu_median_s": statistics.median(cpus),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "cli_startup.json"
    )
    args = parser.parse_args()
    wharf = shutil.which("wharf") or str(Path(sys.executable).parent / "wharf")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as home:
        populate(home, args.runs, args.steps)
        given = {**os.environ, "WHARF_HOME": home}
        warm = {**given, "PYTHONPYCACHEPREFIX": str(Path(home) / "pycache")}
        warm.pop("PYTHONDONTWRITEBYTECODE", None)
        cold = {**given, "PYTHONDONTWRITEBYTECODE": "1"}
        sqlalchemy = {**warm, "WHARF_STORE_URL": f"sqlite+pysqlite:///{Path(home) / 'wharf.db'}"}
        results = {}
        for label, command, env in (
            ("python_startup", [sys.executable, "-c", "pass"], warm),
            ("wharf_help", [wharf, "--help"], warm),
            ("wharf_runs_list", [wharf, "runs", "list"], warm),
            ("wharf_runs_list_json", [wharf, "runs", "list", "-o", "json"], warm),
            ("wharf_pipelines_list", [wharf, "pipelines", "list"], warm),
            ("wharf_steps_list", [wharf, "steps", "list", "--run", STEPS_RUN], warm),
            ("wharf_artifacts_list", [wharf, "artifacts", "list"], warm),
            ("wharf_runs_list_sqlalchemy", [wharf, "runs", "list"], sqlalchemy),
            ("wharf_runs_list_no_bytecode_cache", [wharf, "runs", "list"], cold),
        ):
            results[label] = figures = time_command(command, args.repeat, env)
            print(
                f"{label:34s} median {figures['median_s']:.3f} s  min {figures['min_s']:.3f} s"
                f"  cpu {figures['cpu_median_s']:.3f} s"
            )
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"load average (1, 5, 15 min) before {load['before']}, after {load['after']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "cli_startup",
                "stored_runs": args.runs,
                "steps_of_last_run": args.steps,
                "load_average": load,
                "results": results,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
