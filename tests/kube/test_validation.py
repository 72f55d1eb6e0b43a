"""Validation of the kube emulator: names, labels, quantities, enums, cron, updates; real wording."""

from __future__ import annotations

import base64
import copy
from fractions import Fraction
from typing import Any

import pytest

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.quantities import QuantityError, parse_quantity
from tests.kube.emulator.resources import (
    CONFIGMAPS,
    CRONJOBS,
    JOBS,
    NAMESPACES,
    PODS,
    SECRETS,
    SERVICEACCOUNTS,
    ResourceType,
)
from tests.kube.emulator.validation import validate


def pod(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }
    return body


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"controller-uid": "u"}},
            "template": {
                "metadata": {"labels": {"controller-uid": "u", "job-name": "j"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                },
            },
            **spec,
        },
    }


def cronjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [{"name": "main", "image": "busybox:1.36"}],
                        }
                    }
                }
            },
            **spec,
        },
    }


def with_meta(obj: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].update(metadata)
    return obj


def causes(
    rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    """(reason, field, message) of every cause; asserts a 422 Invalid and never mutates obj."""
    before = copy.deepcopy(obj)
    with pytest.raises(ApiError) as info:
        validate(rtype, obj, old=old)
    assert obj == before
    error = info.value
    assert (error.code, error.reason) == (422, "Invalid"), error
    assert error.details is not None
    assert error.details["kind"] == rtype.kind
    return [(c["reason"], c["field"], c["message"]) for c in error.details["causes"]]


def fields(
    rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> set[tuple[str, str]]:
    return {(reason, field) for reason, field, _ in causes(rtype, obj, old)}


# --- valid objects pass -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "obj"),
    [
        (PODS, pod()),
        (
            PODS,
            pod(
                restartPolicy="Never",
                activeDeadlineSeconds=30,
                serviceAccountName="runner",
                volumes=[{"name": "data", "emptyDir": {}}],
                initContainers=[{"name": "init", "image": "x"}],
                containers=[
                    {
                        "name": "main",
                        "image": "python:3.12",
                        "imagePullPolicy": "IfNotPresent",
                        "env": [
                            {"name": "A_B.c-d", "value": "1"},
                            {
                                "name": "POD",
                                "valueFrom": {
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}
                                },
                            },
                            {
                                "name": "L",
                                "valueFrom": {
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.labels['app']",
                                    }
                                },
                            },
                            {
                                "name": "S",
                                "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}},
                            },
                            {
                                "name": "C",
                                "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}},
                            },
                        ],
                        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        "resources": {
                            "requests": {"cpu": "250m", "memory": "400Mi", "nvidia.com/gpu": "1"},
                            "limits": {"cpu": 1, "memory": "1Gi", "nvidia.com/gpu": "1"},
                        },
                    }
                ],
            ),
        ),
        (PODS, with_meta(pod(), name="step-x7b2k", generateName="step-")),
        (PODS, with_meta(pod(), name="a" * 253)),
        (
            PODS,
            with_meta(pod(), labels={"wharf.dev/run-id": "r-1", "empty": "", "A_b.C": "x" * 63}),
        ),
        (PODS, with_meta(pod(), annotations={"example.com/Note": "anything at all: ∞"})),
        (
            PODS,
            with_meta(pod(), finalizers=["kubernetes", "example.com/keep", "foregroundDeletion"]),
        ),
        (
            PODS,
            with_meta(
                pod(),
                ownerReferences=[
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "j",
                        "uid": "u",
                        "controller": True,
                    }
                ],
            ),
        ),
        (JOBS, job()),
        (
            JOBS,
            job(
                backoffLimit=0,
                activeDeadlineSeconds=600,
                ttlSecondsAfterFinished=0,
                podFailurePolicy={
                    "rules": [
                        {
                            "action": "FailJob",
                            "onExitCodes": {
                                "containerName": "main",
                                "operator": "In",
                                "values": [1, 42],
                            },
                        },
                        {
                            "action": "Ignore",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        },
                        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}},
                    ]
                },
            ),
        ),
        (CRONJOBS, cronjob()),
        (
            CRONJOBS,
            with_meta(
                cronjob(concurrencyPolicy="Forbid", startingDeadlineSeconds=0), name="c" * 52
            ),
        ),
        (CRONJOBS, cronjob(schedule="@hourly", timeZone="Europe/Paris")),
        (NAMESPACES, {"metadata": {"name": "wharf-e2e-1"}}),
        (SERVICEACCOUNTS, {"metadata": {"name": "system.runner", "namespace": "ns"}}),
        (
            SECRETS,
            {
                "metadata": {"name": "s", "namespace": "ns"},
                "type": "Opaque",
                "data": {"a.b_c-D": base64.b64encode(b"x").decode()},
            },
        ),
        (
            CONFIGMAPS,
            {
                "metadata": {"name": "c", "namespace": "ns"},
                "data": {"config.yaml": "a: 1"},
                "binaryData": {"bin": "AAE="},
            },
        ),
    ],
)
def test_valid_objects_pass(rtype: ResourceType, obj: dict[str, Any]) -> None:
    validate(rtype, obj)


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "obj", "expected"),
    [
        (PODS, with_meta(pod(), name="Bad_Name"), {("FieldValueInvalid", "metadata.name")}),
        (PODS, with_meta(pod(), name="a" * 254), {("FieldValueInvalid", "metadata.name")}),
        (PODS, with_meta(pod(), name="-a"), {("FieldValueInvalid", "metadata.name")}),
        (PODS, with_meta(pod(), name=""), {("FieldValueRequired", "metadata.name")}),
        (
            PODS,
            with_meta(pod(), name="x", generateName="Bad-"),
            {("FieldValueInvalid", "metadata.generateName")},
        ),
        (PODS, with_meta(pod(), namespace=""), {("FieldValueRequired", "metadata.namespace")}),
        (NAMESPACES, {"metadata": {"name": "has.dot"}}, {("FieldValueInvalid", "metadata.name")}),
        (NAMESPACES, {"metadata": {"name": "n" * 64}}, {("FieldValueInvalid", "metadata.name")}),
        (
            SERVICEACCOUNTS,
            {"metadata": {"name": "UPPER", "namespace": "ns"}},
            {("FieldValueInvalid", "metadata.name")},
        ),
        (CRONJOBS, with_meta(cronjob(), name="c" * 53), {("FieldValueInvalid", "metadata.name")}),
        # A job name becomes a pod label value, so more than 63 characters fails there.
        (
            JOBS,
            {
                **with_meta(job(), name="j" * 64),
                "spec": {
                    **job()["spec"],
                    "template": {
                        **job()["spec"]["template"],
                        "metadata": {"labels": {"controller-uid": "u", "job-name": "j" * 64}},
                    },
                },
            },
            {("FieldValueInvalid", "spec.template.labels")},
        ),
    ],
)
def test_invalid_names(
    rtype: ResourceType, obj: dict[str, Any], expected: set[tuple[str, str]]
) -> None:
    assert fields(rtype, obj) == expected


