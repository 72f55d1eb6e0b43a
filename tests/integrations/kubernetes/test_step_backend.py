"""The Kubernetes step backend through its launch interface, on the API emulator and the process
kubelet (:mod:`.step_backend_bed`): real Jobs whose pods run as local processes, a real SQLite
store for the step runs, a local artifact store for the logs. Here: what an attempt's outcome
is (exit codes, an image that cannot be pulled, Kubernetes' own retries, a TTL that deletes the
Job first), how it arrives (one pod watch and one Job watch, dropped, expired or refused
watches), and what an allocation makes of the pod."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from tests.integrations.kubernetes.step_backend_bed import (
    NS,
    PYTHON_IMAGE,
    BackendFactory,
    job_names,
    launch,
    wait_all,
)
from tests.kube.emulator import Emulator
from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.errors import InputError
from wharf.execution.backends import AttemptOutcome, Ended
from wharf.execution.log_capture import read_log
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.resource_manager.contract.models import ResourceRequestInfo


def test_the_real_entry_point_runs_in_the_pod_and_its_log_reaches_the_artifact_store(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    """The pod runs ``python -m wharf.integrations.kubernetes.step_main ID NAMESPACE`` with the attempt's settings:
    it opens the store, finds its step run, and fails it there (the world's snapshot has no
    stack), exiting 3."""
    backend = backend_for(PYTHON_IMAGE)
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    attempt = launch(world, logs, WHARF_STORE_URL=store_url, WHARF_HOME=str(tmp_path / "home"))
    handle = backend.submit(attempt, None)
    assert handle.job_name.startswith("wharf-step-")
    assert wait_all(backend, [handle], timeout=60) == {handle: (Ended.FAILED, "exited with code 3")}
    backend.cleanup(handle)
    assert attempt.record.logs_uri is not None
    log = read_log(logs, attempt.record.logs_uri)
    assert f"Snapshot {world.snapshot.id} records no stack to run on" in log
    wait_for(lambda: job_names(backend._clients) == [], "the Jobs to go", 10.0)


def test_an_attempt_that_exits_0_succeeded_and_one_that_exits_2_failed(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore
) -> None:
    backend = backend_for()
    ok, bad = launch(world, logs, STAND_IN="ok"), launch(world, logs, STAND_IN="fail")
    done, failed = backend.submit(ok, None), backend.submit(bad, None)
    assert wait_all(backend, [done, failed]) == {
        done: (Ended.SUCCEEDED, "exited with code 0"),
        failed: (Ended.FAILED, "exited with code 2"),
    }
    for handle in (done, failed):
        backend.cleanup(handle)
    assert ok.record.logs_uri is not None and bad.record.logs_uri is not None
    assert read_log(logs, ok.record.logs_uri).startswith(f"hello from {ok.record.id}\n")
    assert read_log(logs, bad.record.logs_uri) == "failing\n"


def test_many_attempts_are_polled_through_one_pod_watch_and_one_job_watch(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    emulator: Emulator,
) -> None:
    backend = backend_for()
    kinds = ["ok", "fail"] * 4
    handles = [backend.submit(launch(world, logs, STAND_IN=kind), None) for kind in kinds]
    ended = wait_all(backend, handles, timeout=60)
    expected = {"ok": Ended.SUCCEEDED, "fail": Ended.FAILED}
    assert [ended[h][0] for h in handles] == [expected[k] for k in kinds]
    pods, jobs = backend.watches
    assert (pods.lists, jobs.lists) == (1, 1)
    # this backend's three (pods, Jobs, the Jobs' FailedCreate Events), and the kubelet's one
    assert emulator.open_watches == 3 + 1
    for handle in handles:
        backend.cleanup(handle)


def test_an_image_that_cannot_be_pulled_fails_at_once_naming_image_and_reason(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    backend = backend_for("registry.example/missing:1")
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    ((ended, detail),) = wait_all(backend, [handle]).values()
    assert ended is Ended.FAILED
    # which of the two a poll sees depends on when it looks (the kubelet backs off)
    assert re.match(
        r'could not start: (ErrImagePull|ImagePullBackOff) for image "registry.example/missing:1"',
        detail,
    ), detail
    backend.cleanup(handle)
    wait_for(lambda: job_names(clients) == [], "the Jobs to go", 10.0)


def test_a_pod_the_api_refuses_fails_the_attempt_at_once_naming_the_refusal(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    clients: KubeClients,
    emulator: Emulator,
) -> None:
    """Before, a Job whose pod the API refused (here its service account does not exist) had
    no pod and no condition: the attempt waited until its startup timeout. The Job
    controller's FailedCreate Event now fails it at once, saying why."""
    emulator.store.service_account_admission = True
    backend = backend_for(service_account_name="no-such-account")
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    ((ended, detail),) = wait_all(backend, [handle]).values()
    assert ended is Ended.FAILED
    assert detail == (
        f'could not start: the API refused its pod (Error creating: pods "{handle.job_name}-" '
        "is forbidden: error looking up service account default/no-such-account: "
        'serviceaccount "no-such-account" not found)'
    ), detail
    backend.cleanup(handle)
    wait_for(lambda: job_names(clients) == [], "the Jobs to go", 10.0)


