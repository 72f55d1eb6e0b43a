"""Pod and Job specs as the orchestrator builds them: env sources, volumes, scheduling, immutability."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.contract.conftest import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Target


def _pod_with(
    target: Target, container: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    main = {"name": "main", "image": "busybox:1.36", "command": ["true"], **(container or {})}
    return target.pod_manifest("p", containers=[main], **spec)


def _invalid_fields(target: Target, body: dict[str, Any]) -> list[str]:
    status, error = target.error(target.core.create_namespaced_pod, target.namespace, body)
    assert status == 422 and error["reason"] == "Invalid", error
    return [cause.get("field", "") for cause in error["details"]["causes"]]


def test_env_sources_round_trip_with_defaults(target: Target) -> None:
    env = [
        {"name": "LITERAL", "value": "x"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "run-token", "key": "token"}}},
        {"name": "CONF", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "k"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
    ]
    pod = target.raw(
        target.core.create_namespaced_pod, target.namespace, _pod_with(target, {"env": env})
    )
    got = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert got["TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "run-token", "key": "token"}
    assert got["POD"]["valueFrom"]["fieldRef"] == {"apiVersion": "v1", "fieldPath": "metadata.name"}
    assert got["CPU"]["valueFrom"]["resourceFieldRef"] == {"resource": "limits.cpu", "divisor": "0"}


def test_an_unsupported_field_ref_is_invalid(target: Target) -> None:
    env = [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nothing"}}}]
    fields = _invalid_fields(target, _pod_with(target, {"env": env}))
    assert fields == ["spec.containers[0].env[0].valueFrom.fieldRef.fieldPath"]


def test_volumes_round_trip_with_defaults(target: Target) -> None:
    volumes = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "token", "secret": {"secretName": "run-token"}},
        {"name": "conf", "configMap": {"name": "conf"}},
    ]
    mounts = [
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "token", "mountPath": "/var/run/wharf", "readOnly": True},
    ]
    pod = target.raw(
        target.core.create_namespaced_pod,
        target.namespace,
        _pod_with(target, {"volumeMounts": mounts}, volumes=volumes),
    )
    got = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert got["token"]["secret"] == {"secretName": "run-token", "defaultMode": 420}
    assert got["conf"]["configMap"] == {"name": "conf", "defaultMode": 420}
    assert got["scratch"]["emptyDir"] == {}
    assert pod["spec"]["containers"][0]["volumeMounts"] == mounts


def test_a_mount_of_an_undeclared_volume_is_invalid(target: Target) -> None:
    body = _pod_with(target, {"volumeMounts": [{"name": "nowhere", "mountPath": "/x"}]})
    assert _invalid_fields(target, body) == ["spec.containers[0].volumeMounts[0].name"]


def test_scheduling_settings_round_trip(target: Target) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "accelerator", "operator": "In", "values": ["h200"]}
                        ]
                    }
                ]
            }
        }
    }
    tolerations = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "team",
            "operator": "Equal",
            "value": "ml",
            "effect": "NoExecute",
            "tolerationSeconds": 60,
        },
    ]
    body = _pod_with(
        target,
        nodeSelector={"accelerator": "h200"},
        affinity=affinity,
        tolerations=tolerations,
        imagePullSecrets=[{"name": "registry"}],
        serviceAccountName="wharf-steps",
    )
    pod = target.raw(target.core.create_namespaced_pod, target.namespace, body)
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"accelerator": "h200"}
    assert spec["affinity"] == affinity
    assert spec["tolerations"][:2] == tolerations
    assert spec["imagePullSecrets"] == [{"name": "registry"}]


def test_a_toleration_with_exists_and_a_value_is_invalid(target: Target) -> None:
    tolerations = [{"key": "k", "operator": "Exists", "value": "v"}]
    assert _invalid_fields(target, _pod_with(target, tolerations=tolerations)) == [
        "spec.tolerations[0].operator"
    ]


def test_annotations_hold_long_values_up_to_256_kib_in_total(target: Target) -> None:
    body = _pod_with(target)
    body["metadata"]["annotations"] = {"wharf.io/pipeline": "p" * 1000}
    created = target.raw(target.core.create_namespaced_pod, target.namespace, body)
    assert created["metadata"]["annotations"]["wharf.io/pipeline"] == "p" * 1000
    body["metadata"]["name"] = "q"
    body["metadata"]["annotations"] = {"a": "x" * 200_000, "b": "y" * 100_000}
    assert _invalid_fields(target, body) == ["metadata.annotations"]


def test_a_bad_annotation_key_is_invalid(target: Target) -> None:
    body = _pod_with(target)
    body["metadata"]["annotations"] = {"bad key": "v"}
    assert _invalid_fields(target, body) == ["metadata.annotations"]


def test_a_job_template_is_immutable(target: Target) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j"))
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}}
    }
    status, error = target.error(
        target.batch.patch_namespaced_job, "j", target.namespace, patch,
        _content_type=STRATEGIC_MERGE_PATCH,
    )  # fmt: skip
    assert status == 422 and error["reason"] == "Invalid"
    assert [c["field"] for c in error["details"]["causes"]] == ["spec.template"]


def test_a_job_deadline_and_backoff_limit_are_mutable(target: Target) -> None:
    target.batch.create_namespaced_job(target.namespace, target.job_manifest("j"))
    patched = target.raw(
        target.batch.patch_namespaced_job, "j", target.namespace,
        {"spec": {"activeDeadlineSeconds": 600, "backoffLimit": 2}},
        _content_type=MERGE_PATCH,
    )  # fmt: skip
    assert patched["spec"]["activeDeadlineSeconds"] == 600
    assert patched["spec"]["backoffLimit"] == 2


@pytest.mark.parametrize("name", ["Bad_SA", "a" * 254])
def test_a_bad_service_account_name_is_invalid(target: Target, name: str) -> None:
    assert _invalid_fields(target, _pod_with(target, serviceAccountName=name)) == [
        "spec.serviceAccountName"
    ]
