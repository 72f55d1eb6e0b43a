"""The Kubernetes step backend through its launch interface, on the API emulator and the process
kubelet: real Jobs whose pods run as local processes, a real SQLite store for the step runs, a
local artifact store for the logs.

Two images: ``wharf/python:3.11`` is this interpreter (the real step entry point runs), and
``wharf/stand-in`` is a shell script standing in for ``python -m wharf.execution.entrypoint ID``
whose behaviour the attempt's environment picks (``STAND_IN``: ok, fail, sleep)."""

from __future__ import annotations

import base64
import json
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World, make_world
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import StepSpec
from wharf.core.errors import InputError
from wharf.execution.backends import AttemptOutcome, Ended, StepLaunch
from wharf.execution.log_capture import read_log
from wharf.integrations.kubernetes.clients import KubeClients, kube_clients
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesHandle, KubernetesStepBackend
from wharf.resource_manager.contract.models import ResourceRequestInfo
from wharf.store.sql import SqlStore

NS = "default"
PYTHON_IMAGE = "wharf/python:3.11"
STAND_IN_IMAGE = "wharf/stand-in"
SPEC = StepSpec(name="s", source="x:s", code_hash="s")
STAND_IN = """#!/bin/sh
# stands in for: python -m wharf.execution.entrypoint STEP_RUN_ID
case "$STAND_IN" in
  ok) echo "hello from $3"; echo "token $WHARF_API_KEY"; exit 0 ;;
  fail) echo "failing"; exit 2 ;;
  sleep)
    trap 'echo terminated > "$MARKER"; echo "stopping $3"; exit 143' TERM
    echo "sleeping $3"
    echo started > "$MARKER.started"
    sleep 60 &
    wait ;;
esac
"""


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


@pytest.fixture
def kubelet(emulator: Emulator, tmp_path: Path) -> Iterator[Kubelet]:
    stand_in = tmp_path / "stand-in" / "python"
    stand_in.parent.mkdir()
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    images = {PYTHON_IMAGE: sys.executable, STAND_IN_IMAGE: str(stand_in)}
    with Kubelet(
        emulator.kubeconfig_path, images=images, log_dir=emulator.log_dir, image_pull_backoff=0.2
    ) as running:
        assert running.wait_ready(5)
        yield running


@pytest.fixture
def clients(emulator: Emulator) -> Iterator[KubeClients]:
    made = kube_clients(kubeconfig=str(emulator.kubeconfig_path))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    store = SqlStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        yield make_world(store)
    finally:
        store.close()


@pytest.fixture
def logs(tmp_path: Path) -> LocalArtifactStore:
    return LocalArtifactStore(tmp_path / "artifacts")


BackendFactory = Callable[..., KubernetesStepBackend]


@pytest.fixture
def backend_for(clients: KubeClients, kubelet: Kubelet) -> Iterator[BackendFactory]:
    made: list[KubernetesStepBackend] = []

    def make(
        image: str = STAND_IN_IMAGE,
        labels: dict[str, str] | None = None,
        close_when_idle: bool = False,
        **settings: object,
    ) -> KubernetesStepBackend:
        backend = KubernetesStepBackend(
            clients,
            KubernetesOrchestratorSettings(namespace=NS, **settings),
            image=image,
            labels={"wharf.io/pipeline": "training"} if labels is None else labels,
            close_when_idle=close_when_idle,
        )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def launch(world: World, logs: LocalArtifactStore, **environment: str) -> StepLaunch:
    record = world.step(logs_uri=logs.new_uri("p", "r") + ".log", spec=SPEC)
    return StepLaunch(record, SPEC, environment, logs)


def wait_all(
    backend: KubernetesStepBackend, handles: list[KubernetesHandle], timeout: float = 30
) -> dict[KubernetesHandle, tuple[Ended, str]]:
    ended: dict[KubernetesHandle, tuple[Ended, str]] = {}
    deadline = time.monotonic() + timeout
    while len(ended) < len(handles):
        assert time.monotonic() < deadline, f"still running: {set(handles) - set(ended)}"
        left = [h for h in handles if h not in ended]
        outcomes = backend.poll(left, timeout=deadline - time.monotonic())
        ended.update({h: (o.ended, o.detail) for h, o in outcomes.items()})
    return ended


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for an observable condition (a file, an API object), with a deadline."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def job_names(clients: KubeClients) -> list[str]:
    return [job.metadata.name for job in clients.batch.list_namespaced_job(NS).items]