def test_name_message_is_worded_like_a_real_server() -> None:
    with pytest.raises(ApiError) as info:
        validate(PODS, with_meta(pod(), name="Bad"))
    assert info.value.message == (
        'Pod "Bad" is invalid: metadata.name: Invalid value: "Bad": a lowercase RFC 1123 subdomain '
        "must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )
    assert info.value.details == {
        "name": "Bad",
        "kind": "Pod",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": info.value.message.split("metadata.name: ", 1)[1],
                "field": "metadata.name",
            }
        ],
    }


def test_cronjob_name_too_long_message() -> None:
    [(_, _, message)] = causes(CRONJOBS, with_meta(cronjob(), name="c" * 53))
    assert message == f'Invalid value: "{"c" * 53}": must be no more than 52 characters'


# --- labels, annotations, finalizers, owner references ------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"labels": {"bad key": "v"}}, {("FieldValueInvalid", "metadata.labels")}),
        ({"labels": {"k": "v" * 64}}, {("FieldValueInvalid", "metadata.labels")}),
        ({"labels": {"k": "-v"}}, {("FieldValueInvalid", "metadata.labels")}),
        ({"labels": {"k": "a b"}}, {("FieldValueInvalid", "metadata.labels")}),
        ({"labels": {"Example.COM/k": "v"}}, {("FieldValueInvalid", "metadata.labels")}),
        ({"labels": {"a/b/c": "v"}}, {("FieldValueInvalid", "metadata.labels")}),
        ({"labels": {("x" * 254) + "/k": "v"}}, {("FieldValueInvalid", "metadata.labels")}),
        ({"annotations": {"bad key": "v"}}, {("FieldValueInvalid", "metadata.annotations")}),
        (
            {"annotations": {"k": "x" * (256 * 1024)}},
            {("FieldValueTooLong", "metadata.annotations")},
        ),
        ({"finalizers": ["custom"]}, {("FieldValueInvalid", "metadata.finalizers[0]")}),
        ({"finalizers": ["bad name/x"]}, {("FieldValueInvalid", "metadata.finalizers")}),
        (
            {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j"}]},
            {("FieldValueInvalid", "metadata.ownerReferences.uid")},
        ),
        (
            {
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": True},
                    {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": True},
                ]
            },
            {("FieldValueInvalid", "metadata.ownerReferences")},
        ),
    ],
)
def test_invalid_metadata(metadata: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    assert fields(PODS, with_meta(pod(), **metadata)) == expected


def test_label_value_message() -> None:
    [(_, _, message)] = causes(PODS, with_meta(pod(), labels={"k": "v" * 64}))
    assert message == f'Invalid value: "{"v" * 64}": must be no more than 63 characters'


def test_annotation_size_counts_keys_and_values() -> None:
    validate(PODS, with_meta(pod(), annotations={"k": "x" * (256 * 1024 - 1)}))


def test_wrong_json_types_are_decode_errors() -> None:
    for obj in (
        with_meta(pod(), labels={"k": 1}),
        pod(containers="main"),
        pod(containers=[{"name": "main", "image": 3}]),
        pod(activeDeadlineSeconds="10"),
    ):
        with pytest.raises(ApiError) as info:
            validate(PODS, obj)
        assert (info.value.code, info.value.reason) == (400, "BadRequest")
        assert info.value.message.startswith('Pod in version "v1" cannot be handled as a Pod: ')


# --- pods ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": []}, {("FieldValueRequired", "spec.containers")}),
        ({"containers": [{"name": "main"}]}, {("FieldValueRequired", "spec.containers[0].image")}),
        ({"containers": [{"image": "x"}]}, {("FieldValueRequired", "spec.containers[0].name")}),
        (
            {"containers": [{"name": "Main", "image": "x"}]},
            {("FieldValueInvalid", "spec.containers[0].name")},
        ),
        (
            {"containers": [{"name": "a.b", "image": "x"}]},
            {("FieldValueInvalid", "spec.containers[0].name")},
        ),
        (
            {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]},
            {("FieldValueDuplicate", "spec.containers[1].name")},
        ),
        (
            {
                "containers": [{"name": "a", "image": "x"}],
                "initContainers": [{"name": "a", "image": "y"}],
            },
            {("FieldValueDuplicate", "spec.initContainers[0].name")},
        ),
        ({"restartPolicy": "Sometimes"}, {("FieldValueNotSupported", "spec.restartPolicy")}),
        ({"restartPolicy": ""}, {("FieldValueRequired", "spec.restartPolicy")}),
        ({"dnsPolicy": "Custom"}, {("FieldValueNotSupported", "spec.dnsPolicy")}),
        ({"activeDeadlineSeconds": 0}, {("FieldValueInvalid", "spec.activeDeadlineSeconds")}),
        ({"serviceAccountName": "Bad_SA"}, {("FieldValueInvalid", "spec.serviceAccountName")}),
        (
            {"containers": [{"name": "m", "image": "x", "imagePullPolicy": "Sometimes"}]},
            {("FieldValueNotSupported", "spec.containers[0].imagePullPolicy")},
        ),
        (
            {"containers": [{"name": "m", "image": "x", "env": [{"name": "1BAD", "value": "v"}]}]},
            {("FieldValueInvalid", "spec.containers[0].env[0].name")},
        ),
        (
            {"containers": [{"name": "m", "image": "x", "env": [{"value": "v"}]}]},
            {("FieldValueRequired", "spec.containers[0].env[0].name")},
        ),
        (
            {
                "containers": [
                    {
                        "name": "m",
                        "image": "x",
                        "env": [
                            {
                                "name": "A",
                                "value": "v",
                                "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                            }
                        ],
                    }
                ]
            },
            {("FieldValueInvalid", "spec.containers[0].env[0].valueFrom")},
        ),
        (
            {"containers": [{"name": "m", "image": "x", "env": [{"name": "A", "valueFrom": {}}]}]},
            {("FieldValueInvalid", "spec.containers[0].env[0].valueFrom")},
        ),
        (
            {
                "containers": [
                    {
                        "name": "m",
                        "image": "x",
                        "env": [
                            {
                                "name": "A",
                                "valueFrom": {
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.containers"}
                                },
                            }
                        ],
                    }
                ]
            },
            {("FieldValueNotSupported", "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath")},
        ),
        (
            {
                "containers": [
                    {
                        "name": "m",
                        "image": "x",
                        "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}],
                    }
                ]
            },
            {("FieldValueRequired", "spec.containers[0].env[0].valueFrom.secretKeyRef.key")},
        ),
        (
            {"containers": [{"name": "m", "image": "x", "ports": [{"containerPort": 70000}]}]},
            {("FieldValueInvalid", "spec.containers[0].ports[0].containerPort")},
        ),
        (
            {
                "containers": [
                    {
                        "name": "m",
                        "image": "x",
                        "ports": [{"containerPort": 80, "protocol": "HTTP"}],
                    }
                ]
            },
            {("FieldValueNotSupported", "spec.containers[0].ports[0].protocol")},
        ),
        (
            {
                "containers": [
                    {
                        "name": "m",
                        "image": "x",
                        "volumeMounts": [{"name": "nope", "mountPath": "/x"}],
                    }
                ]
            },
            {("FieldValueNotFound", "spec.containers[0].volumeMounts[0].name")},
        ),
        (
            {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]},
            {("FieldValueDuplicate", "spec.volumes[1].name")},
        ),
        ({"volumes": [{"name": "v"}]}, {("FieldValueRequired", "spec.volumes[0]")}),
    ],
)
def test_invalid_pod_specs(spec: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    assert fields(PODS, pod(**spec)) == expected


def test_unsupported_enum_message() -> None:
    [(_, _, message)] = causes(PODS, pod(restartPolicy="Sometimes"))
    assert (
        message
        == 'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'
    )


def _resources(resources: dict[str, Any]) -> dict[str, Any]:
    return pod(containers=[{"name": "m", "image": "x", "resources": resources}])


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
            {("FieldValueInvalid", "spec.containers[0].resources.requests")},
        ),
        (
            {"requests": {"memory": "2Gi"}, "limits": {"memory": "2000Mi"}},
            {("FieldValueInvalid", "spec.containers[0].resources.requests")},
        ),
        (
            {"limits": {"cpu": "-1"}},
            {("FieldValueInvalid", "spec.containers[0].resources.limits[cpu]")},
        ),
        (
            {"limits": {"gpu": "1"}},
            {("FieldValueInvalid", "spec.containers[0].resources.limits[gpu]")},
        ),
        (
            {"requests": {"example.com/dev": "1"}},
            {("FieldValueRequired", "spec.containers[0].resources.limits")},
        ),
        (
            {"requests": {"example.com/dev": "1"}, "limits": {"example.com/dev": "2"}},
            {("FieldValueInvalid", "spec.containers[0].resources.requests")},
        ),
        (
            {"limits": {"example.com/dev": "500m"}, "requests": {"example.com/dev": "500m"}},
            {
                ("FieldValueInvalid", "spec.containers[0].resources.limits[example.com/dev]"),
                ("FieldValueInvalid", "spec.containers[0].resources.requests[example.com/dev]"),
            },
        ),
    ],
)
def test_invalid_resources(resources: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    assert fields(PODS, _resources(resources)) == expected


def test_requests_over_limits_message() -> None:
    [(_, _, message)] = causes(
        PODS, _resources({"requests": {"cpu": "1500m"}, "limits": {"cpu": "1"}})
    )
    assert message == 'Invalid value: "1500m": must be less than or equal to cpu limit'


@pytest.mark.parametrize(
    "quantity", ["abc", "1.5.5", "", "1Q", "Gi", " 1", "1 Gi", True, None, [1]]
)
def test_unparseable_quantities_are_a_400(quantity: Any) -> None:
    with pytest.raises(ApiError) as info:
        validate(PODS, _resources({"limits": {"cpu": quantity}}))
    assert (info.value.code, info.value.reason) == (400, "BadRequest")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("2Gi", 2 * 2**30),
        ("500Mi", 500 * 2**20),
        ("1e3", 1000),
        ("1E-3", Fraction(1, 1000)),
        ("1k", 1000),
        ("+5M", 5_000_000),
        ("-1", -1),
        (".5", Fraction(1, 2)),
        ("1.", 1),
        ("10n", Fraction(1, 10**8)),
        ("3u", Fraction(3, 10**6)),
        ("1Ei", 2**60),
        (2, 2),
        (0.25, Fraction(1, 4)),
    ],
)
def test_quantity_values(text: Any, value: Any) -> None:
    assert parse_quantity(text) == value


