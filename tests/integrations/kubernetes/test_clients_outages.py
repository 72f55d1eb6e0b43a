"""Clients that ride out a short API outage retry 429 and 5xx answers on every verb; the others,
and any answer that is not an outage's, fail at once. Against the emulator's injected faults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiException

from tests.kube.emulator import Emulator
from wharf.integrations.kubernetes import clients as clients_module
from wharf.integrations.kubernetes.clients import (
    IN_CLUSTER_ENV,
    OUTAGE_STATUSES,
    KubeClients,
    kube_clients,
)

NS = "default"


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    monkeypatch.delenv(IN_CLUSTER_ENV, raising=False)
    with Emulator() as emu:
        yield emu


def clients_of(emulator: Emulator, *, patient: bool) -> KubeClients:
    return kube_clients(kubeconfig=str(emulator.kubeconfig_path), ride_out_outages=patient)


def config_map(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def names(clients: KubeClients) -> list[str]:
    return [m.metadata.name for m in clients.core.list_namespaced_config_map(NS).items]


def test_a_patient_client_gets_through_an_outage_on_every_verb(emulator: Emulator) -> None:
    faults = emulator.faults
    clients = clients_of(emulator, patient=True)
    try:
        faults.fail_next("create", "configmaps", code=503, times=2)
        faults.fail_next("create", "configmaps", code=429)  # with Retry-After: 1
        clients.core.create_namespaced_config_map(NS, config_map("a"))
        faults.fail_next("list", "configmaps", code=500)
        assert names(clients) == ["a"]
        faults.fail_next("patch", "configmaps", code=502)
        clients.core.patch_namespaced_config_map("a", NS, {"data": {"k": "w"}})
        faults.fail_next("delete", "configmaps", code=504)
        clients.core.delete_namespaced_config_map("a", NS)
        assert names(clients) == [] and faults.pending_failures() == 0
    finally:
        clients.close()


def test_an_answer_that_is_not_an_outage_is_not_retried(emulator: Emulator) -> None:
    clients = clients_of(emulator, patient=True)
    try:
        emulator.faults.fail_next("create", "configmaps", code=422)
        with pytest.raises(ApiException) as caught:
            clients.core.create_namespaced_config_map(NS, config_map("a"))
        assert caught.value.status == 422 and names(clients) == []
    finally:
        clients.close()


def test_an_outage_longer_than_the_retries_ends_with_its_last_answer(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clients_module, "OUTAGE_RETRIES", 2)
    clients = clients_of(emulator, patient=True)
    try:
        emulator.faults.fail_next("create", "configmaps", code=503, times=3)
        with pytest.raises(ApiException) as caught:
            clients.core.create_namespaced_config_map(NS, config_map("a"))
        assert caught.value.status == 503 and emulator.faults.pending_failures() == 0
    finally:
        clients.close()


@pytest.mark.parametrize("status", sorted(OUTAGE_STATUSES))
def test_a_client_for_a_waiting_user_fails_at_once(emulator: Emulator, status: int) -> None:
    clients = clients_of(emulator, patient=False)
    try:
        emulator.faults.fail_next("create", "configmaps", code=status)
        with pytest.raises(ApiException) as caught:
            clients.core.create_namespaced_config_map(NS, config_map("a"))
        assert caught.value.status == status
        clients.core.create_namespaced_config_map(NS, config_map("a"))  # the next one goes
        assert names(clients) == ["a"]
    finally:
        clients.close()
