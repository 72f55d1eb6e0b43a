"""Defaulting of written objects, as a real kube-apiserver (1.2x) applies it on create and update.

Only the fields Wharf reads or a client commonly relies on are defaulted. ``apply_defaults`` is
idempotent (it only fills what is missing), so the store runs it on every write; ``creating``
adds what only a create does (job selector and template labels from the new uid, initial status).
Secrets' ``stringData`` is folded into base64 ``data`` here, as the real server does on write, and
what the server's encoding changes is applied too: quantities in canonical form, empty env values
omitted, empty metadata maps and lists, config data and container lists omitted.
"""

from __future__ import annotations

import base64
from typing import Any

from tests.kube.emulator.quantities import QuantityError, canonical_quantity
from tests.kube.emulator.resources import (
    CONFIGMAPS,
    CRONJOBS,
    JOBS,
    NAMESPACES,
    PODS,
    SECRETS,
    ResourceType,
)

_DEFAULT_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute", 300),
    ("node.kubernetes.io/unreachable", "NoExecute", 300),
)
_EMPTY_OMITTED_METADATA = ("labels", "annotations", "finalizers", "ownerReferences", "generateName")
_EMPTY_OMITTED_CONTAINER = ("command", "args", "env", "envFrom", "ports", "volumeMounts")
_KEYED_VOLUME_SOURCES = ("secret", "configMap", "downwardAPI", "projected")


def apply_defaults(rtype: ResourceType, obj: dict[str, Any], *, creating: bool) -> None:
    """Fill in, in place, the defaults a real server gives ``obj`` of type ``rtype``."""
    obj.setdefault("metadata", {})
    if rtype == PODS:
        _default_pod(obj, creating=creating)
    elif rtype == JOBS:
        _default_job(obj, creating=creating)
    elif rtype == CRONJOBS:
        _default_cronjob(obj, creating=creating)
    elif rtype == NAMESPACES:
        _default_namespace(obj, creating=creating)
    elif rtype == SECRETS:
        _default_secret(obj)
    _omit_empty(obj["metadata"], _EMPTY_OMITTED_METADATA)
    if rtype in (SECRETS, CONFIGMAPS):
        _omit_empty(obj, ("data", "binaryData"))


def _omit_empty(fields: Any, names: tuple[str, ...]) -> None:
    """Drop empty maps, lists and strings the server's encoding omits (``omitempty``)."""
    if not isinstance(fields, dict):
        return
    for name in names:
        if name in fields and fields[name] in ({}, [], "", None):
            del fields[name]