def test_quantity_error_wording() -> None:
    with pytest.raises(QuantityError, match=r"quantities must match the regular expression"):
        parse_quantity("abc")
    with pytest.raises(QuantityError, match="unable to parse quantity's suffix"):
        parse_quantity("1Q")


# --- pod updates --------------------------------------------------------------------------------


def _stored_pod() -> dict[str, Any]:
    stored = pod(tolerations=[{"key": "k", "operator": "Exists"}])
    stored["metadata"].update(uid="u1", creationTimestamp="2026-01-01T00:00:00Z")
    return stored


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["spec"]["containers"][0].update(image="busybox:1.37"),
        lambda p: p["spec"].update(activeDeadlineSeconds=100),
        lambda p: p["spec"]["tolerations"].append({"key": "k2", "operator": "Exists"}),
        lambda p: p["metadata"].setdefault("labels", {}).update(new="label"),
        lambda p: p.update(status={"phase": "Running"}),
    ],
)
def test_allowed_pod_updates(change: Any) -> None:
    old = _stored_pod()
    new = copy.deepcopy(old)
    change(new)
    validate(PODS, new, old=old)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda p: p["spec"].update(restartPolicy="Never"), {("FieldValueForbidden", "spec")}),
        (
            lambda p: p["spec"]["containers"][0].update(args=["x"]),
            {("FieldValueForbidden", "spec")},
        ),
        (
            lambda p: p["spec"]["containers"].append({"name": "b", "image": "b"}),
            {("FieldValueForbidden", "spec")},
        ),
        (lambda p: p["spec"].update(tolerations=[]), {("FieldValueForbidden", "spec.tolerations")}),
        (lambda p: p["metadata"].update(uid="other"), {("FieldValueInvalid", "metadata.uid")}),
        (lambda p: p["metadata"].update(name="other"), {("FieldValueInvalid", "metadata.name")}),
        (
            lambda p: p["spec"]["containers"][0].update(image=""),
            {("FieldValueRequired", "spec.containers[0].image")},
        ),
    ],
)
def test_forbidden_pod_updates(change: Any, expected: set[tuple[str, str]]) -> None:
    old = _stored_pod()
    new = copy.deepcopy(old)
    change(new)
    assert fields(PODS, new, old) == expected


