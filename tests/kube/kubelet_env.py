"""The process kubelet's container environment: what a container's process sees in ``os.environ``.

Owns the Kubernetes rules for building a container's environment from its pod: ``envFrom`` first
(secrets and config maps, with ``prefix``), then ``env`` in order (literal values with ``$(VAR)``
expansion against the variables defined before, ``valueFrom`` secret/config-map keys, downward-API
``fieldRef`` and ``resourceFieldRef``), plus the test bed's own ``WHARF_KUBELET_LIMIT_*`` /
``WHARF_KUBELET_REQUEST_*`` variables carrying the container's resources. A referenced secret,
config map or key that is missing (and not ``optional: true``) raises `ContainerConfigError`, whose
message is the one a real kubelet puts in the ``CreateContainerConfigError`` waiting state.
Objects are plain dicts as the API server returns them (camelCase keys).
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Protocol


class ContainerConfigError(Exception):
    """A container cannot be configured yet (a referenced secret/config map/key is missing)."""


class ObjectSource(Protocol):
    """Where the kubelet reads the secrets and config maps a container refers to."""

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The secret, or None when it does not exist."""
        ...

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The config map, or None when it does not exist."""
        ...


_DECIMAL_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_BINARY_SUFFIXES: dict[str, Fraction] = {
    suffix: Fraction(1024**power)
    for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)
}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?"
)
_VAR_REFERENCE = re.compile(r"\$(\$|\(([^)]*)\))")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_LABEL_PATH = re.compile(r"metadata\.(labels|annotations)\['(.*)'\]")

POD_IP = "127.0.0.1"
HOST_IP = "127.0.0.1"


def parse_quantity(text: str | int | float) -> Fraction:
    """The value of a Kubernetes resource quantity ("500m", "1Gi", "2", "1e3") as a fraction."""
    match = _QUANTITY.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"not a resource quantity: {text!r}")
    value = Fraction(match["number"] + (match["exponent"] or ""))
    suffix = match["suffix"] or ""
    scale = _BINARY_SUFFIXES.get(suffix) or _DECIMAL_SUFFIXES[suffix]
    return value * scale


def expand_references(text: str, defined: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined names are replaced, others kept, ``$$`` is ``$``."""

    def replace(match: re.Match[str]) -> str:
        if match[1] == "$":
            return "$"
        name = match[2]
        return defined.get(name, f"$({name})")

    return _VAR_REFERENCE.sub(replace, text)


def resource_env_name(resource: str) -> str:
    """``nvidia.com/gpu`` -> ``NVIDIA_COM_GPU``: a resource name as an environment-variable suffix."""
    return re.sub(r"[^A-Za-z0-9]", "_", resource).upper()