def image_pull_policy_for(image: str) -> str:
    """``Always`` for an untagged or ``:latest`` image (without a digest), else ``IfNotPresent``."""
    if "@" in image:
        return "IfNotPresent"
    last_segment = image.rsplit("/", 1)[-1]
    if ":" not in last_segment:
        return "Always"
    return "Always" if last_segment.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def default_pod_spec(spec: dict[str, Any]) -> None:
    """Defaults of a pod spec, shared by pods and the pod templates of jobs and cronjobs."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                _default_container(container)
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        for source in _KEYED_VOLUME_SOURCES:
            if isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", 420)
        downward = [volume.get("downwardAPI")] + [
            source.get("downwardAPI")
            for source in (volume.get("projected") or {}).get("sources") or []
            if isinstance(source, dict)
        ]
        for items in (d.get("items") for d in downward if isinstance(d, dict)):
            for item in items or []:
                if isinstance(item, dict):
                    _default_object_references(item)
        empty_dir = volume.get("emptyDir")
        if isinstance(empty_dir, dict) and "sizeLimit" in empty_dir:
            empty_dir["sizeLimit"] = _canonical(empty_dir["sizeLimit"])


def _default_container(container: dict[str, Any]) -> None:
    _omit_empty(container, _EMPTY_OMITTED_CONTAINER)
    image = container.get("image")
    if isinstance(image, str) and image:
        container.setdefault("imagePullPolicy", image_pull_policy_for(image))
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    if isinstance(resources, dict):
        for kind in ("requests", "limits"):
            if isinstance(resources.get(kind), dict):
                resources[kind] = {name: _canonical(q) for name, q in resources[kind].items()}
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        if not isinstance(env, dict):
            continue
        if env.get("value") == "":
            del env["value"]  # an empty string is omitted when the server writes the object
        if isinstance(env.get("valueFrom"), dict):
            _default_object_references(env["valueFrom"])


def _default_object_references(source: dict[str, Any]) -> None:
    """``fieldRef.apiVersion`` v1 and ``resourceFieldRef.divisor`` 0 (canonical), wherever the
    downward API is used (env values and downwardAPI volume items)."""
    field_ref = source.get("fieldRef")
    if isinstance(field_ref, dict):
        field_ref.setdefault("apiVersion", "v1")
    resource_ref = source.get("resourceFieldRef")
    if isinstance(resource_ref, dict):
        resource_ref["divisor"] = _canonical(resource_ref.get("divisor", "0"))


def _canonical(quantity: Any) -> Any:
    """The form a server writes a quantity back in; an undecodable one is left for validation."""
    try:
        return canonical_quantity(quantity)
    except QuantityError:
        return quantity


def _default_requests_to_limits(container: dict[str, Any]) -> None:
    """A pod's (not a template's) container requests default to its limits, per resource."""
    resources = container.get("resources")
    if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
        requests = resources.setdefault("requests", {})
        if isinstance(requests, dict):
            for name, quantity in resources["limits"].items():
                requests.setdefault(name, quantity)


def qos_class(spec: dict[str, Any]) -> str:
    """The pod's QoS class from its containers' requests and limits."""
    containers = [
        c
        for key in ("containers", "initContainers")
        for c in spec.get(key) or []
        if isinstance(c, dict)
    ]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        if not all(limits.get(name) for name in ("cpu", "memory")):
            return "Burstable"
        if any(str(requests.get(name, limits[name])) != str(limits[name]) for name in limits):
            return "Burstable"
    return "Guaranteed"


def _default_pod(pod: dict[str, Any], *, creating: bool) -> None:
    spec = pod.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    default_pod_spec(spec)
    for container in spec.get("containers") or []:
        if isinstance(container, dict):
            _default_requests_to_limits(container)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    if creating:
        tolerations = spec.setdefault("tolerations", [])
        present = {t.get("key") for t in tolerations if isinstance(t, dict)}
        for key, effect, seconds in _DEFAULT_TOLERATIONS:
            if key not in present:
                tolerations.append(
                    {
                        "key": key,
                        "operator": "Exists",
                        "effect": effect,
                        "tolerationSeconds": seconds,
                    }
                )
    status = pod.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", qos_class(spec))


def _default_job(job: dict[str, Any], *, creating: bool) -> None:
    spec = job.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    _default_pod_failure_policy(spec)
    template = spec.setdefault("template", {})
    if not isinstance(template, dict):
        return
    metadata = job["metadata"]
    template_labels = (template.get("metadata") or {}).get("labels")
    if not metadata.get("labels") and template_labels:
        # A Job without labels of its own takes its template's (as the user gave them).
        metadata["labels"] = dict(template_labels)
    if creating and not spec.get("manualSelector") and metadata.get("uid"):
        uid, name = metadata["uid"], metadata.get("name", "")
        spec.setdefault("selector", {"matchLabels": {"controller-uid": uid}})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(
            {
                "controller-uid": uid,
                "job-name": name,
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
            }
        )
    if isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])
    if creating:
        job.setdefault("status", {})


def _default_pod_failure_policy(job_spec: dict[str, Any]) -> None:
    """A pod-condition pattern's ``status`` defaults to "True"."""
    policy = job_spec.get("podFailurePolicy")
    rules = policy.get("rules") if isinstance(policy, dict) else None
    for rule in rules if isinstance(rules, list) else []:
        patterns = rule.get("onPodConditions") if isinstance(rule, dict) else None
        for pattern in patterns if isinstance(patterns, list) else []:
            if isinstance(pattern, dict):
                pattern.setdefault("status", "True")


def _default_cronjob(cronjob: dict[str, Any], *, creating: bool) -> None:
    spec = cronjob.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_spec = (spec.get("jobTemplate") or {}).get("spec")
    if isinstance(job_spec, dict):
        _default_pod_failure_policy(job_spec)
    template_spec = (job_spec or {}).get("template", {}).get("spec")
    if isinstance(template_spec, dict):
        default_pod_spec(template_spec)
    if creating:
        cronjob.setdefault("status", {})


def _default_namespace(namespace: dict[str, Any], *, creating: bool) -> None:
    metadata = namespace["metadata"]
    if metadata.get("name"):
        labels = metadata.setdefault("labels", {})
        labels.setdefault("kubernetes.io/metadata.name", metadata["name"])
    if creating:
        spec = namespace.setdefault("spec", {})
        spec.setdefault("finalizers", ["kubernetes"])
        namespace.setdefault("status", {}).setdefault("phase", "Active")


def _default_secret(secret: dict[str, Any]) -> None:
    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
