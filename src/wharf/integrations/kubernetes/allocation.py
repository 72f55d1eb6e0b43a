"""What a step's allocation means for its pod (ZenML spec §5.6).

Owns the allocated amounts and their pod resources (:func:`allocated_amounts`,
:func:`pod_resources`), the Resource Manager's target settings merged over the step's settings
(:func:`merged_pod_settings`, :func:`merged_settings`) and the whole path
(:func:`allocated_pod_settings`).

Invariants: allocated CPU, memory and GPUs go to *both* requests and limits, from each
allocation's exact ``base_quantity``; target settings are merged *deeply* over the step's
settings, then validated, and the allocated resources go on top; target settings may hold only
pod-setting keys and :data:`STEP_SETTINGS` (a pool cannot move a step to another namespace).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from wharf.core.errors import InputError
from wharf.core.resource_kinds import CPU, GPU, MEMORY
from wharf.core.validation import describe_validation_error
from wharf.integrations.kubernetes.settings import (
    RESOURCE_SECTIONS,
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
    KubernetesStepOperatorSettings,
    deep_merge,
)

if TYPE_CHECKING:  # only annotations here: the allocation arrives built
    from wharf.resource_manager.contract.models import ResourceRequestInfo

GPU_RESOURCE = "nvidia.com/gpu"
REQUEST_ID_ANNOTATION = "wharf.io/resource-request-id"
"""Annotation of a step pod with the id of the resource request its allocation belongs to."""
MILLICPU_PER_CPU = CPU.multiplier("CPU")
BYTES_PER_MIB = MEMORY.multiplier("MiB")
POD_SETTING_KEYS = frozenset(KubernetesPodSettings.model_fields)
STEP_SETTINGS = frozenset(
    {
        "image",
        "image_pull_policy",
        "privileged",
        "backoff_limit_margin",
        "ttl_seconds_after_finished",
        "active_deadline_seconds",
        "pod_failure_policy",
        "fail_on_container_waiting_reasons",
        "pod_stop_grace_period",
        "step_pod_service_account_name",
    }
)
"""Settings other than pod settings that target settings may change for one step's Job."""

SettingsT = TypeVar("SettingsT", KubernetesOrchestratorSettings, KubernetesStepOperatorSettings)


# ----------------------------------------------------------------------------- resources


def allocated_amounts(allocation: ResourceRequestInfo) -> dict[str, int]:
    """CPU (mCPU), memory (bytes) and GPUs allocated, each summed over its allocations; kinds
    with nothing allocated are left out."""
    amounts: dict[str, int] = {}
    for item in allocation.allocations:
        if item.resource_kind in (CPU.name, MEMORY.name, GPU.name):
            amounts[item.resource_kind] = amounts.get(item.resource_kind, 0) + item.base_quantity
    return amounts


