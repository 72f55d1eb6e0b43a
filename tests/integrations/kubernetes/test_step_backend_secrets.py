"""The Kubernetes step backend's run tokens, on the API emulator and the process kubelet
(:mod:`.step_backend_bed`): a token travels in a Secret the Job only references.

- A backend without an owner (the step operator's) gives each Job a Secret of its own, named
  after it and created after it, owned by it from its create on (no moment when it is owned by
  nothing): deleting the Job (its cleanup, ``kubectl``) takes the Secret along; a Job the API
  refuses leaves no Secret, and a Secret the API refuses takes the Job away; a Secret of that
  name there already is taken over only for the same step run. A backend closing when idle
  leaves no Secret and no watch between steps.
- A backend with an owner (the orchestrator Job's; a ConfigMap stands in for it here) keeps one
  Secret, owned by that owner, storing each run's token once.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.integrations.kubernetes.step_backend_bed import (
    NS,
    BackendFactory,
    job_names,
    launch,
    wait_all,
)
from tests.kube.emulator import Emulator
from tests.store.conftest import World
from tests.waiting import wait_for, wait_until
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.errors import WharfError
from wharf.execution.backends import Ended
from wharf.execution.log_capture import read_log
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.step_backend import job_name_for

GC = 10.0
"""Seconds: ample for the garbage collector to delete a removed Job's Secret."""


def secret_names(clients: KubeClients) -> list[str]:
    return [s.metadata.name for s in clients.core.list_namespaced_secret(NS).items]


def token_ref(clients: KubeClients, job_name: str) -> tuple[str, str]:
    """(Secret, key) the Job's ``WHARF_API_KEY`` is read from."""
    job = clients.batch.read_namespaced_job(job_name, NS, _preload_content=False)
    env = json.loads(job.data)["spec"]["template"]["spec"]["containers"][0]["env"]
    (ref,) = [e["valueFrom"]["secretKeyRef"] for e in env if e["name"] == "WHARF_API_KEY"]
    return ref["name"], ref["key"]


