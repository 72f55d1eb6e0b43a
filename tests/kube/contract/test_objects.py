"""Object semantics: identity, resourceVersion, namespace from the URL, generateName, defaulting."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.kube.contract.conftest import Target


def test_create_fills_uid_resource_version_timestamp_and_namespace(target: Target) -> None:
    before = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    created = target.raw(
        target.core.create_namespaced_config_map,
        target.namespace,
        target.config_map_manifest("cm", {"k": "v"}),
    )
    meta = created["metadata"]
    assert meta["namespace"] == target.namespace  # the body named none: filled from the URL
    uuid.UUID(meta["uid"])
    assert int(meta["resourceVersion"]) > 0
    stamp = datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= stamp <= datetime.now(UTC) + timedelta(seconds=5)
    assert created["kind"] == "ConfigMap" and created["apiVersion"] == "v1"

    read = target.core.read_namespaced_config_map("cm", target.namespace)
    assert read.metadata.uid == meta["uid"]
    assert read.metadata.resource_version == meta["resourceVersion"]
    assert read.data == {"k": "v"}


def test_resource_version_is_one_global_increasing_counter_across_kinds(target: Target) -> None:
    ns = target.namespace
    versions = [
        int(target.raw(target.core.create_namespaced_config_map, ns,
                       target.config_map_manifest("a"))["metadata"]["resourceVersion"]),
        int(target.raw(target.core.create_namespaced_secret, ns,
                       {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
            ["metadata"]["resourceVersion"]),
        int(target.raw(target.core.create_namespaced_pod, ns,
                       target.pod_manifest("p"))["metadata"]["resourceVersion"]),
        int(target.raw(target.batch.create_namespaced_job, ns,
                       target.job_manifest("j"))["metadata"]["resourceVersion"]),
        int(target.raw(target.core.patch_namespaced_config_map, "a", ns,
                       {"data": {"x": "y"}}, _content_type="application/merge-patch+json")
            ["metadata"]["resourceVersion"]),
    ]  # fmt: skip
    assert versions == sorted(versions) and len(set(versions)) == len(versions), versions


def test_a_body_naming_another_namespace_is_a_bad_request(target: Target) -> None:
    body = target.config_map_manifest("cm")
    body["metadata"]["namespace"] = "somewhere-else"
    status, error = target.error(target.core.create_namespaced_config_map, target.namespace, body)
    assert status == 400
    assert error["reason"] == "BadRequest"
    assert "does not match the namespace" in error["message"]


def test_a_body_naming_the_same_namespace_is_accepted(target: Target) -> None:
    body = target.config_map_manifest("cm")
    body["metadata"]["namespace"] = target.namespace
    created = target.raw(target.core.create_namespaced_config_map, target.namespace, body)
    assert created["metadata"]["namespace"] == target.namespace


def test_create_in_a_missing_namespace_is_not_found(target: Target) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    status, error = target.error(
        target.core.create_namespaced_config_map, missing, target.config_map_manifest("cm")
    )
    assert status == 404
    assert error["reason"] == "NotFound"
    assert error["details"] == {"name": missing, "kind": "namespaces"}
    assert error["message"] == f'namespaces "{missing}" not found'


def test_generate_name_appends_five_random_characters(target: Target) -> None:
    names = set()
    for _ in range(3):
        created = target.raw(
            target.core.create_namespaced_pod,
            target.namespace,
            {"metadata": {"generateName": "step-"}, "spec": target.pod_manifest("x")["spec"]},
        )
        name = created["metadata"]["name"]
        assert re.fullmatch(r"step-[a-z0-9]{5}", name), name
        assert created["metadata"]["generateName"] == "step-"
        names.add(name)
    assert len(names) == 3


def test_pod_defaults(target: Target) -> None:
    pod = target.raw(target.core.create_namespaced_pod, target.namespace, target.pod_manifest("p"))
    assert pod["status"]["phase"] == "Pending"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert "nodeName" not in spec
    container = spec["containers"][0]
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    # the model decodes the same object
    model = target.core.read_namespaced_pod("p", target.namespace)
    assert model.status.phase == "Pending" and model.spec.restart_policy == "Always"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("registry.example.com:5000/team/busybox", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("registry.example.com:5000/team/busybox:1.36", "IfNotPresent"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),
    ],
)
def test_image_pull_policy_default_follows_the_tag(target: Target, image: str, policy: str) -> None:
    pod = target.raw(
        target.core.create_namespaced_pod, target.namespace, target.pod_manifest("p", image=image)
    )
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_explicit_image_pull_policy_and_restart_policy_are_kept(target: Target) -> None:
    body = target.pod_manifest(
        "p",
        containers=[
            {"name": "main", "image": "busybox", "imagePullPolicy": "Never", "command": ["true"]}
        ],
        restartPolicy="Never",
        terminationGracePeriodSeconds=5,
    )
    pod = target.raw(target.core.create_namespaced_pod, target.namespace, body)
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 5


def test_job_defaults_selector_and_labels(target: Target) -> None:
    job = target.raw(
        target.batch.create_namespaced_job,
        target.namespace,
        target.job_manifest("train", template_labels={"wharf.io/step": "train"}),
    )
    uid = job["metadata"]["uid"]
    spec = job["spec"]
    assert spec["backoffLimit"] == 6
    assert spec["completions"] == 1
    assert spec["parallelism"] == 1
    assert spec["selector"]["matchLabels"]["controller-uid"] == uid
    template_labels = spec["template"]["metadata"]["labels"]
    assert template_labels["controller-uid"] == uid
    assert template_labels["job-name"] == "train"
    assert template_labels["wharf.io/step"] == "train"
    # a Job without labels of its own takes its template's labels (as the user gave them)
    assert job["metadata"]["labels"]["wharf.io/step"] == "train"
    pod_spec = spec["template"]["spec"]
    assert pod_spec["terminationGracePeriodSeconds"] == 30
    assert pod_spec["dnsPolicy"] == "ClusterFirst"
    assert pod_spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_job_labels_of_its_own_are_kept(target: Target) -> None:
    job = target.raw(
        target.batch.create_namespaced_job,
        target.namespace,
        target.job_manifest(
            "train", labels={"wharf.io/run-id": "r1"}, template_labels={"wharf.io/step": "s"}
        ),
    )
    assert job["metadata"]["labels"] == {"wharf.io/run-id": "r1"}
    job_model = target.batch.read_namespaced_job("train", target.namespace)
    assert job_model.spec.backoff_limit == 6


def test_job_pod_failure_policy_is_kept_where_the_server_knows_it(target: Target) -> None:
    rules = [
        {
            "action": "Count",
            "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]},
        },
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]
    job = target.raw(
        target.batch.create_namespaced_job,
        target.namespace,
        target.job_manifest("j", podFailurePolicy={"rules": rules}),
    )
    _, minor = target.server_version()
    if target.is_emulator or minor >= 26:
        assert job["spec"]["podFailurePolicy"]["rules"][0]["action"] == "Count"
    else:  # before 1.25 the field is unknown and silently dropped
        assert "podFailurePolicy" not in job["spec"]