def cpu_quantity(millicpu: float) -> str:
    """``"2"`` for 2000 mCPU, ``"500m"`` for 500 (fractions of a millicore rounded up)."""
    whole = math.ceil(millicpu)
    return str(whole // MILLICPU_PER_CPU) if whole % MILLICPU_PER_CPU == 0 else f"{whole}m"


def memory_quantity(byte_count: float) -> str:
    """Memory in MiB, rounded up: 1 GiB is ``"1024Mi"``, 1 GB ``"954Mi"``."""
    return f"{math.ceil(byte_count / BYTES_PER_MIB)}Mi"


def pod_resources(
    amounts: Mapping[str, float],
    base: Mapping[str, Mapping[str, str]] | None = None,
    *,
    gpu_resource: str = GPU_RESOURCE,
) -> dict[str, dict[str, str]]:
    """``base`` (``{"requests": ..., "limits": ...}``) with the allocated ``amounts`` — keyed by
    kind in base units: ``cpu`` mCPU, ``memory`` bytes, ``gpu`` count — written to both
    requests and limits, replacing only ``cpu``, ``memory`` and ``gpu_resource`` (custom kinds
    such as licences are not pod resources); every other key of ``base`` is kept, and several
    allocations of one kind add up (:func:`allocated_amounts`). Zero or missing amounts leave
    ``base`` as it is."""
    allocated: dict[str, str] = {}
    if amounts.get(CPU.name):
        allocated["cpu"] = cpu_quantity(amounts[CPU.name])
    if amounts.get(MEMORY.name):
        allocated["memory"] = memory_quantity(amounts[MEMORY.name])
    if amounts.get(GPU.name):
        allocated[gpu_resource] = str(math.ceil(amounts[GPU.name]))
    resources = {section: dict(entries) for section, entries in (base or {}).items()}
    for section in RESOURCE_SECTIONS if allocated else ():
        resources[section] = {**resources.get(section, {}), **allocated}
    return resources


# ----------------------------------------------------------------------------- target settings


def target_settings_of(allocation: ResourceRequestInfo) -> dict[str, Any]:
    """The target settings of all of ``allocation``'s allocations, merged in their order (each
    is already pool < class < policy < grant)."""
    merged: dict[str, Any] = {}
    for item in allocation.allocations:
        if item.target_settings:
            merged = deep_merge(merged, item.target_settings)
    return merged


def _split(
    target_settings: Mapping[str, Any], source: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod settings layer, step settings layer) of ``target_settings``: pod-setting keys at
    the top level or under ``pod_settings``, and :data:`STEP_SETTINGS` (``image``...); any
    other key is refused."""
    pod: dict[str, Any] = {}
    step: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in target_settings.items():
        if key in POD_SETTING_KEYS:
            pod[key] = value
        elif key in STEP_SETTINGS:
            step[key] = value
        elif key != "pod_settings":
            unknown.append(key)
    if unknown:
        raise InputError(
            f"The target settings of {source} set "
            f"{', '.join(repr(k) for k in sorted(unknown))}, which a Kubernetes step pod does "
            f"not take; they may set pod settings ({', '.join(sorted(POD_SETTING_KEYS))}), "
            f"'pod_settings' or {', '.join(sorted(STEP_SETTINGS))}."
        )
    nested = target_settings.get("pod_settings")
    if nested is not None:
        if not isinstance(nested, Mapping):
            raise InputError(f"The target settings of {source}: 'pod_settings' must be a mapping.")
        pod = deep_merge(pod, nested)
    return pod, step


def _pod_layer(pod_settings: KubernetesPodSettings | None) -> dict[str, Any]:
    return {} if pod_settings is None else pod_settings.model_dump(exclude_unset=True)


def merged_pod_settings(
    base: KubernetesPodSettings | None,
    target_settings: Mapping[str, Any],
    *,
    source: str = "the resource request",
) -> KubernetesPodSettings:
    """``target_settings``' pod settings deep-merged over ``base`` (a class's
    ``node_selectors: {accelerator: h200}`` replaces that one selector and keeps the others)
    and validated (its step settings, e.g. ``image``, are checked but not applied here: see
    :func:`merged_settings`). ``source`` names where the target settings come from in error
    messages."""
    pod, _ = _split(target_settings, source)
    if not pod:
        return base.model_copy(deep=True) if base is not None else KubernetesPodSettings()
    try:
        return KubernetesPodSettings.model_validate(deep_merge(_pod_layer(base), pod))
    except ValidationError as error:
        raise _invalid(error, source, target_settings) from None


def merged_settings(
    settings: SettingsT,
    target_settings: Mapping[str, Any],
    *,
    source: str = "the resource request",
) -> SettingsT:
    """``settings`` with ``target_settings`` applied: their pod settings deep-merged over
    ``settings.pod_settings``, their step settings (:data:`STEP_SETTINGS`) over the rest."""
    if not target_settings:
        return settings.model_copy(deep=True)
    pod, step = _split(target_settings, source)
    if isinstance(settings, KubernetesStepOperatorSettings):
        step.pop("step_pod_service_account_name", None)  # the step operator has one account
    layer: dict[str, Any] = dict(step)
    if pod:
        layer["pod_settings"] = pod
    try:
        merged = deep_merge(settings.model_dump(exclude_unset=True), layer)
        return type(settings).model_validate(merged)
    except ValidationError as error:
        raise _invalid(error, source, target_settings) from None


def _invalid(error: ValidationError, source: str, target_settings: Mapping[str, Any]) -> InputError:
    keys = ", ".join(sorted(target_settings)) or "none"
    return InputError(
        f"The target settings of {source} (keys: {keys}), merged over the step's Kubernetes "
        f"settings, are invalid: {describe_validation_error(error).rstrip('.')}. Check the "
        "target settings of the pool, capacity class, policy and grant that allocated it."
    )


def request_source(allocation: ResourceRequestInfo) -> str:
    """``resource request <id> (class 'h200' of pool <id>)`` for error messages."""
    places = sorted({f"class '{a.class_name}' of pool {a.pool_id}" for a in allocation.allocations})
    where = f" ({'; '.join(places)})" if places else ""
    return f"resource request {allocation.id}{where}"


# ----------------------------------------------------------------------------- the whole path


def allocated_pod_settings(
    base: KubernetesPodSettings | None,
    allocation: ResourceRequestInfo | None,
    *,
    gpu_resource: str = GPU_RESOURCE,
) -> KubernetesPodSettings:
    """The pod settings of a step that got ``allocation``: its target settings deep-merged over
    ``base`` (stack/component/step settings), then the allocated CPU, memory and GPUs as
    requests and limits, plus the request id as an annotation. None: ``base`` unchanged."""
    if allocation is None:
        return base.model_copy(deep=True) if base is not None else KubernetesPodSettings()
    merged = merged_pod_settings(
        base, target_settings_of(allocation), source=request_source(allocation)
    )
    return _with_allocation(merged, allocation, gpu_resource)


def allocated_settings(
    settings: SettingsT,
    allocation: ResourceRequestInfo | None,
    *,
    gpu_resource: str = GPU_RESOURCE,
) -> SettingsT:
    """:func:`allocated_pod_settings` for whole settings: the target settings' step settings
    (``image``...) are applied too, and the result's ``pod_settings`` carry the allocation."""
    if allocation is None:
        return settings.model_copy(deep=True)
    merged = merged_settings(
        settings, target_settings_of(allocation), source=request_source(allocation)
    )
    pod = _with_allocation(merged.pod_settings or KubernetesPodSettings(), allocation, gpu_resource)
    return merged.model_copy(update={"pod_settings": pod})


def _with_allocation(
    pod: KubernetesPodSettings, allocation: ResourceRequestInfo, gpu_resource: str
) -> KubernetesPodSettings:
    resources = pod_resources(
        allocated_amounts(allocation), pod.resources, gpu_resource=gpu_resource
    )
    annotations = {**pod.annotations, REQUEST_ID_ANNOTATION: str(allocation.id)}
    return pod.model_copy(update={"resources": resources, "annotations": annotations}, deep=True)
