"""Validation of pod specs, resources and quantities, and pod updates in the kube emulator."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.quantities import QuantityError, canonical_quantity, parse_quantity
from tests.kube.emulator.resources import PODS
from tests.kube.emulator.validation import validate
from tests.kube.validation_cases import causes, fields, pod

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
        (
            {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
            {("FieldValueInvalid", "spec.tolerations[0].operator")},
        ),
        (
            {"tolerations": [{"operator": "Equal", "value": "v"}]},
            {("FieldValueInvalid", "spec.tolerations[0].operator")},
        ),
        (
            {"tolerations": [{"key": "k", "operator": "Like"}]},
            {("FieldValueNotSupported", "spec.tolerations[0].operator")},
        ),
        (
            {"tolerations": [{"key": "k", "operator": "Exists", "effect": "Evict"}]},
            {("FieldValueNotSupported", "spec.tolerations[0].effect")},
        ),
        (
            {
                "tolerations": [
                    {
                        "key": "k",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                        "tolerationSeconds": 5,
                    }
                ]
            },
            {("FieldValueInvalid", "spec.tolerations[0].effect")},
        ),
        (
            {"tolerations": [{"key": "bad key", "operator": "Exists"}]},
            {("FieldValueInvalid", "spec.tolerations[0].key")},
        ),
        (
            {"tolerations": [{"key": "k", "value": "-bad"}]},
            {("FieldValueInvalid", "spec.tolerations[0].operator")},
        ),
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
    "quantity", ["abc", "1.5.5", "", "1Q", "Gi", " 1", "1 Gi", "\u0661\u0660", True, None, [1]]
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


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("0.5", "500m"),
        (0.5, "500m"),
        ("1000m", "1"),
        ("100m", "100m"),
        ("1000", "1k"),
        (1000, "1k"),
        ("4000M", "4G"),
        ("5M", "5M"),
        ("12345", "12345"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("512Ki", "512Ki"),
        ("0.5Ki", "512"),
        ("1.1Gi", "1181116006400m"),
        ("1e3", "1e3"),
        ("1500e0", "1500"),
        ("1E-3", "1e-3"),
        ("1.0000000001", "1000000001n"),
        ("0", "0"),
        ("0Gi", "0"),
        ("-1", "-1"),
    ],
)
def test_canonical_quantities(given: Any, canonical: str) -> None:
    assert canonical_quantity(given) == canonical


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