def test_the_real_entry_point_runs_in_the_pod_and_its_log_reaches_the_artifact_store(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    """The pod runs ``python -m wharf.execution.entrypoint ID`` with the attempt's settings:
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
    eventually(lambda: job_names(backend._clients) == [])


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
    assert emulator.open_watches == 2 + 1  # this backend's two, and the kubelet's one
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
    eventually(lambda: job_names(clients) == [])


def test_cancel_stops_the_running_process_with_sigterm(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    backend = backend_for()
    marker = tmp_path / "terminated"
    attempt = launch(world, logs, STAND_IN="sleep", MARKER=str(marker))
    handle = backend.submit(attempt, None)
    eventually(lambda: Path(f"{marker}.started").exists())
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


def test_a_job_deleted_from_outside_is_lost(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    backend = backend_for()
    marker = tmp_path / "m"
    handle = backend.submit(launch(world, logs, STAND_IN="sleep", MARKER=str(marker)), None)
    eventually(lambda: Path(f"{marker}.started").exists())
    backend._clients.batch.delete_namespaced_job(
        handle.job_name, NS, propagation_policy="Background"
    )
    assert wait_all(backend, [handle]) == {
        handle: (Ended.LOST, "was deleted from outside (its Job is gone)")
    }
    backend.cleanup(handle)


def test_the_token_travels_in_a_secret_that_the_job_only_references(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    backend = backend_for()
    token = "wharf-run-token-0123456789"
    attempt = launch(world, logs, STAND_IN="ok", WHARF_API_KEY=token)
    handle = backend.submit(attempt, None)
    job = clients.batch.read_namespaced_job(handle.job_name, NS, _preload_content=False)
    manifest = json.loads(job.data)
    assert token not in json.dumps(manifest)
    (env,) = [
        e
        for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]
        if e["name"] == "WHARF_API_KEY"
    ]
    ref = env["valueFrom"]["secretKeyRef"]
    secret = clients.core.read_namespaced_secret(ref["name"], NS)
    assert base64.b64decode(secret.data[ref["key"]]).decode() == token
    assert secret.metadata.labels["wharf.io/pipeline"] == "training"
    assert wait_all(backend, [handle])[handle][0] is Ended.SUCCEEDED
    backend.cleanup(handle)
    assert attempt.record.logs_uri is not None
    assert f"token {token}" in read_log(logs, attempt.record.logs_uri)
    backend.close()
    assert clients.core.list_namespaced_secret(NS).items == []


def test_stop_recorded_deletes_the_job_of_the_step_run(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, tmp_path: Path
) -> None:
    starter = backend_for()
    marker = tmp_path / "m"
    attempt = launch(world, logs, STAND_IN="sleep", MARKER=str(marker))
    handle = starter.submit(attempt, None)
    eventually(lambda: Path(f"{marker}.started").exists())
    elsewhere = backend_for()  # e.g. in the process of `wharf runs stop --force`
    assert not elsewhere.stop_recorded(world.step())
    assert elsewhere.stop_recorded(attempt.record)
    eventually(marker.exists)  # its process got SIGTERM
    assert starter.poll([handle], timeout=30)[handle].ended is Ended.LOST
    starter.cleanup(handle)


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
    eventually(lambda: Path(f"{marker}.started").exists())
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
        "metadata": {"name": backend.job_name(attempt.record), "labels": {"app": "other"}},
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
    eventually(lambda: Path(f"{marker}.started").exists())
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
    eventually(lambda: pods.lists >= 2 and jobs.lists >= 2)  # each listed again after a 410
    for handle in (slow, done):
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


def test_a_watch_the_server_refuses_is_an_error_not_a_wait(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, emulator: Emulator
) -> None:
    emulator.access.deny("list", "pods")
    backend = backend_for()
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    with pytest.raises(InputError, match=r"Cannot watch the step pods in namespace default: 403"):
        backend.poll([handle], timeout=30)
    emulator.access.reset()  # allowed again: the watch recovers by itself
    eventually(lambda: backend.watches[0].refused is None)
    assert wait_all(backend, [handle]) == {handle: (Ended.SUCCEEDED, "exited with code 0")}
    backend.cleanup(handle)


def test_each_token_is_stored_once_and_jobs_reference_their_own(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    """A backend serving several runs (a step operator) gets each run's token."""
    backend = backend_for()
    tokens = ["token-of-run-1", "token-of-run-2", "token-of-run-1"]
    handles = [
        backend.submit(launch(world, logs, STAND_IN="ok", WHARF_API_KEY=token), None)
        for token in tokens
    ]
    refs = []
    for handle in handles:
        job = clients.batch.read_namespaced_job(handle.job_name, NS, _preload_content=False)
        env = json.loads(job.data)["spec"]["template"]["spec"]["containers"][0]["env"]
        (ref,) = [e["valueFrom"]["secretKeyRef"] for e in env if e["name"] == "WHARF_API_KEY"]
        refs.append((ref["name"], ref["key"]))
    assert refs[0] == refs[2] != refs[1] and refs[0][0] == refs[1][0]
    secret = clients.core.read_namespaced_secret(refs[0][0], NS)
    stored = {key: base64.b64decode(value).decode() for key, value in secret.data.items()}
    assert stored == {refs[0][1]: "token-of-run-1", refs[1][1]: "token-of-run-2"}
    wait_all(backend, handles)
    for handle in handles:
        backend.cleanup(handle)


def test_an_outcome_is_kept_when_the_ttl_deletes_the_job_before_anyone_polls(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    backend = backend_for(ttl_seconds_after_finished=0)
    handle = backend.submit(launch(world, logs, STAND_IN="ok"), None)
    eventually(lambda: clients.batch.list_namespaced_job(NS).items == [])  # finished, deleted
    outcome = backend.poll([handle], timeout=10)  # (once the watches caught up)
    assert outcome == {handle: AttemptOutcome(Ended.SUCCEEDED, "exited with code 0")}
    backend.cleanup(handle)


def test_a_backend_closing_when_idle_leaves_nothing_between_steps_and_starts_again(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    clients: KubeClients,
    emulator: Emulator,
) -> None:
    """As a step operator's backend, which nobody closes: no Secret, no watch once idle."""
    backend = backend_for(labels={}, close_when_idle=True)
    for _ in range(2):
        handle = backend.submit(launch(world, logs, STAND_IN="ok", WHARF_API_KEY="t"), None)
        assert wait_all(backend, [handle])[handle][0] is Ended.SUCCEEDED
        assert len(clients.core.list_namespaced_secret(NS).items) == 1
        backend.cleanup(handle)
        assert clients.core.list_namespaced_secret(NS).items == []
        eventually(lambda: emulator.open_watches == 1)  # the kubelet's own
