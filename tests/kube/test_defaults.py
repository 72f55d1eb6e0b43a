"""Unit tests of the emulator's defaulting: the values a real 1.2x kube-apiserver fills in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kube.emulator.defaults import apply_defaults, image_pull_policy_for, qos_class
from tests.kube.emulator.resources import (
    CONFIGMAPS,
    CRONJOBS,
    JOBS,
    NAMESPACES,
    PODS,
    SECRETS,
)


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "main", "image": "python:3.11", **fields}


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("python", "Always"),
        ("python:latest", "Always"),
        ("python:3.11", "IfNotPresent"),
        ("registry.local:5000/team/python", "Always"),
        ("registry.local:5000/team/python:3.11", "IfNotPresent"),
        ("python@sha256:abcd", "IfNotPresent"),
    ],
)
def test_image_pull_policy(image: str, policy: str) -> None:
    assert image_pull_policy_for(image) == policy


def test_pod_defaults() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                container(
                    env=[{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    ports=[{"containerPort": 80}],
                )
            ],
            "volumes": [{"name": "s", "secret": {"secretName": "x"}}],
        },
    }
    apply_defaults(PODS, pod, creating=True)
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "default"
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    main = spec["containers"][0]
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert main["terminationMessagePath"] == "/dev/termination-log"
    assert main["terminationMessagePolicy"] == "File"
    assert main["ports"][0]["protocol"] == "TCP"
    assert main["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert spec["volumes"][0]["secret"]["defaultMode"] == 420
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_pod_defaults_keep_given_values_and_are_idempotent() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "serviceAccountName": "runner",
            "containers": [container(imagePullPolicy="Never")],
        },
    }
    apply_defaults(PODS, pod, creating=True)
    once = {**pod, "spec": dict(pod["spec"])}
    apply_defaults(PODS, pod, creating=False)
    assert pod == once
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 5
    assert pod["spec"]["serviceAccount"] == "runner"
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    assert len(pod["spec"]["tolerations"]) == 2


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ([{}], "BestEffort"),
        ([{"requests": {"cpu": "1"}}], "Burstable"),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed"),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}], "Burstable"),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable"),
    ],
)
def test_qos_class(resources: list[dict[str, Any]], qos: str) -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [container(name=f"c{i}", resources=r) for i, r in enumerate(resources)]
        },
    }
    apply_defaults(PODS, pod, creating=True)
    assert qos_class(pod["spec"]) == pod["status"]["qosClass"] == qos


def test_limits_default_the_requests_of_pods_not_of_templates() -> None:
    resources = {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {"containers": [container(resources=copy.deepcopy(resources))]},
    }
    apply_defaults(PODS, pod, creating=True)
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1",
        "nvidia.com/gpu": "1",
    }
    job: dict[str, Any] = {
        "metadata": {"name": "j", "uid": "u"},
        "spec": {
            "template": {"spec": {"containers": [container(resources=copy.deepcopy(resources))]}}
        },
    }
    apply_defaults(JOBS, job, creating=True)
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == resources


def test_job_defaults_selector_and_template_labels() -> None:
    job: dict[str, Any] = {
        "metadata": {"name": "j", "uid": "u-1"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container()]}}},
    }
    apply_defaults(JOBS, job, creating=True)
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["completions"], spec["parallelism"]) == (6, 1, 1)
    assert spec["completionMode"] == "NonIndexed" and spec["suspend"] is False
    assert spec["selector"] == {"matchLabels": {"controller-uid": "u-1"}}
    assert spec["template"]["metadata"]["labels"] == {
        "controller-uid": "u-1",
        "job-name": "j",
        "batch.kubernetes.io/controller-uid": "u-1",
        "batch.kubernetes.io/job-name": "j",
    }
    template_spec = spec["template"]["spec"]
    assert template_spec["restartPolicy"] == "Never"
    assert template_spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert "serviceAccountName" not in template_spec
    assert job["status"] == {}


def test_job_takes_its_template_labels_unless_it_has_its_own() -> None:
    def job(**labels: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "j", "uid": "u", "labels": dict(labels)},
            "spec": {"template": {"metadata": {"labels": {"step": "s"}}, "spec": {}}},
        }

    bare = job()
    apply_defaults(JOBS, bare, creating=True)
    assert bare["metadata"]["labels"] == {"step": "s"}
    own = job(run="r1")
    apply_defaults(JOBS, own, creating=True)
    assert own["metadata"]["labels"] == {"run": "r1"}


def test_job_parallelism_without_completions_leaves_completions_unset() -> None:
    job: dict[str, Any] = {
        "metadata": {"name": "j", "uid": "u"},
        "spec": {"parallelism": 3, "template": {"spec": {"containers": [container()]}}},
    }
    apply_defaults(JOBS, job, creating=True)
    assert "completions" not in job["spec"] and job["spec"]["parallelism"] == 3


def test_manual_selector_is_left_alone() -> None:
    job: dict[str, Any] = {
        "metadata": {"name": "j", "uid": "u"},
        "spec": {
            "manualSelector": True,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}},
        },
    }
    apply_defaults(JOBS, job, creating=True)
    assert job["spec"]["selector"] == {"matchLabels": {"a": "b"}}
    assert job["spec"]["template"]["metadata"]["labels"] == {"a": "b"}


def test_cronjob_defaults() -> None:
    cronjob: dict[str, Any] = {
        "metadata": {"name": "c"},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [container()]}}}},
        },
    }
    apply_defaults(CRONJOBS, cronjob, creating=True)
    spec = cronjob["spec"]
    assert spec["concurrencyPolicy"] == "Allow" and spec["suspend"] is False
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    job_spec = spec["jobTemplate"]["spec"]
    assert "backoffLimit" not in job_spec  # JobSpec defaults apply to Jobs, not templates
    assert job_spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"


def test_namespace_defaults() -> None:
    namespace: dict[str, Any] = {"metadata": {"name": "team-a"}}
    apply_defaults(NAMESPACES, namespace, creating=True)
    assert namespace["spec"] == {"finalizers": ["kubernetes"]}
    assert namespace["status"] == {"phase": "Active"}
    assert namespace["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}


def test_secret_string_data_becomes_data() -> None:
    secret: dict[str, Any] = {
        "metadata": {"name": "s"},
        "data": {"a": "YQ=="},
        "stringData": {"b": "bee"},
    }
    apply_defaults(SECRETS, secret, creating=True)
    assert secret == {
        "metadata": {"name": "s"},
        "type": "Opaque",
        "data": {"a": "YQ==", "b": "YmVl"},
    }


def test_other_kinds_are_untouched() -> None:
    config_map: dict[str, Any] = {"metadata": {"name": "c"}, "data": {"k": "v"}}
    apply_defaults(CONFIGMAPS, config_map, creating=True)
    assert config_map == {"metadata": {"name": "c"}, "data": {"k": "v"}}


def test_the_server_encoding_is_applied() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                container(
                    resources={
                        "requests": {"cpu": "0.5", "memory": "1024Mi"},
                        "limits": {"cpu": "1000m", "memory": "1.5Gi", "ephemeral-storage": "4000M"},
                    },
                    env=[
                        {"name": "EMPTY", "value": ""},
                        {
                            "name": "CPU",
                            "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}},
                        },
                    ],
                )
            ],
            "volumes": [
                {"name": "scratch", "emptyDir": {"sizeLimit": "1024Mi"}},
                {
                    "name": "info",
                    "downwardAPI": {
                        "items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]
                    },
                },
            ],
        },
    }
    apply_defaults(PODS, pod, creating=True)
    main = pod["spec"]["containers"][0]
    assert main["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "4G"},
        "limits": {"cpu": "1", "memory": "1536Mi", "ephemeral-storage": "4G"},
    }
    assert main["env"] == [
        {"name": "EMPTY"},
        {
            "name": "CPU",
            "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}},
        },
    ]
    volumes = pod["spec"]["volumes"]
    assert volumes[0]["emptyDir"] == {"sizeLimit": "1Gi"}
    assert volumes[1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert volumes[1]["downwardAPI"]["defaultMode"] == 420


def test_empty_maps_and_lists_the_server_omits() -> None:
    secret: dict[str, Any] = {
        "metadata": {"name": "s", "labels": {}, "annotations": {}, "finalizers": []},
        "data": {},
    }
    apply_defaults(SECRETS, secret, creating=True)
    assert secret == {"metadata": {"name": "s"}, "type": "Opaque"}
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "generateName": ""},
        "spec": {"containers": [container(command=[], args=[], env=[], ports=[])]},
    }
    apply_defaults(PODS, pod, creating=True)
    assert pod["metadata"] == {"name": "p"}
    assert not {"command", "args", "env", "ports"} & set(pod["spec"]["containers"][0])


def test_an_undecodable_quantity_is_left_for_validation() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {"containers": [container(resources={"limits": {"cpu": "lots"}})]},
    }
    apply_defaults(PODS, pod, creating=True)
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "lots"}


def test_a_pod_condition_pattern_of_a_failure_policy_defaults_to_status_true() -> None:
    rules = [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}},
    ]
    job_spec = {"podFailurePolicy": {"rules": rules}, "template": {"spec": {}}}
    job = {"metadata": {"name": "j"}, "spec": copy.deepcopy(job_spec)}
    cronjob = {"metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": job_spec}}}

    apply_defaults(JOBS, job, creating=False)
    apply_defaults(CRONJOBS, cronjob, creating=False)

    for spec in (job["spec"], cronjob["spec"]["jobTemplate"]["spec"]):
        first, second = spec["podFailurePolicy"]["rules"]
        assert first["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
        assert "status" not in second["onExitCodes"]
