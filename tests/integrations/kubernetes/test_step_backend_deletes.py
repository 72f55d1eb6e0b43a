"""Deleting a step attempt's Jobs (``step_backend_deletes``) on the API emulator: an object
already gone is no error, the Jobs of one step run only are deleted, and the undecoded answers
are read to their end, so many deletes in a row reuse the client's connections."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from tests.kube.emulator import Emulator
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.labels import STEP_RUN_ID_KEY
from wharf.integrations.kubernetes.step_backend_deletes import (
    delete_job,
    delete_jobs_of_step_run,
)

NAMESPACE = "default"


def job(name: str, step_run_id: UUID) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {STEP_RUN_ID_KEY: str(step_run_id)}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "none", "command": ["true"]}],
                }
            },
        },
    }


def job_names(clients: KubeClients) -> set[str]:
    listed: Any = clients.batch.list_namespaced_job(NAMESPACE)
    return {item.metadata.name for item in listed.items}


def create(clients: KubeClients, name: str, step_run_id: UUID) -> None:
    created: Any = clients.batch.create_namespaced_job
    created(NAMESPACE, job(name, step_run_id), _preload_content=False).read()


def test_a_job_already_gone_is_not_an_error(emulator: Emulator, clients: KubeClients) -> None:
    create(clients, "a", uuid4())
    assert delete_job(clients.batch, "a", NAMESPACE, "Background")
    assert not delete_job(clients.batch, "a", NAMESPACE, "Background")
    assert "a" not in job_names(clients)


def test_only_the_jobs_of_the_step_run_are_deleted(
    emulator: Emulator, clients: KubeClients
) -> None:
    mine, other = uuid4(), uuid4()
    create(clients, "first", mine)
    create(clients, "retry", mine)
    create(clients, "other", other)

    assert delete_jobs_of_step_run(clients.batch, NAMESPACE, mine)
    assert job_names(clients) == {"other"}
    assert not delete_jobs_of_step_run(clients.batch, NAMESPACE, mine)


def test_many_deletes_in_a_row_reuse_the_connections(
    emulator: Emulator, clients: KubeClients
) -> None:
    names = [f"job-{i}" for i in range(30)]
    for name in names:
        create(clients, name, uuid4())
    for name in names:
        assert delete_job(clients.batch, name, NAMESPACE, "Background", grace=1)
    assert not job_names(clients) & set(names)
