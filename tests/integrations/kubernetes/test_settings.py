"""Kubernetes settings: component values parsed, step overrides merged, bad input refused."""

from __future__ import annotations

from typing import Any

import pytest

from wharf.core.errors import InputError
from wharf.integrations.kubernetes.settings import (
    DEFAULT_WAITING_REASONS,
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
    KubernetesStepOperatorSettings,
    deep_merge,
    with_default_requests,
)


def test_defaults_follow_the_spec() -> None:
    settings = KubernetesOrchestratorSettings()
    assert settings.namespace == "default"
    assert settings.synchronous is True
    assert settings.backoff_limit_margin == 0
    assert settings.orchestrator_job_backoff_limit == 3
    assert settings.pod_stop_grace_period == 30
    assert settings.prevent_orchestrator_pod_caching is False
    assert settings.fail_on_container_waiting_reasons == list(DEFAULT_WAITING_REASONS)
    assert settings.pod_settings is None and settings.pod_failure_policy is None


@pytest.mark.parametrize(
    ("configuration", "expected"),
    [
        ({"namespace": "ml"}, {"namespace": "ml"}),
        ({"namespace": 2024}, {"namespace": "2024"}),
        ({"synchronous": "false"}, {"synchronous": False}),
        ({"synchronous": False}, {"synchronous": False}),
        ({"max_parallelism": "4"}, {"max_parallelism": 4}),
        ({"max_parallelism": 4}, {"max_parallelism": 4}),
        ({"job_monitoring_interval": "0.5"}, {"job_monitoring_interval": 0.5}),
        ({"image_pull_policy": "Always"}, {"image_pull_policy": "Always"}),
        ({"job_name_prefix": 7}, {"job_name_prefix": "7"}),
        (
            {"pod_settings": '{"node_selectors": {"pool": "gpu"}}'},
            {"pod_settings": KubernetesPodSettings(node_selectors={"pool": "gpu"})},
        ),
        (
            {"pod_settings": {"labels": {"team": "ml"}}},
            {"pod_settings": KubernetesPodSettings(labels={"team": "ml"})},
        ),
        (
            {"fail_on_container_waiting_reasons": '["ErrImagePull"]'},
            {"fail_on_container_waiting_reasons": ["ErrImagePull"]},
        ),
        (
            {"fail_on_container_waiting_reasons": "ErrImagePull, ImagePullBackOff"},
            {"fail_on_container_waiting_reasons": ["ErrImagePull", "ImagePullBackOff"]},
        ),
        ({"fail_on_container_waiting_reasons": "[]"}, {"fail_on_container_waiting_reasons": []}),
        (
            {"pod_failure_policy": '{"rules": []}'},
            {"pod_failure_policy": {"rules": []}},
        ),
        ({"concurrency_policy": "Forbid"}, {"concurrency_policy": "Forbid"}),
    ],
)
def test_from_component_parses_values(
    configuration: dict[str, Any], expected: dict[str, Any]
) -> None:
    settings = KubernetesOrchestratorSettings.from_component(configuration)
    for key, value in expected.items():
        assert getattr(settings, key) == value


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        ({"namespce": "ml"}, "did you mean 'namespace'"),
        ({"namespace": "ML_team"}, "not a valid namespace"),
        ({"max_parallelism": 0}, "max_parallelism"),
        ({"backoff_limit_margin": -1}, "backoff_limit_margin"),
        ({"synchronous": "perhaps"}, "true or false"),
        ({"pod_settings": "{not json"}, "must be JSON"),
        ({"pod_settings": '{"nodeSelector": {"a": "b"}}'}, "nodeSelector"),
        ({"image_pull_policy": "Sometimes"}, "image_pull_policy"),
        ({"job_name_prefix": "Team_A"}, "not a valid job name prefix"),
        ({"job_name_prefix": "a" * 33}, "not a valid job name prefix"),
        ({"pod_failure_policy": '{"action": "Count"}'}, "rules"),
        ({"concurrency_policy": "Sometimes"}, "concurrency_policy"),
        ({"service_account_name": "Bad Name"}, "service account"),
        ({"prevent_orchestrator_pod_caching": "true"}, "decides caching right before"),
    ],
)
def test_from_component_refuses_bad_values_in_plain_words(
    configuration: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match="Kubernetes orchestrator settings") as raised:
        KubernetesOrchestratorSettings.from_component(configuration)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("field", "largest"),
    [
        ("backoff_limit_margin", 2**31 - 1),
        ("ttl_seconds_after_finished", 2**31 - 1),
        ("orchestrator_job_backoff_limit", 2**31 - 1),
        ("successful_jobs_history_limit", 2**31 - 1),
        ("failed_jobs_history_limit", 2**31 - 1),
        ("active_deadline_seconds", 2**63 - 1),
        ("pod_stop_grace_period", 2**63 - 1),
        ("starting_deadline_seconds", 2**63 - 1),
    ],
)
def test_numbers_the_api_cannot_hold_are_refused_naming_the_largest(
    field: str, largest: int
) -> None:
    """The API's int32 and int64 fields: a larger number used to be registered and then
    refused by the API server when the run's Job (or CronJob) was created."""
    assert getattr(KubernetesOrchestratorSettings(**{field: largest}), field) == largest
    with pytest.raises(InputError) as raised:
        KubernetesOrchestratorSettings.from_component({field: str(largest + 1)})
    assert f"'{field}' must be at most {largest}" in str(raised.value)