def test_pod_update_forbidden_message() -> None:
    old = _stored_pod()
    new = copy.deepcopy(old)
    new["spec"]["restartPolicy"] = "Never"
    [(_, _, message)] = causes(PODS, new, old)
    assert message.startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
        "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` "
        "(only additions to existing tolerations)"
    )


def test_active_deadline_may_only_decrease() -> None:
    old = _stored_pod()
    old["spec"]["activeDeadlineSeconds"] = 100
    lower, higher, removed = (copy.deepcopy(old) for _ in range(3))
    lower["spec"]["activeDeadlineSeconds"] = 50
    higher["spec"]["activeDeadlineSeconds"] = 200
    del removed["spec"]["activeDeadlineSeconds"]
    validate(PODS, lower, old=old)
    assert fields(PODS, higher, old) == {("FieldValueInvalid", "spec.activeDeadlineSeconds")}
    assert fields(PODS, removed, old) == {("FieldValueInvalid", "spec.activeDeadlineSeconds")}


def test_no_new_finalizers_once_deleting() -> None:
    old = _stored_pod()
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["example.com/late"]
    assert fields(PODS, new, old) == {("FieldValueForbidden", "metadata.finalizers")}
    old["metadata"]["finalizers"] = ["example.com/late"]
    removed = copy.deepcopy(old)
    removed["metadata"]["finalizers"] = []
    validate(PODS, removed, old=old)


