"""What a resumed orchestrator pod does with the step Jobs it does not adopt
(``orchestrator_resume.collect_left_jobs``): which Jobs those are and how their pods are ordered
(pure), and, on the step backend's bed (:mod:`.step_backend_bed`: the API emulator, the process
kubelet and a stand-in entry point), that their logs are kept, a log already there is left as it
is, and they are deleted, while an adopted Job is left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

from tests.integrations.kubernetes.step_backend_bed import (
    SPEC,
    BackendFactory,
    job_names,
    wait_all,
)
from tests.store.conftest import World
from tests.waiting import wait_until
from wharf.artifacts.materializers.registry import MaterializerRegistry
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.enums import ExecutionStatus
from wharf.execution.backends import Ended, StepLaunch
from wharf.execution.log_capture import read_log, write_log
from wharf.execution.run_lifecycle import Resumption
from wharf.execution.services import RunServices
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, label_value
from wharf.integrations.kubernetes.orchestrator_resume import (
    collect_left_jobs,
    left_jobs,
    pods_by_job,
)

NS = "default"


def job(name: str, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "status": {}}


def pod(name: str, job_name: str | None, created: str) -> dict[str, Any]:
    labels = {} if job_name is None else {"job-name": job_name}
    return {"metadata": {"name": name, "labels": labels, "creationTimestamp": created}}


def test_the_jobs_left_are_those_neither_adopted_nor_being_deleted() -> None:
    adopted, left, deleting = uuid4(), uuid4(), uuid4()
    jobs = {
        str(adopted): job("adopted"),
        str(left): job("left"),
        str(deleting): job("deleting", deleting=True),
    }
    assert left_jobs(jobs, frozenset({adopted})) == {str(left): jobs[str(left)]}
    assert left_jobs({}, frozenset({adopted})) == {}


def test_pods_are_grouped_by_their_job_oldest_first() -> None:
    later = pod("b-later", "b", "2026-01-01T00:00:05Z")
    earlier = pod("b-earlier", "b", "2026-01-01T00:00:01Z")
    only = pod("a-only", "a", "2026-01-01T00:00:03Z")
    orchestrator = pod("no-job", None, "2026-01-01T00:00:00Z")
    assert pods_by_job([later, only, orchestrator, earlier]) == {
        "a": [only],
        "b": [earlier, later],
    }


def test_left_jobs_keep_their_log_unless_one_is_there_and_are_deleted_adopted_ones_stay(
    backend_for: BackendFactory,
    clients: KubeClients,
    world: World,
    logs: LocalArtifactStore,
    tmp_path: Path,
) -> None:
    run = world.run(status=ExecutionStatus.RUNNING)
    backend = backend_for(labels={RUN_ID_KEY: label_value(str(run.id))})

    def launch(**environment: str) -> StepLaunch:
        record = world.step(run_id=run.id, logs_uri=logs.new_uri("p", "r") + ".log", spec=SPEC)
        return StepLaunch(record, SPEC, environment, logs)

    marker = tmp_path / "adopted"
    ended, logged, adopted = (
        launch(STAND_IN="ok"),
        launch(STAND_IN="ok"),
        launch(STAND_IN="sleep", MARKER=str(marker)),
    )
    handles = [backend.submit(attempt, None) for attempt in (ended, logged, adopted)]
    assert wait_all(backend, handles[:2]) == {
        handles[0]: (Ended.SUCCEEDED, "exited with code 0"),
        handles[1]: (Ended.SUCCEEDED, "exited with code 0"),
    }
    assert wait_until(lambda: Path(f"{marker}.started").exists(), 30)
    assert ended.record.logs_uri and logged.record.logs_uri and adopted.record.logs_uri
    write_log(logs, logged.record.logs_uri, "kept as it was\n")
    # The backend's process "died": nothing cleaned its attempts up.

    resumed = Resumption(
        {ended.record.name: ended.record},  # the others are read from the store
        frozenset({adopted.record.id}),
    )
    services = RunServices(world.store, logs, MaterializerRegistry(), world.project.id)
    collect_left_jobs(clients, NS, services, run.id, resumed).close()  # its logs stored

    assert read_log(logs, ended.record.logs_uri).startswith(f"hello from {ended.record.id}\n")
    assert read_log(logs, logged.record.logs_uri) == "kept as it was\n"
    assert not logs.exists(adopted.record.logs_uri)
    assert wait_until(lambda: job_names(clients) == [handles[2].job_name], 30), job_names(clients)
