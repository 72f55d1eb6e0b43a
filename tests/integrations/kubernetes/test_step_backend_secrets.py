"""The Kubernetes step backend's run tokens, on the API emulator and the process kubelet
(:mod:`.step_backend_bed`): a token travels in a Secret the Job only references, each run's
token is stored once, and a backend closing when idle leaves no Secret and no watch between
steps."""

from __future__ import annotations

import base64
import json

from tests.integrations.kubernetes.step_backend_bed import (
    NS,
    BackendFactory,
    launch,
    wait_all,
)
from tests.kube.emulator import Emulator
from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.backends import Ended
from wharf.execution.log_capture import read_log
from wharf.integrations.kubernetes.clients import KubeClients


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
        wait_for(lambda: emulator.open_watches == 1, "one open watch", 10.0)  # the kubelet's own
