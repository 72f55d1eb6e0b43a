"""An allocation becomes pod resources and target settings over the step's settings (§5.6); the
orchestrator pod's start imports no Resource Manager models."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from tests.import_probe import loaded_after
from tests.integrations.kubernetes.manifest_checks import server_accepts
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.allocation import (
    REQUEST_ID_ANNOTATION,
    allocated_amounts,
    allocated_pod_settings,
    allocated_settings,
    cpu_quantity,
    memory_quantity,
    merged_pod_settings,
    merged_settings,
    pod_resources,
    target_settings_of,
)
from wharf.integrations.kubernetes.manifests import step_job_for
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
    KubernetesStepOperatorSettings,
)
from wharf.resource_manager.contract.models import ResourceRequestInfo

REQUEST_ID = UUID("00000000-0000-4000-8000-0000000000aa")
POOL_ID = UUID("00000000-0000-4000-8000-0000000000bb")
GIB = 2**30
# (resource, kind, quantity, unit, base quantity)
CPU_2 = ("CPU", "cpu", 2, "CPU", 2000)
CPU_250M = ("CPU", "cpu", 250, "mCPU", 250)
MEM_1GIB = ("memory", "memory", 1, "GiB", GIB)
GPU_1 = ("GPU", "gpu", 1, "GPU", 1)
GPU_2 = ("GPU", "gpu", 2, "GPU", 2)
LICENCE = ("matlab", "matlab", 1, "matlab", 1)


def _allocation(
    index: int,
    item: tuple[str, str, int, str, int],
    target_settings: dict[str, Any] | None = None,
    class_name: str = "h200",
) -> dict[str, Any]:
    resource, kind, quantity, unit, base = item
    return {
        "id": f"00000000-0000-4000-8000-{index:012d}",
        "request_id": str(REQUEST_ID),
        "demand_index": index,
        "pool_id": str(POOL_ID),
        "class": class_name,
        "resource": resource,
        "resource_kind": kind,
        "quantity": quantity,
        "unit": unit,
        "base_quantity": base,
        "policy_id": str(POOL_ID),
        "priority": 0,
        "target_settings": target_settings or {},
    }


def _request(*allocations: dict[str, Any]) -> ResourceRequestInfo:
    return ResourceRequestInfo.model_validate(
        {
            "id": str(REQUEST_ID),
            "subjects": [{"nodes": [{"subject_type": "project", "subject_id": "team"}]}],
            "demands": [{"kind": "gpu", "quantity": 1}],
            "created_at": "2026-01-01T00:00:00Z",
            "requester": "someone",
            "status": "allocated",
            "allocations": list(allocations),
        }
    )


def _granted(*items: tuple[str, str, int, str, int]) -> ResourceRequestInfo:
    return _request(*(_allocation(i, item) for i, item in enumerate(items)))


@pytest.mark.parametrize(
    ("millicpu", "expected"),
    [
        (2000, "2"),
        (1000, "1"),
        (500, "500m"),
        (1500, "1500m"),
        (50_000, "50"),
        (51, "51m"),
        (0.5, "1m"),
    ],
)
def test_cpu_quantity_whole_cores_or_millicores(millicpu: float, expected: str) -> None:
    assert cpu_quantity(millicpu) == expected


@pytest.mark.parametrize(
    ("byte_count", "expected"),
    [(GIB, "1024Mi"), (10**9, "954Mi"), (1, "1Mi"), (512 * 2**20, "512Mi")],
)
def test_memory_quantity_in_mib_rounded_up(byte_count: int, expected: str) -> None:
    assert memory_quantity(byte_count) == expected


@pytest.mark.parametrize(
    ("items", "amounts"),
    [
        ((CPU_2, MEM_1GIB, GPU_1), {"cpu": 2000, "memory": GIB, "gpu": 1}),
        ((CPU_250M, CPU_250M, GPU_1, GPU_2), {"cpu": 500, "gpu": 3}),
        ((LICENCE,), {}),
        ((), {}),
    ],
)
def test_allocated_amounts_sum_each_kind(
    items: tuple[tuple[str, str, int, str, int], ...], amounts: dict[str, int]
) -> None:
    assert allocated_amounts(_granted(*items)) == amounts


def test_allocations_override_requests_and_limits_and_keep_other_keys() -> None:
    base = {
        "requests": {"cpu": "100m", "memory": "64Mi", "example.com/custom": "1"},
        "limits": {"nvidia.com/gpu": "4", "ephemeral-storage": "1Gi"},
    }
    resources = pod_resources({"cpu": 2000, "memory": GIB, "gpu": 1}, base)
    assert resources == {
        "requests": {
            "cpu": "2",
            "memory": "1024Mi",
            "nvidia.com/gpu": "1",
            "example.com/custom": "1",
        },
        "limits": {
            "cpu": "2",
            "memory": "1024Mi",
            "nvidia.com/gpu": "1",
            "ephemeral-storage": "1Gi",
        },
    }
    assert base["limits"]["nvidia.com/gpu"] == "4"  # not mutated


@pytest.mark.parametrize(
    ("amounts", "base", "expected"),
    [
        ({}, None, {}),
        ({}, {"limits": {"memory": "1Gi"}}, {"limits": {"memory": "1Gi"}}),
        (
            {"gpu": 3},
            None,
            {"requests": {"nvidia.com/gpu": "3"}, "limits": {"nvidia.com/gpu": "3"}},
        ),
        (
            {"cpu": 500},
            {"limits": {"memory": "1Gi"}},
            {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi", "cpu": "500m"}},
        ),
        ({"cpu": 0, "memory": 0}, {"requests": {"cpu": "1"}}, {"requests": {"cpu": "1"}}),
    ],
)
def test_pod_resources_only_touch_allocated_kinds(
    amounts: dict[str, int], base: dict[str, dict[str, str]] | None, expected: dict[str, Any]
) -> None:
    assert pod_resources(amounts, base) == expected


def test_another_gpu_resource_name() -> None:
    assert pod_resources({"gpu": 1}, gpu_resource="amd.com/gpu") == {
        "requests": {"amd.com/gpu": "1"},
        "limits": {"amd.com/gpu": "1"},
    }


def test_target_settings_of_several_allocations_merge_in_order() -> None:
    request = _request(
        _allocation(0, GPU_1, {"node_selectors": {"accelerator": "h200", "zone": "a"}}),
        _allocation(1, CPU_2, {"node_selectors": {"zone": "b"}, "labels": {"pool": "gpu"}}),
        _allocation(2, MEM_1GIB),
    )
    assert target_settings_of(request) == {
        "node_selectors": {"accelerator": "h200", "zone": "b"},
        "labels": {"pool": "gpu"},
    }


def test_class_node_selector_overrides_the_components_and_keeps_the_rest() -> None:
    base = KubernetesPodSettings(
        node_selectors={"accelerator": "old", "zone": "a"},
        annotations={"team": "ml"},
        resources={"limits": {"example.com/custom": "1"}},
    )
    merged = merged_pod_settings(base, {"node_selectors": {"accelerator": "h200"}})
    assert merged.node_selectors == {"accelerator": "h200", "zone": "a"}
    assert merged.annotations == {"team": "ml"}  # ZenML's shallow update dropped these
    assert merged.resources == {"limits": {"example.com/custom": "1"}}
    assert base.node_selectors["accelerator"] == "old"


@pytest.mark.parametrize(
    "target",
    [
        {"pod_settings": {"node_selectors": {"accelerator": "h200"}}},
        {
            "node_selectors": {"accelerator": "h100"},
            "pod_settings": {"node_selectors": {"accelerator": "h200"}},
        },
    ],
)
def test_target_settings_in_zenmls_pod_settings_shape(target: dict[str, Any]) -> None:
    merged = merged_pod_settings(None, target)
    assert merged.node_selectors == {"accelerator": "h200"}


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"node_selectors": {"accelerator": "not valid!"}}, "not a valid label value"),
        ({"tolerations": {"key": "gpu"}}, "tolerations"),
        ({"resources": {"requests": {"nvidia.com/gpu": "{{ quantity }}"}}}, "not a quantity"),
        ({"namespace": "other"}, "set 'namespace', which"),
        ({"nodeSelector": {"a": "b"}}, "set 'nodeSelector', which"),
        ({"pod_settings": ["x"]}, "must be a mapping"),
    ],
)
def test_invalid_target_settings_are_input_errors_naming_the_request(
    target: dict[str, Any], message: str
) -> None:
    request = _request(_allocation(0, GPU_1, target))
    with pytest.raises(InputError) as raised:
        allocated_pod_settings(KubernetesPodSettings(), request)
    assert message in str(raised.value)
    assert f"resource request {REQUEST_ID} (class 'h200' of pool {POOL_ID})" in str(raised.value)


def test_allocated_pod_settings_merge_targets_then_write_resources() -> None:
    base = KubernetesPodSettings(
        node_selectors={"accelerator": "old"},
        resources={"requests": {"nvidia.com/gpu": "8", "example.com/custom": "1"}},
        labels={"team": "ml"},
    )
    request = _request(
        _allocation(0, CPU_250M, {"node_selectors": {"accelerator": "h200"}}),
        _allocation(1, CPU_250M),
        _allocation(2, MEM_1GIB, {"tolerations": [{"key": "gpu", "operator": "Exists"}]}),
        _allocation(3, GPU_1, {"resources": {"requests": {"nvidia.com/gpu": "7"}}}),
        _allocation(4, GPU_2),
    )
    pod = allocated_pod_settings(base, request)
    assert pod.node_selectors == {"accelerator": "h200"}
    assert pod.tolerations == [{"key": "gpu", "operator": "Exists"}]
    assert pod.labels == {"team": "ml"}
    assert pod.resources == {
        "requests": {
            "nvidia.com/gpu": "3",
            "example.com/custom": "1",
            "cpu": "500m",
            "memory": "1024Mi",
        },
        "limits": {"cpu": "500m", "memory": "1024Mi", "nvidia.com/gpu": "3"},
    }
    assert pod.annotations == {REQUEST_ID_ANNOTATION: str(REQUEST_ID)}


def test_no_allocation_leaves_the_pod_settings_alone() -> None:
    base = KubernetesPodSettings(labels={"a": "b"})
    assert allocated_pod_settings(base, None) == base
    assert allocated_pod_settings(None, None) == KubernetesPodSettings()


def test_allocated_settings_apply_step_settings_from_the_target() -> None:
    settings = KubernetesOrchestratorSettings(
        namespace="ml",
        image="cpu:1",
        pod_settings=KubernetesPodSettings(node_selectors={"zone": "a"}),
    )
    request = _request(
        _allocation(
            0,
            GPU_1,
            {
                "image": "cuda:12",
                "pod_stop_grace_period": 120,
                "node_selectors": {"accelerator": "h200"},
            },
        )
    )
    allocated = allocated_settings(settings, request)
    assert allocated.namespace == "ml"
    assert allocated.image == "cuda:12"
    assert allocated.pod_stop_grace_period == 120
    assert allocated.pod_settings is not None
    assert allocated.pod_settings.node_selectors == {"zone": "a", "accelerator": "h200"}
    assert allocated.pod_settings.resources["limits"] == {"nvidia.com/gpu": "1"}
    assert settings.image == "cpu:1"
    assert allocated_settings(settings, None) == settings
    job = step_job_for(
        allocated,
        name="s",
        image="ignored:1",
        command=["python"],
        env={},
        secret_env={},
        labels={},
        annotations={},
        max_retries=0,
    )
    spec = job["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"zone": "a", "accelerator": "h200"}
    assert spec["containers"][0]["image"] == "cuda:12"
    assert spec["containers"][0]["resources"] == {
        "requests": {"nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        REQUEST_ID_ANNOTATION: str(REQUEST_ID)
    }
    server_accepts(job)


def test_merged_settings_for_the_step_operator_and_bad_values() -> None:
    settings = KubernetesStepOperatorSettings(service_account_name="gpu-sa")
    merged = merged_settings(settings, {"step_pod_service_account_name": "x", "privileged": True})
    assert merged.privileged is True and merged.service_account_name == "gpu-sa"
    assert merged_settings(settings, {}) == settings
    with pytest.raises(InputError, match="pod_stop_grace_period"):
        merged_settings(settings, {"pod_stop_grace_period": -1}, source="pool 'gpu'")


def test_the_orchestrator_pod_start_imports_no_resource_manager_models() -> None:
    # A run whose steps request no resources never reads an allocation's model.
    code = "import wharf.integrations.kubernetes.orchestrator_main\n"
    assert loaded_after(code, ["wharf.resource_manager"]) == []