def test_without_the_right_to_watch_events_steps_run_as_before(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, emulator: Emulator
) -> None:
    """The documented Roles before FailedCreate was read had no right on events: the watch
    of FailedCreate events stops at its refusal (rather than retrying it for good)."""
    emulator.access.deny("list", "events")
    emulator.access.deny("watch", "events")
    backend = backend_for()
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    assert wait_all(backend, [handle])[handle][0] is Ended.SUCCEEDED
    assert emulator.open_watches == 2 + 1  # pods and Jobs, and the kubelet's
    backend.cleanup(handle)


def test_kubernetes_retries_within_the_margin_and_both_pods_logs_are_kept(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore
) -> None:
    backend = backend_for(backoff_limit_margin=1)
    attempt = launch(world, logs, STAND_IN="fail")
    handle = backend.submit(attempt, None)
    assert wait_all(backend, [handle]) == {handle: (Ended.FAILED, "exited with code 2")}
    pods, _ = backend.watches
    assert len(pods.objects(handle.job_name)) == 2
    backend.cleanup(handle)
    assert attempt.record.logs_uri is not None
    log = read_log(logs, attempt.record.logs_uri)
    assert log.count("failing\n") == 2 and log.count("--- pod ") == 2


def test_outcomes_arrive_through_dropped_and_expired_watches(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    emulator: Emulator,
    clients: KubeClients,
    tmp_path: Path,
) -> None:
    backend = backend_for()
    marker = tmp_path / "m"
    slow = backend.submit(launch(world, logs, STAND_IN="sleep", MARKER=str(marker)), None)
    wait_for(lambda: Path(f"{marker}.started").exists(), "the step to start", 10.0)
    emulator.faults.drop_watches()
    done = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    assert wait_all(backend, [done]) == {done: (Ended.SUCCEEDED, "exited with code 0")}
    # a change neither watch sees, then a compaction: both watches' versions are too old
    clients.core.create_namespaced_config_map(NS, {"metadata": {"name": "noise"}})
    emulator.faults.expire()
    emulator.faults.drop_watches()
    backend.cancel(slow, grace_seconds=5)
    assert wait_all(backend, [slow])[slow][0] is Ended.CANCELLED
    pods, jobs = backend.watches
    # each listed again after a 410
    wait_for(lambda: pods.lists >= 2 and jobs.lists >= 2, "pods and Jobs listed again", 60.0)
    for handle in (slow, done):
        backend.cleanup(handle)


def test_a_watch_the_server_refuses_is_an_error_not_a_wait(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, emulator: Emulator
) -> None:
    emulator.access.deny("list", "pods")
    backend = backend_for()
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    with pytest.raises(InputError, match=r"Cannot watch the step pods in namespace default: 403"):
        backend.poll([handle], timeout=30)
    emulator.access.reset()  # allowed again: the watch recovers by itself
    wait_for(lambda: backend.watches[0].refused is None, "the watch to be accepted", 10.0)
    assert wait_all(backend, [handle]) == {handle: (Ended.SUCCEEDED, "exited with code 0")}
    backend.cleanup(handle)


def test_an_outcome_is_kept_when_the_ttl_deletes_the_job_before_anyone_polls(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    backend = backend_for(ttl_seconds_after_finished=0)
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    # finished, deleted
    wait_for(lambda: clients.batch.list_namespaced_job(NS).items == [], "the Job to go", 10.0)
    outcome = backend.poll([handle], timeout=10)  # (once the watches caught up)
    assert outcome == {handle: AttemptOutcome(Ended.SUCCEEDED, "exited with code 0")}
    backend.cleanup(handle)


def test_an_allocation_shapes_the_pod_and_reaches_the_step(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    backend = backend_for(
        pod_settings={"node_selectors": {"accelerator": "a100", "zone": "a"}},
    )
    granted = allocation(
        ("CPU", "cpu", 250, "mCPU", 250),
        ("memory", "memory", 1, "GiB", 2**30),
        target_settings={"node_selectors": {"accelerator": "h200"}},
    )
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), granted)
    job = json.loads(
        clients.batch.read_namespaced_job(handle.job_name, NS, _preload_content=False).data
    )
    template = job["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "1Gi"},
        "limits": {"cpu": "250m", "memory": "1Gi"},
    }  # 1024Mi as the API server writes it back
    assert template["spec"]["nodeSelector"] == {"accelerator": "h200", "zone": "a"}
    assert template["metadata"]["annotations"]["wharf.io/resource-request-id"] == str(granted.id)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert json.loads(env["WHARF_STEP_ALLOCATION"])["id"] == str(granted.id)
    assert wait_all(backend, [handle])[handle][0] is Ended.SUCCEEDED
    backend.cleanup(handle)


def allocation(
    *items: tuple[str, str, int, str, int], target_settings: dict[str, object]
) -> ResourceRequestInfo:
    request_id = uuid.uuid4()
    granted = [
        {
            "id": str(uuid.uuid4()),
            "request_id": str(request_id),
            "demand_index": index,
            "pool_id": str(request_id),
            "class": "h200",
            "resource": resource,
            "resource_kind": kind,
            "quantity": quantity,
            "unit": unit,
            "base_quantity": base,
            "policy_id": str(request_id),
            "priority": 0,
            "target_settings": target_settings,
        }
        for index, (resource, kind, quantity, unit, base) in enumerate(items)
    ]
    return ResourceRequestInfo.model_validate(
        {
            "id": str(request_id),
            "subjects": [{"nodes": [{"subject_type": "project", "subject_id": "team"}]}],
            "demands": [{"kind": "cpu", "quantity": 1}],
            "created_at": "2026-01-01T00:00:00Z",
            "requester": "someone",
            "status": "allocated",
            "allocations": granted,
        }
    )
