"""Validation of pod specs (pods and the pod templates of jobs and cronjobs) and of pod updates.

Covers what a real server checks that a client can get wrong: containers (at least one; names
DNS-1123 labels, unique across init and regular containers; image required; pull and
termination-message policies), ports, env (names, exactly one ``valueFrom`` source, the downward
API fields env may use), volumes and volume mounts, resource requests and limits (quantity
syntax — a 400 like the server's decoder — names, non-negative, requests ≤ limits),
``restartPolicy``, ``dnsPolicy``, ``activeDeadlineSeconds``, tolerations, service account and
node names.
A pod update may only change container images, lower ``activeDeadlineSeconds`` and add
tolerations, as on a real server.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from tests.kube.emulator.field_errors import FieldErrors, decode_error, expect
from tests.kube.emulator.names import (
    config_map_key_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    env_var_name_errors,
    label_value_errors,
    qualified_name_errors,
)
from tests.kube.emulator.quantities import QuantityError, parse_quantity
from tests.kube.emulator.resources import ResourceType

RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PROTOCOLS = ("SCTP", "TCP", "UDP")
TERMINATION_MESSAGE_POLICIES = ("FallbackToLogsOnError", "File")
ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.podIP",
    "status.podIPs",
)
ENV_RESOURCE_FIELDS = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
MAX_INT32 = 2**31 - 1
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`, "
    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` "
    "(only additions to existing tolerations)"
)
_LABEL_SUBSCRIPT_RE = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")
_PORT_NAME_CHARS_RE = re.compile(r"[-a-z0-9]+")


def validate_pod(
    errs: FieldErrors, rtype: ResourceType, pod: dict[str, Any], old: dict[str, Any] | None
) -> None:
    spec = expect(rtype, pod.get("spec"), dict, "Pod.spec", "v1.PodSpec") or {}
    validate_pod_spec(errs, rtype, spec, "spec")
    if old is not None:
        validate_pod_update(errs, spec, old.get("spec") or {})


def validate_pod_spec(
    errs: FieldErrors, rtype: ResourceType, spec: dict[str, Any], path: str
) -> None:
    volumes = _validate_volumes(errs, rtype, spec.get("volumes"), f"{path}.volumes")
    containers = _list_of_maps(rtype, spec.get("containers"), f"{path}.containers", "Container")
    init_containers = _list_of_maps(
        rtype, spec.get("initContainers"), f"{path}.initContainers", "Container"
    )
    names: set[str] = set()
    if not containers:
        errs.required(f"{path}.containers")
    for i, container in enumerate(containers):
        _validate_container(errs, rtype, container, f"{path}.containers[{i}]", names, volumes)
    for i, container in enumerate(init_containers):
        _validate_container(errs, rtype, container, f"{path}.initContainers[{i}]", names, volumes)
    _enum(errs, spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES)
    _enum(errs, spec.get("dnsPolicy"), f"{path}.dnsPolicy", DNS_POLICIES)
    deadline = spec.get("activeDeadlineSeconds")
    expect(rtype, deadline, int, "PodSpec.activeDeadlineSeconds", "int64")
    if deadline is not None and not 1 <= deadline <= MAX_INT32:
        errs.invalid(
            f"{path}.activeDeadlineSeconds",
            deadline,
            f"must be between 1 and {MAX_INT32}, inclusive",
        )
    _validate_tolerations(errs, rtype, spec.get("tolerations"), f"{path}.tolerations")
    for field in ("serviceAccountName", "nodeName"):
        value = spec.get(field)
        if value:
            errs.invalid_each(f"{path}.{field}", value, dns1123_subdomain_errors(str(value)))


def _list_of_maps(rtype: ResourceType, value: Any, path: str, go_type: str) -> list[dict[str, Any]]:
    items = expect(rtype, value, list, path, f"[]v1.{go_type}") or []
    return [expect(rtype, item, dict, path, f"v1.{go_type}") or {} for item in items]


def _enum(errs: FieldErrors, value: Any, path: str, supported: tuple[str, ...]) -> None:
    """A required enum field (the store has defaulted it if the client left it out)."""
    if value is None:
        return
    if value == "":
        errs.required(path)
    elif value not in supported:
        errs.not_supported(path, value, supported)


def _validate_tolerations(errs: FieldErrors, rtype: ResourceType, value: Any, path: str) -> None:
    for i, toleration in enumerate(_list_of_maps(rtype, value, path, "Toleration")):
        here = f"{path}[{i}]"
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or ""
        effect = toleration.get("effect") or ""
        if key:
            errs.invalid_each(f"{here}.key", key, qualified_name_errors(key))
        elif operator != "Exists":
            errs.invalid(
                f"{here}.operator",
                operator,
                'operator must be Exists when `key` is empty, which means "match all values and '
                'all keys"',
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.invalid(
                f"{here}.effect",
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            )
        if operator in ("Equal", ""):
            problems = label_value_errors(str(toleration.get("value") or ""))
            if problems:
                errs.invalid(f"{here}.operator", toleration.get("value") or "", ";".join(problems))
        elif operator == "Exists":
            if toleration.get("value"):
                errs.invalid(
                    f"{here}.operator",
                    toleration,
                    "value must be empty when `operator` is 'Exists'",
                )
        else:
            errs.not_supported(f"{here}.operator", operator, ("Equal", "Exists"))
        if effect and effect not in TAINT_EFFECTS:
            errs.not_supported(f"{here}.effect", effect, TAINT_EFFECTS)


def _validate_volumes(errs: FieldErrors, rtype: ResourceType, value: Any, path: str) -> set[str]:
    names: set[str] = set()
    for i, volume in enumerate(_list_of_maps(rtype, value, path, "Volume")):
        name = volume.get("name") or ""
        sources = [key for key in volume if key != "name"]
        if not sources:
            errs.required(f"{path}[{i}]", "must specify a volume type")
        elif len(sources) > 1:
            errs.forbidden(f"{path}[{i}].{sources[1]}", "may not specify more than 1 volume type")
        if not name:
            errs.required(f"{path}[{i}].name")
        else:
            errs.invalid_each(f"{path}[{i}].name", name, dns1123_label_errors(name))
        if name in names:
            errs.duplicate(f"{path}[{i}].name", name)
        names.add(name)
    return names


def _validate_container(
    errs: FieldErrors,
    rtype: ResourceType,
    container: dict[str, Any],
    path: str,
    names: set[str],
    volumes: set[str],
) -> None:
    name = expect(rtype, container.get("name"), str, "Container.name", "string") or ""
    if not name:
        errs.required(f"{path}.name")
    else:
        errs.invalid_each(f"{path}.name", name, dns1123_label_errors(name))
    if name in names:
        errs.duplicate(f"{path}.name", name)
    names.add(name)
    image = expect(rtype, container.get("image"), str, "Container.image", "string") or ""
    if not image:
        errs.required(f"{path}.image")
    for field in ("command", "args"):
        for item in (
            expect(rtype, container.get(field), list, f"Container.{field}", "[]string") or []
        ):
            expect(rtype, item, str, f"Container.{field}", "string")
    _validate_ports(errs, rtype, container.get("ports"), f"{path}.ports")
    _validate_env(errs, rtype, container.get("env"), f"{path}.env")
    _validate_mounts(errs, rtype, container.get("volumeMounts"), f"{path}.volumeMounts", volumes)
    _enum(errs, container.get("imagePullPolicy"), f"{path}.imagePullPolicy", PULL_POLICIES)
    _enum(
        errs,
        container.get("terminationMessagePolicy"),
        f"{path}.terminationMessagePolicy",
        TERMINATION_MESSAGE_POLICIES,
    )
    _validate_resources(errs, rtype, container.get("resources"), f"{path}.resources")


def _port_name_errors(name: str) -> list[str]:
    errors = []
    if len(name) > 15:
        errors.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS_RE.fullmatch(name):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        errors.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", name):
        errors.append("must contain at least one letter (a-z)")
    if name.startswith("-") or name.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def _validate_ports(errs: FieldErrors, rtype: ResourceType, value: Any, path: str) -> None:
    names: set[str] = set()
    for i, port in enumerate(_list_of_maps(rtype, value, path, "ContainerPort")):
        name = port.get("name") or ""
        if name:
            problems = _port_name_errors(name)
            errs.invalid_each(f"{path}[{i}].name", name, problems)
            if not problems and name in names:
                errs.duplicate(f"{path}[{i}].name", name)
            names.add(name)
        for field in ("containerPort", "hostPort"):
            number = expect(rtype, port.get(field), int, f"ContainerPort.{field}", "int32")
            if field == "containerPort" and not number:
                errs.required(f"{path}[{i}].containerPort")
            elif number and not 1 <= number <= 65535:
                errs.invalid(
                    f"{path}[{i}].{field}", number, "must be between 1 and 65535, inclusive"
                )
        _enum(errs, port.get("protocol"), f"{path}[{i}].protocol", PROTOCOLS)


def _validate_env(errs: FieldErrors, rtype: ResourceType, value: Any, path: str) -> None:
    for i, env in enumerate(_list_of_maps(rtype, value, path, "EnvVar")):
        name = expect(rtype, env.get("name"), str, "EnvVar.name", "string") or ""
        if not name:
            errs.required(f"{path}[{i}].name")
        else:
            errs.invalid_each(f"{path}[{i}].name", name, env_var_name_errors(name))
        expect(rtype, env.get("value"), str, "EnvVar.value", "string")
        value_from = expect(
            rtype, env.get("valueFrom"), dict, "EnvVar.valueFrom", "v1.EnvVarSource"
        )
        if value_from is not None:
            _validate_value_from(errs, env, value_from, f"{path}[{i}].valueFrom")


def _validate_value_from(
    errs: FieldErrors, env: dict[str, Any], value_from: dict[str, Any], path: str
) -> None:
    sources = [
        key
        for key in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
        if value_from.get(key) is not None
    ]
    if not sources:
        errs.invalid(
            path,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or "
            "`secretKeyRef`",
        )
        return
    if env.get("value"):
        errs.invalid(path, "", "may not be specified when `value` is not empty")
    if len(sources) > 1:
        errs.invalid(path, "", "may not have more than one field specified at a time")
        return
    source = value_from[sources[0]] or {}
    here = f"{path}.{sources[0]}"
    if sources[0] == "fieldRef":
        field_path = source.get("fieldPath") or ""
        if not source.get("apiVersion"):
            errs.required(f"{here}.apiVersion")
        if not field_path:
            errs.required(f"{here}.fieldPath")
        elif (match := _LABEL_SUBSCRIPT_RE.fullmatch(field_path)) is not None:
            errs.invalid_each(
                f"{here}.fieldPath", match.group(2), qualified_name_errors(match.group(2))
            )
        elif field_path not in ENV_FIELD_PATHS:
            errs.not_supported(f"{here}.fieldPath", field_path, ENV_FIELD_PATHS)
    elif sources[0] == "resourceFieldRef":
        resource = source.get("resource") or ""
        if not resource:
            errs.required(f"{here}.resource")
        elif resource not in ENV_RESOURCE_FIELDS and not resource.startswith(
            ("limits.hugepages-", "requests.hugepages-")
        ):
            errs.not_supported(f"{here}.resource", resource, ENV_RESOURCE_FIELDS)
    else:
        if not source.get("name"):
            errs.required(f"{here}.name")
        key = source.get("key") or ""
        if not key:
            errs.required(f"{here}.key")
        else:
            errs.invalid_each(f"{here}.key", key, config_map_key_errors(key))


def _validate_mounts(
    errs: FieldErrors, rtype: ResourceType, value: Any, path: str, volumes: set[str]
) -> None:
    mount_paths: set[str] = set()
    for i, mount in enumerate(_list_of_maps(rtype, value, path, "VolumeMount")):
        name = mount.get("name") or ""
        if not name:
            errs.required(f"{path}[{i}].name")
        if name not in volumes:
            errs.not_found(f"{path}[{i}].name", name)
        mount_path = mount.get("mountPath") or ""
        if not mount_path:
            errs.required(f"{path}[{i}].mountPath")
        if mount_path in mount_paths:
            errs.invalid(f"{path}[{i}].mountPath", mount_path, "must be unique")
        mount_paths.add(mount_path)


def _quantities(rtype: ResourceType, value: Any, path: str) -> dict[str, Any]:
    mapping = expect(rtype, value, dict, path, "v1.ResourceList") or {}
    for quantity in mapping.values():
        try:
            parse_quantity(quantity)
        except QuantityError as exc:
            raise decode_error(rtype, str(exc)) from None
    return mapping


def _overcommit_allowed(name: str) -> bool:
    native = "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")
    return native and not name.startswith("hugepages-")


def _resource_name_errors(name: str) -> list[str]:
    errors = list(qualified_name_errors(name))
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errors.append("must be a standard resource for containers")
    elif name.split("/", 1)[0].endswith("kubernetes.io") or name.startswith("requests."):
        errors.append("doesn't follow extended resource name standard")
    return errors


def _validate_resources(errs: FieldErrors, rtype: ResourceType, value: Any, path: str) -> None:
    resources = expect(rtype, value, dict, "Container.resources", "v1.ResourceRequirements") or {}
    limits = _quantities(rtype, resources.get("limits"), "ResourceRequirements.limits")
    requests = _quantities(rtype, resources.get("requests"), "ResourceRequirements.requests")
    for kind, mapping in (("limits", limits), ("requests", requests)):
        for name, quantity in mapping.items():
            here = f"{path}.{kind}[{name}]"
            errs.invalid_each(here, name, _resource_name_errors(name))
            amount = parse_quantity(quantity)
            if amount < 0:
                errs.invalid(here, str(quantity), "must be greater than or equal to 0")
            if not _overcommit_allowed(name) and amount.denominator != 1:
                errs.invalid(here, str(quantity), "must be an integer")
    for name, quantity in requests.items():
        if name in limits:
            request, limit = parse_quantity(quantity), parse_quantity(limits[name])
            if request != limit and not _overcommit_allowed(name):
                errs.invalid(f"{path}.requests", str(quantity), f"must be equal to {name} limit")
            elif request > limit:
                errs.invalid(
                    f"{path}.requests", str(quantity), f"must be less than or equal to {name} limit"
                )
        elif not _overcommit_allowed(name):
            errs.required(f"{path}.limits", "Limit must be set for non overcommitable resources")


# ------------------------------------------------------------------------------ pod updates


def _toleration_key(toleration: Any) -> str:
    if not isinstance(toleration, dict):
        return json.dumps(toleration)
    return json.dumps(
        {k: v for k, v in toleration.items() if k != "tolerationSeconds"}, sort_keys=True
    )


def validate_pod_update(errs: FieldErrors, new: dict[str, Any], old: dict[str, Any]) -> None:
    """Only images, a lower activeDeadlineSeconds and added tolerations may change."""
    munged = copy.deepcopy(new)
    for key in ("containers", "initContainers"):
        new_list, old_list = munged.get(key) or [], old.get(key) or []
        for i, container in enumerate(new_list):
            if i < len(old_list) and isinstance(container, dict) and isinstance(old_list[i], dict):
                if not container.get("image"):
                    errs.required(f"spec.{key}[{i}].image")
                container["image"] = old_list[i].get("image")
    new_deadline, old_deadline = new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
    if new_deadline is not None:
        if old_deadline is not None and old_deadline < new_deadline:
            errs.invalid(
                "spec.activeDeadlineSeconds",
                new_deadline,
                "must be less than or equal to previous value",
            )
            return
    elif old_deadline is not None:
        errs.invalid(
            "spec.activeDeadlineSeconds",
            None,
            "must not update from a positive integer to nil value",
        )
        return
    if old_deadline is None:
        munged.pop("activeDeadlineSeconds", None)
    else:
        munged["activeDeadlineSeconds"] = old_deadline
    new_tolerations = {_toleration_key(t) for t in new.get("tolerations") or []}
    for toleration in old.get("tolerations") or []:
        if _toleration_key(toleration) not in new_tolerations:
            errs.forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            )
            return
    if "tolerations" in old:
        munged["tolerations"] = copy.deepcopy(old["tolerations"])
    else:
        munged.pop("tolerations", None)
    if munged != old:
        changed = sorted(k for k in set(munged) | set(old) if munged.get(k) != old.get(k))
        errs.forbidden("spec", f"{POD_UPDATE_FORBIDDEN}\n  changed: {', '.join(changed)}")
