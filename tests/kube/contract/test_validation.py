"""Validation and error bodies: 422 Invalid with causes, 400, 404 NotFound, 409 AlreadyExists."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.kube.contract.conftest import Target


def _invalid(target: Target, create: Any, body: dict[str, Any]) -> dict[str, Any]:
    status, error = target.error(create, target.namespace, body)
    assert status == 422, error
    assert error["kind"] == "Status" and error["apiVersion"] == "v1"
    assert error["status"] == "Failure" and error["code"] == 422
    assert error["reason"] == "Invalid"
    assert error["details"]["causes"], error
    return error


def _fields(error: dict[str, Any]) -> list[str]:
    return [cause.get("field", "") for cause in error["details"]["causes"]]


@pytest.mark.parametrize(
    "name", ["Bad_Name", "UPPER", "-dash-first", "dash-last-", "a" * 254, "a b"]
)
def test_bad_object_names_are_invalid(target: Target, name: str) -> None:
    error = _invalid(
        target, target.core.create_namespaced_config_map, target.config_map_manifest(name)
    )
    assert error["details"]["name"] == name
    assert error["details"]["kind"] == "ConfigMap"
    assert "group" not in error["details"]
    assert _fields(error) == ["metadata.name"]
    assert error["details"]["causes"][0]["reason"] == "FieldValueInvalid"


@pytest.mark.parametrize("name", ["a" * 253, "with.dots.ok", "x1"])
def test_dns_subdomain_names_are_accepted(target: Target, name: str) -> None:
    target.core.create_namespaced_config_map(target.namespace, target.config_map_manifest(name))


def test_a_job_name_must_fit_a_label_value(target: Target) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j" * 63))
    error = _invalid(target, target.batch.create_namespaced_job, target.job_manifest("j" * 64))
    assert error["details"]["kind"] == "Job" and error["details"]["group"] == "batch"
    assert any(field.startswith("spec.template") for field in _fields(error)), error


def test_a_namespace_name_is_a_dns_label(target: Target) -> None:
    for name in ("n" * 64, "a.b"):
        status, error = target.error(target.core.create_namespace, {"metadata": {"name": name}})
        assert status == 422 and error["reason"] == "Invalid"
        assert error["details"]["kind"] == "Namespace"


@pytest.mark.parametrize(
    "labels",
    [
        {"bad key": "v"},
        {"Bad_Prefix/x": "v"},
        {"a/b/c": "v"},
        {"k" * 64: "v"},
        {"k": "v" * 64},
        {"k": "-v"},
        {"k": "v w"},
    ],
)
def test_bad_labels_are_invalid(target: Target, labels: dict[str, str]) -> None:
    body = target.config_map_manifest("cm", labels=labels)
    error = _invalid(target, target.core.create_namespaced_config_map, body)
    assert all(field.startswith("metadata.labels") for field in _fields(error)), error


def test_good_labels_are_accepted(target: Target) -> None:
    labels = {"wharf.io/step": "s" * 63, "empty": "", "a.b-c_d": "A.b-C_9"}
    created = target.core.create_namespaced_config_map(
        target.namespace, target.config_map_manifest("cm", labels=labels)
    )
    assert created.metadata.labels == labels


def _pod_with_resources(target: Target, resources: dict[str, Any]) -> dict[str, Any]:
    return target.pod_manifest(
        "p", containers=[{"name": "main", "image": "busybox:1.36", "resources": resources}]
    )


def test_an_unparseable_quantity_is_a_bad_request(target: Target) -> None:
    body = _pod_with_resources(target, {"limits": {"cpu": "lots"}})
    status, error = target.error(target.core.create_namespaced_pod, target.namespace, body)
    assert status == 400 and error["reason"] == "BadRequest"
    assert "quantities must match the regular expression" in error["message"]


def test_a_negative_quantity_is_invalid(target: Target) -> None:
    body = _pod_with_resources(target, {"requests": {"memory": "-1Mi"}})
    error = _invalid(target, target.core.create_namespaced_pod, body)
    assert "spec.containers[0].resources.requests[memory]" in _fields(error)


def test_requests_above_limits_are_invalid(target: Target) -> None:
    body = _pod_with_resources(target, {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})
    error = _invalid(target, target.core.create_namespaced_pod, body)
    assert "spec.containers[0].resources.requests" in _fields(error)


def test_quantities_are_kept_as_written_and_requests_default_to_limits(target: Target) -> None:
    resources = {
        "requests": {"cpu": "250m", "memory": "400Mi"},
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
    }
    pod = target.raw(
        target.core.create_namespaced_pod, target.namespace, _pod_with_resources(target, resources)
    )
    # requests default to the limits of resources that name no request (here the GPU)
    expected = {
        "requests": {**resources["requests"], "nvidia.com/gpu": "1"},
        "limits": resources["limits"],
    }
    assert pod["spec"]["containers"][0]["resources"] == expected
    assert pod["status"].get("qosClass") in (None, "Burstable")


def test_a_bad_restart_policy_is_not_supported(target: Target) -> None:
    error = _invalid(
        target,
        target.core.create_namespaced_pod,
        target.pod_manifest("p", restartPolicy="Sometimes"),
    )
    assert _fields(error) == ["spec.restartPolicy"]
    assert error["details"]["causes"][0]["reason"] == "FieldValueNotSupported"


def test_a_bad_image_pull_policy_is_not_supported(target: Target) -> None:
    body = target.pod_manifest(
        "p", containers=[{"name": "main", "image": "busybox", "imagePullPolicy": "Maybe"}]
    )
    error = _invalid(target, target.core.create_namespaced_pod, body)
    assert _fields(error) == ["spec.containers[0].imagePullPolicy"]
    assert error["details"]["causes"][0]["reason"] == "FieldValueNotSupported"


def test_a_pod_needs_containers_with_valid_names(target: Target) -> None:
    error = _invalid(
        target,
        target.core.create_namespaced_pod,
        {"metadata": {"name": "p"}, "spec": {"containers": []}},
    )
    assert "spec.containers" in _fields(error)
    body = target.pod_manifest("p", containers=[{"name": "Main", "image": "busybox"}])
    error = _invalid(target, target.core.create_namespaced_pod, body)
    assert "spec.containers[0].name" in _fields(error)


@pytest.mark.parametrize("restart_policy", ["Always", None])
def test_a_job_template_must_not_restart_always(target: Target, restart_policy: str | None) -> None:
    body = target.job_manifest("j", restart_policy=restart_policy)
    error = _invalid(target, target.batch.create_namespaced_job, body)
    assert "spec.template.spec.restartPolicy" in _fields(error)


def test_a_negative_backoff_limit_is_invalid(target: Target) -> None:
    error = _invalid(
        target, target.batch.create_namespaced_job, target.job_manifest("j", backoffLimit=-1)
    )
    assert "spec.backoffLimit" in _fields(error)


def test_not_found_status_body(target: Target) -> None:
    status, error = target.error(target.core.read_namespaced_config_map, "nope", target.namespace)
    assert status == 404
    assert error == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "configmaps"},
        "code": 404,
    }
    status, error = target.error(target.batch.read_namespaced_job, "nope", target.namespace)
    assert status == 404
    assert error["message"] == 'jobs.batch "nope" not found'
    assert error["details"] == {"name": "nope", "group": "batch", "kind": "jobs"}


def test_already_exists_status_body(target: Target) -> None:
    target.core.create_namespaced_config_map(target.namespace, target.config_map_manifest("cm"))
    status, error = target.error(
        target.core.create_namespaced_config_map,
        target.namespace,
        target.config_map_manifest("cm"),
    )
    assert status == 409
    assert error["reason"] == "AlreadyExists"
    assert error["message"] == 'configmaps "cm" already exists'
    assert error["details"] == {"name": "cm", "kind": "configmaps"}
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j"))
    status, error = target.error(
        target.batch.create_namespaced_job, target.namespace, target.job_manifest("j")
    )
    assert status == 409 and error["reason"] == "AlreadyExists"
    assert error["message"] == 'jobs.batch "j" already exists'
    assert error["details"] == {"name": "j", "group": "batch", "kind": "jobs"}


@pytest.mark.parametrize("env_name", ["1BAD", "has space", "a=b", ""])
def test_bad_env_var_names_are_invalid(target: Target, env_name: str) -> None:
    body = target.pod_manifest(
        "p",
        containers=[
            {"name": "main", "image": "busybox", "env": [{"name": env_name, "value": "x"}]}
        ],
    )
    error = _invalid(target, target.core.create_namespaced_pod, body)
    assert _fields(error) == ["spec.containers[0].env[0].name"]


def test_env_var_names_may_hold_dots_and_dashes(target: Target) -> None:
    env = [{"name": "WHARF_RUN.id-1", "value": "x"}, {"name": "_x", "value": ""}]
    body = target.pod_manifest("p", containers=[{"name": "main", "image": "busybox", "env": env}])
    pod = target.raw(target.core.create_namespaced_pod, target.namespace, body)
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "WHARF_RUN.id-1", "value": "x"},
        {"name": "_x"},  # an empty value is omitted
    ]


@pytest.mark.parametrize(
    ("resources", "field", "reason"),
    [
        (
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
            "spec.containers[0].resources.requests",
            "FieldValueInvalid",
        ),
        (
            {"requests": {"nvidia.com/gpu": "1"}},
            "spec.containers[0].resources.limits",
            "FieldValueRequired",
        ),
        (
            {"limits": {"nvidia.com/gpu": "0.5"}},
            "spec.containers[0].resources.limits[nvidia.com/gpu]",
            "FieldValueInvalid",
        ),
    ],
)
def test_gpus_are_whole_and_requested_as_limited(
    target: Target, resources: dict[str, Any], field: str, reason: str
) -> None:
    error = _invalid(
        target, target.core.create_namespaced_pod, _pod_with_resources(target, resources)
    )
    causes = [c for c in error["details"]["causes"] if c.get("field") == field]
    assert causes and causes[0]["reason"] == reason, error


def test_quantities_come_back_in_canonical_form(target: Target) -> None:
    resources = {
        "requests": {"cpu": "0.5", "memory": "1024Mi"},
        "limits": {"cpu": "1000m", "memory": "1.5Gi", "ephemeral-storage": "4000M"},
    }
    pod = target.raw(
        target.core.create_namespaced_pod, target.namespace, _pod_with_resources(target, resources)
    )
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "4G"},
        "limits": {"cpu": "1", "memory": "1536Mi", "ephemeral-storage": "4G"},
    }


def test_at_most_one_owner_reference_is_the_controller(target: Target) -> None:
    def owner(name: str, controller: bool) -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": name,
            "uid": str(uuid.uuid4()),
            "controller": controller,
        }

    body = target.pod_manifest("p")
    body["metadata"]["ownerReferences"] = [owner("a", True), owner("b", True)]
    error = _invalid(target, target.core.create_namespaced_pod, body)
    assert _fields(error) == ["metadata.ownerReferences"]
    body["metadata"]["ownerReferences"] = [owner("a", True), owner("b", False)]
    pod = target.raw(target.core.create_namespaced_pod, target.namespace, body)
    assert [ref["name"] for ref in pod["metadata"]["ownerReferences"]] == ["a", "b"]


def test_a_job_template_does_not_default_requests_to_limits(target: Target) -> None:
    """Only a Pod's requests take its limits; a Job's pod template keeps them as written."""
    body = target.job_manifest("j")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1", "nvidia.com/gpu": "1"}
    }
    job = target.raw(target.batch.create_namespaced_job, target.namespace, body)
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}