# --- secrets and configmaps ----------------------------------------------------------------------


def _secret(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque", **fields}


def _config_map(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns"}, **fields}


@pytest.mark.parametrize(
    ("rtype", "obj", "expected"),
    [
        (SECRETS, _secret(data={"bad key": "eA=="}), {("FieldValueInvalid", "data[bad key]")}),
        (SECRETS, _secret(data={"..": "eA=="}), {("FieldValueInvalid", "data[..]")}),
        (
            SECRETS,
            _secret(type="kubernetes.io/tls", data={"tls.crt": "eA=="}),
            {("FieldValueRequired", "data[tls.key]")},
        ),
        (
            SECRETS,
            _secret(data={"big": base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()}),
            {("FieldValueTooLong", "data")},
        ),
        (CONFIGMAPS, _config_map(data={"a/b": "x"}), {("FieldValueInvalid", "data[a/b]")}),
        (
            CONFIGMAPS,
            _config_map(data={"k": "x"}, binaryData={"k": "eA=="}),
            {("FieldValueInvalid", "data[k]")},
        ),
        (CONFIGMAPS, _config_map(data={"k": "x" * (1024 * 1024 + 1)}), {("FieldValueTooLong", "")}),
    ],
)
def test_invalid_secrets_and_config_maps(
    rtype: ResourceType, obj: dict[str, Any], expected: set[tuple[str, str]]
) -> None:
    assert fields(rtype, obj) == expected


@pytest.mark.parametrize("value", ["not base64!", "eA", "eA=", 5])
def test_secret_data_that_is_not_base64_is_a_400(value: Any) -> None:
    with pytest.raises(ApiError) as info:
        validate(SECRETS, _secret(data={"k": value}))
    assert (info.value.code, info.value.reason) == (400, "BadRequest")
    assert info.value.message.startswith('Secret in version "v1" cannot be handled as a Secret: ')


def test_secret_type_and_immutable_data_on_update() -> None:
    old = _secret(data={"k": "eA=="}, immutable=True)
    changed = _secret(data={"k": "eQ=="}, immutable=True)
    assert fields(SECRETS, changed, old) == {("FieldValueForbidden", "data")}
    unlocked = _secret(data={"k": "eA=="}, immutable=False)
    assert fields(SECRETS, unlocked, old) == {("FieldValueForbidden", "immutable")}
    retyped = _secret(type="example.com/custom", data={"k": "eA=="})
    assert fields(SECRETS, retyped, _secret(data={"k": "eA=="})) == {("FieldValueInvalid", "type")}
    validate(SECRETS, _secret(data={"k": "eQ=="}), old=_secret(data={"k": "eA=="}))
