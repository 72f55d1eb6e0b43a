"""Timing script (not a test): the store cost of the engine's per-step path on SQLite.

Per step: create a running step run, create one artifact version it produced, update the step
to completed with that output. Then the cost of one heartbeat (``update_heartbeat``) of a running
step, which every running step pays every few seconds. Run:
``python tests/store/bench_step_path.py [steps]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus
from wharf.store.models import (
    ArtifactVersionCreate,
    RunCreate,
    SnapshotCreate,
    StepRunCreate,
    StepRunUpdate,
)
from wharf.store.sql import SqlStore


def main(steps: int = 2000, rounds: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStore.open(f"sqlite:///{Path(tmp) / 'bench.db'}")
        project = store.projects.create("bench")
        pipeline = store.pipelines.get_or_create(project.id, "bench")
        snapshot = store.snapshots.create(
            SnapshotCreate(
                project_id=project.id, pipeline_id=pipeline.id, spec=PipelineSpec(name="bench")
            )
        )
        run = store.runs.create(
            RunCreate(
                project_id=project.id,
                pipeline_id=pipeline.id,
                snapshot_id=snapshot.id,
                name="bench-run",
                status=ExecutionStatus.RUNNING,
            )
        )
        source = "def step(x):\n    return x + 1\n" * 20
        per_step: list[float] = []
        counter = 0
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(steps):
                counter += 1
                step = store.steps.create(
                    StepRunCreate(
                        run_id=run.id,
                        name=f"step_{counter}",
                        status=ExecutionStatus.RUNNING,
                        cache_key=f"key-{counter}",
                        code_hash="abc",
                        source_code=source,
                        parameters={"x": counter},
                    )
                )
                version = store.artifacts.create_version(
                    ArtifactVersionCreate(
                        project_id=project.id,
                        name=f"step_{counter % 50}.output",
                        uri=f"/tmp/artifacts/{counter}",
                        data_type="builtins.int",
                        materializer="wharf.artifacts.materializers.builtin:Json",
                        producer_step_run_id=step.id,
                    )
                )
                store.steps.update(
                    step.id,
                    StepRunUpdate(status=ExecutionStatus.COMPLETED, outputs={"output": version.id}),
                )
            per_step.append((time.perf_counter() - start) / steps * 1e6)
        beating = store.steps.create(
            StepRunCreate(run_id=run.id, name="beating", status=ExecutionStatus.RUNNING)
        )
        per_beat: list[float] = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(steps):
                store.steps.update_heartbeat(beating.id, 60.0)
            per_beat.append((time.perf_counter() - start) / steps * 1e6)
        store.close()
    print(
        f"per-step store cost on SQLite ({steps} steps x {rounds} rounds): "
        f"median {statistics.median(per_step):.0f} us, best {min(per_step):.0f} us"
    )
    print(
        f"heartbeat cost on SQLite ({steps} beats x {rounds} rounds): "
        f"median {statistics.median(per_beat):.0f} us, best {min(per_beat):.0f} us"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