def effective_resources(container: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The container's (limits, requests), a missing request defaulting to its limit (as the API
    server's defaulting does)."""
    resources = container.get("resources") or {}
    limits = {name: str(value) for name, value in (resources.get("limits") or {}).items()}
    requests = {name: str(value) for name, value in (resources.get("requests") or {}).items()}
    for name, value in limits.items():
        requests.setdefault(name, value)
    return limits, requests


def resource_variables(container: Mapping[str, Any]) -> dict[str, str]:
    """``WHARF_KUBELET_LIMIT_<RESOURCE>`` / ``WHARF_KUBELET_REQUEST_<RESOURCE>`` for the container."""
    limits, requests = effective_resources(container)
    variables = {f"WHARF_KUBELET_LIMIT_{resource_env_name(k)}": v for k, v in limits.items()}
    variables.update(
        {f"WHARF_KUBELET_REQUEST_{resource_env_name(k)}": v for k, v in requests.items()}
    )
    return variables


def node_allocatable() -> dict[str, Fraction]:
    """What this machine offers, used for a ``limits.*`` reference to a container without a limit."""
    allocatable = {"cpu": Fraction(os.cpu_count() or 1)}
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        allocatable["memory"] = Fraction(pages)
        allocatable["ephemeral-storage"] = Fraction(pages)
    except (ValueError, OSError):
        pass
    return allocatable


class EnvironmentBuilder:
    """Builds the environment variables one container of one pod defines (not the image's base)."""

    def __init__(self, pod: Mapping[str, Any], source: ObjectSource) -> None:
        self._pod = pod
        self._source = source
        self._namespace = str(pod["metadata"].get("namespace", "default"))
        self._secrets: dict[str, dict[str, Any] | None] = {}
        self._config_maps: dict[str, dict[str, Any] | None] = {}

    def container_env(self, container: Mapping[str, Any]) -> dict[str, str]:
        """``envFrom`` then ``env``, in the order and with the expansion Kubernetes applies."""
        defined: dict[str, str] = {}
        for env_from in container.get("envFrom") or []:
            defined.update(self._env_from(env_from))
        for var in container.get("env") or []:
            name = var["name"]
            if "valueFrom" in var and var["valueFrom"] is not None:
                value = self._value_from(var["valueFrom"], container)
                if value is None:
                    continue
                defined[name] = value
            else:
                defined[name] = expand_references(str(var.get("value") or ""), defined)
        return defined

    def _env_from(self, env_from: Mapping[str, Any]) -> dict[str, str]:
        prefix = str(env_from.get("prefix") or "")
        if env_from.get("secretRef") is not None:
            ref = env_from["secretRef"]
            data = self._secret_data(ref["name"], optional=bool(ref.get("optional")))
        elif env_from.get("configMapRef") is not None:
            ref = env_from["configMapRef"]
            data = self._config_map_data(ref["name"], optional=bool(ref.get("optional")))
        else:
            return {}
        if data is None:
            return {}
        variables = {f"{prefix}{key}": value for key, value in data.items()}
        return {name: value for name, value in variables.items() if _ENV_NAME.fullmatch(name)}

    def _value_from(self, source: Mapping[str, Any], container: Mapping[str, Any]) -> str | None:
        if source.get("secretKeyRef") is not None:
            return self._key_ref(source["secretKeyRef"], "Secret")
        if source.get("configMapKeyRef") is not None:
            return self._key_ref(source["configMapKeyRef"], "ConfigMap")
        if source.get("fieldRef") is not None:
            return self._field_value(str(source["fieldRef"]["fieldPath"]))
        if source.get("resourceFieldRef") is not None:
            return self._resource_value(source["resourceFieldRef"], container)
        raise ContainerConfigError("env var valueFrom names no source")

    def _key_ref(self, ref: Mapping[str, Any], kind: str) -> str | None:
        name, key, optional = ref["name"], ref["key"], bool(ref.get("optional"))
        if kind == "Secret":
            data = self._secret_data(name, optional=optional)
        else:
            data = self._config_map_data(name, optional=optional)
        if data is None:
            return None
        if key not in data:
            if optional:
                return None
            raise ContainerConfigError(
                f"couldn't find key {key} in {kind} {self._namespace}/{name}"
            )
        return data[key]

    def _secret_data(self, name: str, *, optional: bool) -> dict[str, str] | None:
        if name not in self._secrets:
            self._secrets[name] = self._source.secret(self._namespace, name)
        secret = self._secrets[name]
        if secret is None:
            if optional:
                return None
            raise ContainerConfigError(f'secret "{name}" not found')
        decoded = {
            key: base64.b64decode(value).decode("utf-8", errors="replace")
            for key, value in (secret.get("data") or {}).items()
        }
        decoded.update({k: str(v) for k, v in (secret.get("stringData") or {}).items()})
        return decoded

    def _config_map_data(self, name: str, *, optional: bool) -> dict[str, str] | None:
        if name not in self._config_maps:
            self._config_maps[name] = self._source.config_map(self._namespace, name)
        config_map = self._config_maps[name]
        if config_map is None:
            if optional:
                return None
            raise ContainerConfigError(f'configmap "{name}" not found')
        return {key: str(value) for key, value in (config_map.get("data") or {}).items()}

    def _field_value(self, path: str) -> str:
        metadata = self._pod.get("metadata") or {}
        spec = self._pod.get("spec") or {}
        simple = {
            "metadata.name": metadata.get("name"),
            "metadata.namespace": self._namespace,
            "metadata.uid": metadata.get("uid"),
            "spec.nodeName": spec.get("nodeName"),
            "spec.serviceAccountName": spec.get("serviceAccountName") or spec.get("serviceAccount"),
            "status.podIP": POD_IP,
            "status.podIPs": POD_IP,
            "status.hostIP": HOST_IP,
            "status.hostIPs": HOST_IP,
        }
        if path in simple:
            return str(simple[path] or "")
        if path in ("metadata.labels", "metadata.annotations"):
            values = metadata.get(path.split(".")[1]) or {}
            return "\n".join(f'{key}="{values[key]}"' for key in sorted(values))
        match = _LABEL_PATH.fullmatch(path)
        if match is not None:
            return str((metadata.get(match[1]) or {}).get(match[2], ""))
        raise ContainerConfigError(f"unsupported fieldRef fieldPath: {path}")

    def _resource_value(self, ref: Mapping[str, Any], container: Mapping[str, Any]) -> str:
        target = container
        container_name = ref.get("containerName")
        if container_name and container_name != container.get("name"):
            spec = self._pod.get("spec") or {}
            candidates = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
            named = [c for c in candidates if c.get("name") == container_name]
            if not named:
                raise ContainerConfigError(f"resourceFieldRef names no container {container_name}")
            target = named[0]
        kind, _, resource = str(ref["resource"]).partition(".")
        limits, requests = effective_resources(target)
        chosen = limits if kind == "limits" else requests
        if resource in chosen:
            value = parse_quantity(chosen[resource])
        elif kind == "limits":
            value = node_allocatable().get(resource, Fraction(0))
        else:
            value = Fraction(0)
        divisor = parse_quantity(ref.get("divisor") or "1") or Fraction(1)
        return str(math.ceil(value / divisor))
