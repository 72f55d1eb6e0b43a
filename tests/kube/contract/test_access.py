"""Access checks as a preflight makes them: SelfSubjectAccessReview and RBAC's 403."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kube.contract.conftest import Target


def _review(namespace: str, verb: str, resource: str, **extra: str) -> dict[str, Any]:
    attributes = {"namespace": namespace, "verb": verb, "resource": resource, **extra}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


@pytest.mark.parametrize(
    ("verb", "resource", "extra"),
    [
        ("create", "pods", {}),
        ("watch", "pods", {}),
        ("get", "pods", {"subresource": "log"}),
        ("delete", "jobs", {"group": "batch"}),
        ("create", "cronjobs", {"group": "batch"}),
        ("create", "secrets", {}),
    ],
)
def test_an_access_review_allows_the_tokens_user(
    target: Target, verb: str, resource: str, extra: dict[str, str]
) -> None:
    body = _review(target.namespace, verb, resource, **extra)
    answer = target.raw(
        client.AuthorizationV1Api(target.api_client).create_self_subject_access_review, body
    )
    assert answer["kind"] == "SelfSubjectAccessReview"
    assert answer["spec"]["resourceAttributes"] == body["spec"]["resourceAttributes"]
    assert answer["status"]["allowed"] is True


def test_a_non_resource_access_review(target: Target) -> None:
    body = {"spec": {"nonResourceAttributes": {"path": "/version", "verb": "get"}}}
    answer = target.raw(
        client.AuthorizationV1Api(target.api_client).create_self_subject_access_review, body
    )
    assert answer["status"]["allowed"] is True


def test_the_anonymous_user_may_not_review_its_access(target: Target) -> None:
    configuration = copy.deepcopy(target.api_client.configuration)
    configuration.refresh_api_key_hook = None
    configuration.api_key = {}
    with client.ApiClient(configuration) as anonymous, pytest.raises(ApiException) as raised:
        client.AuthorizationV1Api(anonymous).create_self_subject_access_review(
            _review(target.namespace, "create", "pods")
        )
    assert raised.value.status == 403
    body = json.loads(raised.value.body)
    assert body["reason"] == "Forbidden"
    assert body["details"] == {"group": "authorization.k8s.io", "kind": "selfsubjectaccessreviews"}
    assert body["message"] == (
        'selfsubjectaccessreviews.authorization.k8s.io is forbidden: User "system:anonymous" '
        'cannot create resource "selfsubjectaccessreviews" in API group "authorization.k8s.io" '
        "at the cluster scope"
    )


@pytest.mark.emulator_only(reason="takes a permission away with the emulator's access rules")
def test_a_denied_permission_shows_in_the_review_and_in_the_request(target: Target) -> None:
    assert target.emulator is not None
    target.emulator.access.deny("create", "pods")
    answer = target.raw(
        client.AuthorizationV1Api(target.api_client).create_self_subject_access_review,
        _review(target.namespace, "create", "pods"),
    )
    assert answer["status"]["allowed"] is False
    status, error = target.error(
        target.core.create_namespaced_pod, target.namespace, target.pod_manifest("p")
    )
    assert status == 403 and error["reason"] == "Forbidden"
    assert error["details"] == {"kind": "pods"}
    assert 'cannot create resource "pods" in API group ""' in error["message"]
    assert f'in the namespace "{target.namespace}"' in error["message"]