def owner_config_map(clients: KubeClients) -> dict[str, Any]:
    """A ConfigMap standing in for the orchestrator Job as the backend's owner (as created)."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}
    create: Any = clients.core.create_namespaced_config_map
    created: dict[str, Any] = json.loads(create(NS, body, _preload_content=False).data)
    return created


def test_the_token_travels_in_a_secret_of_the_job_s_own_that_the_job_owns(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    clients: KubeClients,
    emulator: Emulator,
) -> None:
    """The Secret is owned by its Job from its create on: before, it was created first and
    given its owner by a patch once the Job existed (a process dying in between left it owned
    by nothing, for good). Its pod may wait a moment for it, which is not a failure."""
    backend = backend_for()
    token = "wharf-run-token-0123456789"
    attempt = launch(world, logs, STAND_IN="ok", WHARF_API_KEY=token)
    emulator.faults.fail_next("patch", "secrets", code=403, reason="Forbidden")
    handle = backend.submit(attempt, None)
    assert emulator.faults.pending_failures() == 1  # no patch was needed
    emulator.faults.reset()
    job = json.loads(
        clients.batch.read_namespaced_job(handle.job_name, NS, _preload_content=False).data
    )
    assert token not in json.dumps(job)
    name, key = token_ref(clients, handle.job_name)
    assert name == handle.job_name
    secret = clients.core.read_namespaced_secret(name, NS)
    assert base64.b64decode(secret.data[key]).decode() == token
    assert secret.metadata.labels["wharf.io/pipeline"] == "training"
    assert secret.metadata.labels["wharf.io/step-run-id"] == str(attempt.record.id)
    (owner,) = secret.metadata.owner_references
    assert owner.block_owner_deletion is False  # no jobs/finalizers right needed
    assert (owner.kind, owner.name, owner.uid) == (
        "Job",
        job["metadata"]["name"],
        job["metadata"]["uid"],
    )
    assert wait_all(backend, [handle])[handle][0] is Ended.SUCCEEDED
    backend.cleanup(handle)
    assert attempt.record.logs_uri is not None
    assert f"token {token}" in read_log(logs, attempt.record.logs_uri)
    assert wait_until(lambda: not secret_names(clients), GC), "the Job's Secret outlived it"


def test_each_job_has_its_own_secret_which_goes_with_the_job_deleted_from_outside(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    """As a Job deleted by ``kubectl`` or its TTL once no Wharf process is left to clean up."""
    backend = backend_for()
    tokens = ["token-of-run-1", "token-of-run-2"]
    handles = [
        backend.submit(launch(world, logs, STAND_IN="ok", WHARF_API_KEY=token), None)
        for token in tokens
    ]
    refs = [token_ref(clients, handle.job_name) for handle in handles]
    assert [name for name, _ in refs] == [handle.job_name for handle in handles]
    assert sorted(secret_names(clients)) == sorted(h.job_name for h in handles)
    wait_all(backend, handles)
    clients.batch.delete_namespaced_job(handles[0].job_name, NS, propagation_policy="Background")
    gone = handles[0].job_name
    assert wait_until(lambda: gone not in secret_names(clients), GC), "its Secret stayed"
    assert handles[1].job_name in secret_names(clients)  # the other Job's stays with its Job
    for handle in handles:
        backend.cleanup(handle)
    assert wait_until(lambda: not secret_names(clients), GC), "a Secret outlived its Job"


@pytest.mark.parametrize("refused", ["jobs", "secrets"])
def test_a_job_or_secret_refused_leaves_neither_behind(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    clients: KubeClients,
    emulator: Emulator,
    refused: str,
) -> None:
    """``jobs``: the API refuses the Job, no Secret is made; ``secrets``: the Job is created but
    its Secret is refused (its pod would wait for it for good), the Job goes."""
    backend = backend_for()
    emulator.faults.fail_next("create", refused, code=403, reason="Forbidden")
    expected = "Cannot create the Job" if refused == "jobs" else "Cannot create the step's Secret"
    attempt = launch(world, logs, STAND_IN="ok", WHARF_API_KEY="t")
    with pytest.raises(WharfError) as raised:
        backend.submit(attempt, None)
    message = str(raised.value)
    assert "\n" not in message and expected in message, message
    assert secret_names(clients) == []
    assert wait_until(lambda: not job_names(clients), GC), "the Job stayed"
    assert emulator.faults.pending_failures() == 0


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
        assert secret_names(clients) == [handle.job_name]
        backend.cleanup(handle)
        assert wait_until(lambda: not secret_names(clients), GC), "the Job's Secret stayed"
        wait_for(lambda: emulator.open_watches == 1, "one open watch", 10.0)  # the kubelet's own


def test_a_backend_with_an_owner_stores_each_token_once_in_one_secret_it_owns(
    backend_for: BackendFactory, world: World, logs: LocalArtifactStore, clients: KubeClients
) -> None:
    """The orchestrator's: one Secret for all its Jobs, no API call per step for it once a
    token is stored, garbage-collected with the owner."""
    owner = owner_config_map(clients)
    backend = backend_for(owner=owner)
    tokens = ["token-of-run-1", "token-of-run-2", "token-of-run-1"]
    handles = [
        backend.submit(launch(world, logs, STAND_IN="ok", WHARF_API_KEY=token), None)
        for token in tokens
    ]
    refs = [token_ref(clients, handle.job_name) for handle in handles]
    assert refs[0] == refs[2] != refs[1] and refs[0][0] == refs[1][0]
    secret = clients.core.read_namespaced_secret(refs[0][0], NS)
    stored = {key: base64.b64decode(value).decode() for key, value in secret.data.items()}
    assert stored == {refs[0][1]: "token-of-run-1", refs[1][1]: "token-of-run-2"}
    (reference,) = secret.metadata.owner_references
    assert (reference.kind, reference.uid) == ("ConfigMap", owner["metadata"]["uid"])
    wait_all(backend, handles)
    for handle in handles:
        backend.cleanup(handle)
    assert secret_names(clients) == [refs[0][0]]  # the shared Secret stays until close
    backend.close()
    assert secret_names(clients) == []


@pytest.mark.parametrize("step_run", ["same", "another"])
def test_a_secret_there_already_is_taken_over_only_for_the_same_step_run(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    clients: KubeClients,
    step_run: str,
) -> None:
    """``same``: left by an earlier submit of the step run (e.g. a process that died between
    the Secret and the Job): it gets the token and its Job; ``another``: refused, untouched."""
    backend = backend_for()
    attempt = launch(world, logs, STAND_IN="ok", WHARF_API_KEY="new-token")
    name = job_name_for(backend.settings, attempt.record)
    owner_id = str(attempt.record.id) if step_run == "same" else "someone-else"
    stale = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": {"wharf.io/step-run-id": owner_id}},
        "stringData": {"WHARF_API_KEY": "old-token"},
    }
    create: Any = clients.core.create_namespaced_secret
    create(NS, stale)
    if step_run == "another":
        with pytest.raises(WharfError, match=f"A Secret named {name} already exists"):
            backend.submit(attempt, None)
        assert job_names(clients) == []
        kept = clients.core.read_namespaced_secret(name, NS)
        assert base64.b64decode(kept.data["WHARF_API_KEY"]).decode() == "old-token"
        assert not kept.metadata.owner_references
        return
    handle = backend.submit(attempt, None)
    secret = clients.core.read_namespaced_secret(name, NS)
    assert base64.b64decode(secret.data["WHARF_API_KEY"]).decode() == "new-token"
    assert [ref.name for ref in secret.metadata.owner_references] == [handle.job_name]
    assert wait_all(backend, [handle])[handle][0] is Ended.SUCCEEDED
    backend.cleanup(handle)
    assert wait_until(lambda: not secret_names(clients), GC), "the Job's Secret stayed"
