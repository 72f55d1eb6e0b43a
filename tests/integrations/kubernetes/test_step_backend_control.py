"""The Kubernetes step backend's control of running attempts, on the API emulator and the
process kubelet (:mod:`.step_backend_bed`): cancelling stops the process with SIGTERM, a Job
deleted from outside is lost (its log kept), ``stop_recorded`` (another process) deletes a step run's Job, a
restarted orchestrator adopts the Job of a running step, and a Job of another step run with the
same name is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.kubernetes.step_backend_bed import (
    NS,
    STAND_IN_IMAGE,
    BackendFactory,
    job_names,
    launch,
    wait_all,
)
from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.errors import InputError
from wharf.execution.backends import Ended, StepLaunch
from wharf.execution.log_capture import read_log
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.step_backend import (
    KubernetesHandle,
    KubernetesStepBackend,
    job_name_for,
)
from wharf.integrations.kubernetes.step_backend_deletes import pod_started


def test_cancel_stops_the_running_process_with_sigterm(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    backend = backend_for()
    marker = tmp_path / "terminated"
    attempt = launch(world, logs, STAND_IN="sleep", MARKER=str(marker))
    handle = backend.submit(attempt, None)
    wait_for(lambda: Path(f"{marker}.started").exists(), "the step to start", 10.0)
    assert backend.poll([handle]) == {}
    backend.cancel(handle, grace_seconds=10)
    ((ended, detail),) = wait_all(backend, [handle]).values()
    assert ended is Ended.CANCELLED
    assert marker.read_text() == "terminated\n"
    assert detail in ("was killed by SIGTERM (exit code 143)", "was cancelled before it ran")
    backend.cleanup(handle)
    # the pod is deleted, its log was followed to the end
    assert attempt.record.logs_uri is not None
    log = read_log(logs, attempt.record.logs_uri)
    assert log == f"sleeping {attempt.record.id}\nstopping {attempt.record.id}\n"


STOPPING_TAKES = "1"
"""How long the stand-in takes to stop once it got SIGTERM, as a step process does (its log is
followed from the moment its pod's deletion is seen; a process that ends at once can be gone
before that)."""


def test_a_job_deleted_from_outside_is_lost(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    backend = backend_for()
    marker = tmp_path / "m"
    attempt = launch(world, logs, STAND_IN="sleep", MARKER=str(marker), STOP_SECONDS=STOPPING_TAKES)
    handle = backend.submit(attempt, None)
    wait_until_seen_running(backend, handle)
    backend._clients.batch.delete_namespaced_job(
        handle.job_name, NS, propagation_policy="Background"
    )
    assert wait_all(backend, [handle]) == {
        handle: (Ended.LOST, "was deleted from outside (its Job is gone)")
    }
    backend.cleanup(handle)
    # the pod's log was followed from the moment its deletion was seen, to its end
    assert_log_kept_to_the_end(logs, attempt)


def test_stop_recorded_deletes_the_job_of_the_step_run(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    starter = backend_for()
    marker = tmp_path / "m"
    attempt = launch(world, logs, STAND_IN="sleep", MARKER=str(marker), STOP_SECONDS=STOPPING_TAKES)
    handle = starter.submit(attempt, None)
    wait_until_seen_running(starter, handle)
    elsewhere = backend_for()  # e.g. in the process of `wharf runs stop --force`
    assert not elsewhere.stop_recorded(world.step())
    assert elsewhere.stop_recorded(attempt.record)
    wait_for(marker.exists, "the SIGTERM marker", 10.0)  # its process got SIGTERM
    assert starter.poll([handle], timeout=30)[handle].ended is Ended.LOST
    starter.cleanup(handle)
    assert_log_kept_to_the_end(logs, attempt)  # the starter followed the deleted pod's log


def wait_until_seen_running(backend: KubernetesStepBackend, handle: KubernetesHandle) -> None:
    """Until the backend's watch shows the attempt's container started (its process may print
    before the kubelet reports it running)."""
    pods = backend.watches[0]
    wait_for(
        lambda: any(pod_started(p) for p in pods.objects(handle.job_name)), "the pod running", 10
    )


def assert_log_kept_to_the_end(logs: LocalArtifactStore, attempt: StepLaunch) -> None:
    assert attempt.record.logs_uri is not None
    log = read_log(logs, attempt.record.logs_uri)
    assert log == f"sleeping {attempt.record.id}\nstopping {attempt.record.id}\n"


def test_a_restarted_orchestrator_adopts_the_job_of_a_running_step_instead_of_a_second(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    clients: KubeClients,
    tmp_path: Path,
) -> None:
    run_labels = {"wharf.io/pipeline": "training", "wharf.io/run-id": "r1"}
    marker = tmp_path / "m"
    attempt = launch(world, logs, STAND_IN="sleep", MARKER=str(marker))
    backend_for(labels=run_labels).submit(attempt, None)  # its orchestrator pod dies
    wait_for(lambda: Path(f"{marker}.started").exists(), "the step to start", 10.0)
    successor = backend_for(labels=run_labels)
    handle = successor.submit(attempt, None)
    assert job_names(clients) == [handle.job_name]
    assert successor.poll([handle], timeout=0.2) == {}  # it runs: the successor sees its pod
    successor.cancel(handle, grace_seconds=5)
    assert wait_all(successor, [handle])[handle][0] is Ended.CANCELLED
    assert marker.read_text() == "terminated\n"
    successor.cleanup(handle)


def test_a_job_of_another_step_run_with_the_same_name_is_refused(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    backend = backend_for()
    attempt = launch(world, logs, STAND_IN="ok")
    squatter = {
        "metadata": {
            "name": job_name_for(backend.settings, attempt.record),
            "labels": {"app": "other"},
        },
        "spec": {
            "suspend": True,  # no pod: only its name matters
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": STAND_IN_IMAGE}],
                }
            },
        },
    }
    clients.batch.create_namespaced_job(NS, squatter)
    with pytest.raises(InputError, match="already exists in namespace default for another"):
        backend.submit(attempt, None)
