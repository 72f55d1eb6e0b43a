"""Validation of the kube emulator: valid objects, names, metadata, secrets and configmaps."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.kube.emulator.errors import ApiError
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
from tests.kube.validation_cases import causes, cronjob, fields, job, pod, with_meta

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
