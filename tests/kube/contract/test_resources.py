"""Secrets, ConfigMaps, ServiceAccounts round trips, and API discovery."""

from __future__ import annotations

import base64
import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kube.contract.conftest import MERGE_PATCH, Target


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_secret_string_data_is_stored_as_base64_data(target: Target) -> None:
    created = target.raw(
        target.core.create_namespaced_secret,
        target.namespace,
        {
            "metadata": {"name": "token"},
            "data": {"a": _b64("from data")},
            "stringData": {"b": "from stringData", "a": "stringData wins"},
        },
    )
    assert created["type"] == "Opaque"
    assert "stringData" not in created
    assert created["data"] == {"a": _b64("stringData wins"), "b": _b64("from stringData")}
    model = target.core.read_namespaced_secret("token", target.namespace)
    assert base64.b64decode(model.data["b"]) == b"from stringData"


def test_secret_data_must_be_base64(target: Target) -> None:
    status, error = target.error(
        target.core.create_namespaced_secret,
        target.namespace,
        {"metadata": {"name": "s"}, "data": {"a": "not base64!"}},
    )
    assert status == 400 and error["reason"] == "BadRequest"


def test_secret_keys_are_validated(target: Target) -> None:
    status, error = target.error(
        target.core.create_namespaced_secret,
        target.namespace,
        {"metadata": {"name": "s"}, "stringData": {"bad key": "v"}},
    )
    assert status == 422 and error["reason"] == "Invalid"


def test_secret_string_data_patch_replaces_a_key(target: Target) -> None:
    target.core.create_namespaced_secret(
        target.namespace, {"metadata": {"name": "s"}, "stringData": {"k": "old", "other": "x"}}
    )
    patched = target.raw(
        target.core.patch_namespaced_secret,
        "s",
        target.namespace,
        {"stringData": {"k": "new"}},
        _content_type=MERGE_PATCH,
    )
    assert patched["data"] == {"k": _b64("new"), "other": _b64("x")}


def test_config_map_data_and_binary_data_round_trip(target: Target) -> None:
    body = target.config_map_manifest("cm", {"config.json": '{"a": [1, 2]}\n', "empty": ""})
    body["binaryData"] = {"blob": _b64("\x00\x01binary")}
    target.core.create_namespaced_config_map(target.namespace, body)
    read = target.raw(target.core.read_namespaced_config_map, "cm", target.namespace)
    assert read["data"] == {"config.json": '{"a": [1, 2]}\n', "empty": ""}
    assert read["binaryData"] == {"blob": _b64("\x00\x01binary")}


def test_service_accounts(target: Target) -> None:
    created = target.raw(
        target.core.create_namespaced_service_account,
        target.namespace,
        {"metadata": {"name": "wharf-steps", "labels": {"app": "wharf"}}},
    )
    assert created["kind"] == "ServiceAccount"
    read = target.core.read_namespaced_service_account("wharf-steps", target.namespace)
    assert read.metadata.labels == {"app": "wharf"}
    listed = target.core.list_namespaced_service_account(target.namespace, label_selector="app")
    assert [sa.metadata.name for sa in listed.items] == ["wharf-steps"]
    pod = target.raw(
        target.core.create_namespaced_pod,
        target.namespace,
        target.pod_manifest("p", serviceAccountName="wharf-steps"),
    )
    assert pod["spec"]["serviceAccountName"] == "wharf-steps"


def test_version(target: Target) -> None:
    info = client.VersionApi(target.api_client).get_code()
    assert info.major == "1"
    assert info.git_version.startswith("v1.")
    major, minor = target.server_version()
    assert (major, minor) >= (1, 20)


def test_core_and_group_discovery(target: Target) -> None:
    core_versions = client.CoreApi(target.api_client).get_api_versions()
    assert core_versions.versions == ["v1"]
    groups = client.ApisApi(target.api_client).get_api_versions().groups
    batch = [g for g in groups if g.name == "batch"]
    assert batch, [g.name for g in groups]
    assert "batch/v1" in [v.group_version for v in batch[0].versions]
    assert batch[0].preferred_version.group_version == "batch/v1"


def test_core_v1_resources(target: Target) -> None:
    resources = {r.name: r for r in target.core.get_api_resources().resources}
    for name in (
        "pods",
        "pods/status",
        "pods/log",
        "pods/binding",
        "secrets",
        "configmaps",
        "serviceaccounts",
        "namespaces",
        "events",
    ):
        assert name in resources, name
    assert resources["pods"].namespaced and resources["pods"].kind == "Pod"
    assert not resources["namespaces"].namespaced
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= set(
        resources["pods"].verbs
    )
    assert resources["pods/binding"].kind == "Binding"
    assert resources["pods/log"].verbs == ["get"]  # fmt: skip


def test_batch_v1_resources(target: Target) -> None:
    resources = {r.name: r for r in target.batch.get_api_resources().resources}
    assert resources["jobs"].kind == "Job" and resources["jobs"].namespaced
    assert "jobs/status" in resources


@pytest.mark.emulator_only(reason="kube-apiserver 1.20 serves CronJob only as batch/v1beta1")
def test_batch_v1_serves_cronjobs(target: Target) -> None:
    resources = {r.name: r for r in target.batch.get_api_resources().resources}
    assert resources["cronjobs"].kind == "CronJob"
    assert "cronjobs/status" in resources


def _client_with_token(target: Target, token: str | None) -> client.ApiClient:
    configuration = copy.deepcopy(target.api_client.configuration)
    configuration.refresh_api_key_hook = None  # else the kubeconfig's token comes back
    configuration.api_key = {"BearerToken": f"Bearer {token}"} if token else {}
    return client.ApiClient(configuration)


def test_a_wrong_token_is_unauthorized(target: Target) -> None:
    with _client_with_token(target, "not-the-token") as api_client:
        for call in (
            lambda: client.CoreV1Api(api_client).list_namespaced_pod(target.namespace),
            lambda: client.VersionApi(api_client).get_code(),
        ):
            with pytest.raises(ApiException) as raised:
                call()
            assert raised.value.status == 401
            assert json.loads(raised.value.body) == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            }


def test_no_token_is_the_anonymous_user(target: Target) -> None:
    """kube-apiserver's default --anonymous-auth: no token is system:anonymous, which RBAC
    lets read /version but nothing namespaced."""
    with _client_with_token(target, None) as api_client:
        assert client.VersionApi(api_client).get_code().major == "1"
        with pytest.raises(ApiException) as raised:
            client.CoreV1Api(api_client).list_namespaced_pod(target.namespace)
    assert raised.value.status == 403
    body = json.loads(raised.value.body)
    assert body["reason"] == "Forbidden"
    assert body["details"] == {"kind": "pods"}
    assert body["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group ""'
        f' in the namespace "{target.namespace}"'
    )


def test_a_strategic_merge_patch_of_secret_data_replaces_only_the_keys_it_names(
    target: Target,
) -> None:
    """What the client sends for a dict patch (a strategic merge) merges a Secret's data keys."""
    target.core.create_namespaced_secret(
        target.namespace, {"metadata": {"name": "s"}, "data": {"a": _b64("1"), "b": _b64("2")}}
    )
    target.core.patch_namespaced_secret("s", target.namespace, {"data": {"b": _b64("3")}})
    secret = target.core.read_namespaced_secret("s", target.namespace)
    assert secret.data == {"a": _b64("1"), "b": _b64("3")}