def test_the_step_operator_has_no_orchestrator_only_settings() -> None:
    assert KubernetesStepOperatorSettings.from_component({"namespace": "gpu"}).namespace == "gpu"
    with pytest.raises(InputError, match="Kubernetes step operator settings"):
        KubernetesStepOperatorSettings.from_component({"max_parallelism": 2})


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ({"resources": {"requests": {"cpu": "lots"}}}, "not a quantity"),
        ({"resources": {"wants": {"cpu": "1"}}}, "unknown section"),
        ({"labels": {"team": "machine learning"}}, "not a valid label value"),
        ({"labels": {"bad key!": "x"}}, "not a valid label key"),
        ({"node_selectors": {"zone": "-a"}}, "not a valid label value"),
        ({"annotations": {"a b": "x"}}, "not a valid annotation key"),
        ({"env": [{"value": "1"}]}, "needs a 'name'"),
        ({"volume_mounts": [{"name": "data"}]}, "mountPath"),
        ({"image_pull_secrets": ["Not Valid"]}, "not a valid secret name"),
        ({"host_network": True}, "host_network"),
        (
            {"affinity": {"nodeAffinity": 3}},
            "'pod_settings.affinity': nodeAffinity: Input should be a valid dictionary",
        ),
        ({"affinity": {"nodeAffinty": {}}}, "'nodeAffinty' is not a known field"),
        ({"env": [{"name": "A", "value": 5}]}, 'entry 0 ({"name": "A", "value": 5}): value'),
        ({"env_from": [{"secretref": {"name": "s"}}]}, "'secretref' is not a known field"),
        ({"volumes": [{"name": "d", "emptydir": {}}]}, "'emptydir' is not a known field"),
        ({"volume_mounts": [{"name": "d", "mountPath": "/d", "readonly": True}]}, "'readonly'"),
    ],
)
def test_pod_settings_refuse_what_a_server_would(pod: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as raised:
        KubernetesOrchestratorSettings.from_component({"pod_settings": pod})
    assert message in str(raised.value)


def test_pod_settings_in_the_apis_shape_are_kept_as_given() -> None:
    pod = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
                    ]
                }
            }
        },
        "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "t"}}}],
        "env_from": [{"secretRef": {"name": "s3-credentials"}}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        "volume_mounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
    }
    settings = KubernetesOrchestratorSettings.from_component({"pod_settings": pod})
    assert settings.pod_settings is not None
    assert settings.pod_settings.model_dump(exclude_unset=True) == pod


def test_a_pod_failure_policy_the_client_would_refuse_is_refused_naming_the_field() -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": "1"}}]}
    with pytest.raises(InputError) as raised:
        KubernetesOrchestratorSettings.from_component({"pod_failure_policy": policy})
    assert "'pod_failure_policy': rules.0.onExitCodes.values" in str(raised.value)


def test_pod_settings_take_numbers_as_quantities_and_the_api_shape_of_pull_secrets() -> None:
    pod = KubernetesPodSettings.model_validate(
        {
            "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 0.5}},
            "image_pull_secrets": [{"name": "regcred"}],
        }
    )
    assert pod.resources == {"limits": {"nvidia.com/gpu": "1", "cpu": "0.5"}}
    assert pod.image_pull_secrets == ["regcred"]


def test_merged_layers_only_what_the_override_set() -> None:
    component = KubernetesOrchestratorSettings(
        namespace="ml",
        max_parallelism=4,
        pod_settings=KubernetesPodSettings(
            node_selectors={"pool": "cpu", "zone": "a"},
            resources={"requests": {"cpu": "1", "memory": "1Gi"}},
            tolerations=[{"key": "a", "operator": "Exists"}],
            annotations={"team": "ml"},
        ),
    )
    step = KubernetesOrchestratorSettings(
        backoff_limit_margin=2,
        pod_settings=KubernetesPodSettings(
            node_selectors={"pool": "gpu"},
            resources={"limits": {"nvidia.com/gpu": "1"}, "requests": {"memory": "8Gi"}},
            tolerations=[{"key": "gpu", "operator": "Exists"}],
        ),
    )
    merged = component.merged(step)
    assert merged.namespace == "ml" and merged.max_parallelism == 4
    assert merged.backoff_limit_margin == 2
    assert merged.pod_settings == KubernetesPodSettings(
        node_selectors={"pool": "gpu", "zone": "a"},
        resources={"requests": {"cpu": "1", "memory": "8Gi"}, "limits": {"nvidia.com/gpu": "1"}},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        annotations={"team": "ml"},
    )
    assert component.pod_settings is not None
    assert component.pod_settings.node_selectors == {"pool": "cpu", "zone": "a"}  # not mutated


@pytest.mark.parametrize(
    "override",
    [
        {"pod_settings": {"labels": {"step": "x"}}, "synchronous": False},
        {"pod_settings": KubernetesPodSettings(labels={"step": "x"}), "synchronous": False},
    ],
)
def test_merged_takes_mappings_too(override: dict[str, Any]) -> None:
    base = KubernetesOrchestratorSettings(pod_settings=KubernetesPodSettings(labels={"a": "b"}))
    merged = base.merged(override)
    assert merged.synchronous is False
    assert merged.pod_settings == KubernetesPodSettings(labels={"a": "b", "step": "x"})


def test_merged_with_nothing_is_an_equal_copy_and_bad_overrides_are_input_errors() -> None:
    base = KubernetesOrchestratorSettings(namespace="ml")
    assert base.merged(None) == base
    with pytest.raises(InputError, match="max_parallelism"):
        base.merged({"max_parallelism": -1})
    with pytest.raises(InputError, match="did you mean 'namespace'"):
        base.merged({"namespac": "x"})
    with pytest.raises(InputError, match="prevent_orchestrator_pod_caching"):
        base.merged({"prevent_orchestrator_pod_caching": True})


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, {"requests": {"memory": "400Mi", "cpu": "100m"}}),
        ({"requests": {"cpu": "2"}}, {"requests": {"memory": "400Mi", "cpu": "2"}}),
        (
            {"limits": {"memory": "200Mi"}},
            {"limits": {"memory": "200Mi"}, "requests": {"cpu": "100m"}},
        ),
        (
            {"requests": {"cpu": "1", "memory": "1Gi"}},
            {"requests": {"cpu": "1", "memory": "1Gi"}},
        ),
    ],
)
def test_default_requests_only_where_the_user_set_none(
    resources: dict[str, dict[str, str]], expected: dict[str, dict[str, str]]
) -> None:
    pod = KubernetesPodSettings(resources=resources, labels={"keep": "me"})
    result = with_default_requests(pod)
    assert result.resources == expected
    assert result.labels == {"keep": "me"}
    assert with_default_requests(None).resources == {"requests": {"memory": "400Mi", "cpu": "100m"}}


def test_deep_merge_merges_mappings_and_replaces_the_rest() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    layer = {"a": {"c": [2], "e": {"f": 1}}, "d": {"x": 1}}
    assert deep_merge(base, layer) == {"a": {"b": 1, "c": [2], "e": {"f": 1}}, "d": {"x": 1}}
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1}


def test_pod_failure_policy_conditions_get_the_apis_default_status() -> None:
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    settings = KubernetesOrchestratorSettings(pod_failure_policy=policy)
    assert settings.pod_failure_policy == {
        "rules": [
            {
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }
        ]
    }
    assert policy["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget"}]
