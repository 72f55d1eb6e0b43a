"""Settings of the Kubernetes orchestrator and step operator, and of the pods they create.

Owns :class:`KubernetesPodSettings`, :class:`KubernetesOrchestratorSettings` and
:class:`KubernetesStepOperatorSettings` (meanings as in the ZenML spec §5.5), with their parsing
(``from_component``) and layering (``merged``, :func:`deep_merge`).

Invariants: every model forbids unknown fields, and invalid input is an :class:`InputError`
naming the field; merging never mutates its inputs, and only the fields an override *set* take
part; pod settings hold plain dicts in the shape the Kubernetes API takes; quantities are strings.
"""

from __future__ import annotations

import copy
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from wharf.core.errors import InputError
from wharf.core.validation import describe_validation_error
from wharf.integrations.kubernetes.api_shapes import api_shape_problem
from wharf.integrations.kubernetes.labels import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
)

DEFAULT_WAITING_REASONS = (
    "InvalidImageName",
    "ErrImagePull",
    "ImagePullBackOff",
    "CreateContainerConfigError",
)
"""Container waiting reasons that fail a step at once instead of waiting for a retry."""
ORCHESTRATOR_POD_DEFAULT_REQUESTS = {"memory": "400Mi", "cpu": "100m"}
JOB_NAME_PREFIX_MAX = 32
RESOURCE_SECTIONS = ("requests", "limits")
TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

API_ENTRY_MODELS = {
    "env": "V1EnvVar",
    "env_from": "V1EnvFromSource",
    "volumes": "V1Volume",
    "volume_mounts": "V1VolumeMount",
}
"""The Kubernetes client's model of each entry of these pod settings (checked as given)."""
_QUANTITY = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
"""An API ``int32`` field (``backoffLimit``, ``ttlSecondsAfterFinished``, history limits)."""
NonNegativeInt64 = Annotated[int, Field(ge=0, le=INT64_MAX)]
PositiveInt64 = Annotated[int, Field(gt=0, le=INT64_MAX)]
"""API ``int64`` fields (deadlines, ``terminationGracePeriodSeconds``)."""


def deep_merge(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """``layer`` over ``base``: mappings merged recursively, anything else replaced whole.
    Neither input is mutated and the result shares no mutable container with them."""
    merged = copy.deepcopy(dict(base))
    for key, value in layer.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(_plain(value))
    return merged


def _plain(value: Any) -> Any:
    """Models as the fields they set (recursively), so merges see only what a user gave."""
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _invalid(model: type[BaseModel], error: ValidationError, title: str) -> InputError:
    return InputError(describe_validation_error(error, title=title, model=model))


class KubernetesPodSettings(BaseModel):
    """What Wharf lets a user add to a pod (step pods, the orchestrator pod), as plain dicts
    in the shape the Kubernetes API takes (camelCase inside ``affinity``, ``tolerations``,
    ``env``, ``volumes``...)."""

    model_config = ConfigDict(extra="forbid")

    node_selectors: dict[str, str] = Field(default_factory=dict)
    affinity: dict[str, Any] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    resources: dict[str, dict[str, str]] = Field(default_factory=dict)
    """``{"requests": {"cpu": "500m"}, "limits": {"nvidia.com/gpu": "1"}}``."""
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    env: list[dict[str, Any]] = Field(default_factory=list)
    """Container env entries as the API takes them (``{"name": .., "value": ..}``)."""
    env_from: list[dict[str, Any]] = Field(default_factory=list)
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    image_pull_secrets: list[str] = Field(default_factory=list)
    service_account_name: str | None = None

    @field_validator("resources", mode="before")
    @classmethod
    def _quantities_as_text(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return {
            section: (
                {
                    key: str(amount) if isinstance(amount, int | float) else amount
                    for key, amount in entries.items()
                }
                if isinstance(entries, Mapping)
                else entries
            )
            for section, entries in value.items()
        }

    @field_validator("resources")
    @classmethod
    def _check_resources(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for section, entries in value.items():
            if section not in RESOURCE_SECTIONS:
                raise ValueError(f"unknown section '{section}': use requests and limits")
            for key, amount in entries.items():
                if not is_label_key(key):
                    raise ValueError(f"'{key}' is not a resource name")
                if _QUANTITY.fullmatch(amount) is None:
                    raise ValueError(
                        f"{section}.{key} = '{amount}' is not a quantity (like 2, 500m, 1Gi)"
                    )
        return value

    @field_validator("labels", "node_selectors")
    @classmethod
    def _check_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not is_label_key(key):
                raise ValueError(f"'{key}' is not a valid label key")
            if not is_label_value(text):
                raise ValueError(
                    f"'{text}' (for {key}) is not a valid label value: at most 63 letters, "
                    "digits, '-', '_' or '.', beginning and ending with a letter or digit"
                )
        return value

    @field_validator("annotations")
    @classmethod
    def _check_annotations(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not is_label_key(key):
                raise ValueError(f"'{key}' is not a valid annotation key")
        return value

    @field_validator("tolerations")
    @classmethod
    def _check_tolerations(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, toleration in enumerate(value):
            problem = toleration_problem(toleration)
            if problem is not None:
                raise ValueError(f"entry {index} ({json.dumps(toleration)[:80]}): {problem}")
        return value

    @field_validator("env", "volumes", "volume_mounts")
    @classmethod
    def _named_entries(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for entry in value:
            if not isinstance(entry.get("name"), str) or not entry["name"]:
                raise ValueError(f"every entry needs a 'name'; got {json.dumps(entry)[:80]}")
        return value

    @field_validator("affinity")
    @classmethod
    def _check_affinity(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = api_shape_problem("V1Affinity", value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("env", "env_from", "volumes", "volume_mounts")
    @classmethod
    def _check_entries(cls, value: list[dict[str, Any]], info: ValidationInfo) -> Any:
        model = API_ENTRY_MODELS[str(info.field_name)]
        for index, entry in enumerate(value):
            problem = api_shape_problem(model, entry)
            if problem is not None:
                raise ValueError(f"entry {index} ({json.dumps(entry)[:80]}): {problem}")
        return value

    @field_validator("volume_mounts")
    @classmethod
    def _mount_paths(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for entry in value:
            if not isinstance(entry.get("mountPath"), str) or not entry["mountPath"]:
                raise ValueError(f"volume mount '{entry['name']}' needs a 'mountPath'")
        return value

    @field_validator("image_pull_secrets", mode="before")
    @classmethod
    def _secret_names(cls, value: Any) -> Any:
        # The API's own shape ([{"name": ...}]) is accepted too.
        if isinstance(value, list):
            return [
                item["name"] if isinstance(item, Mapping) and "name" in item else item
                for item in value
            ]
        return value

    @field_validator("image_pull_secrets")
    @classmethod
    def _check_secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not is_dns1123_subdomain(name):
                raise ValueError(f"'{name}' is not a valid secret name")
        return value

    @field_validator("service_account_name")
    @classmethod
    def _check_account(cls, value: str | None) -> str | None:
        return _check_subdomain(value, "service account name")


def toleration_problem(toleration: Mapping[str, Any]) -> str | None:
    """What the API server would refuse in a pod toleration (the API's shape: ``key``,
    ``operator``, ``value``, ``effect``, ``tolerationSeconds``), in plain words; None if
    nothing."""
    unknown = sorted(set(toleration) - set(TOLERATION_FIELDS))
    if unknown:
        return f"unknown field '{unknown[0]}' (known: {', '.join(TOLERATION_FIELDS)})"
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    value = toleration.get("value") or ""
    effect = toleration.get("effect") or ""
    seconds = toleration.get("tolerationSeconds")
    if not isinstance(key, str) or (key and not is_label_key(key)):
        return f"key {key!r} is not a valid label key"
    if operator not in TOLERATION_OPERATORS:
        return f"operator {operator!r} must be one of {', '.join(TOLERATION_OPERATORS)}"
    if not key and operator != "Exists":
        return "a toleration without a key needs operator Exists (it then tolerates every taint)"
    if operator == "Exists" and value:
        return "value must be empty with operator Exists"
    if not isinstance(value, str) or not is_label_value(value):
        return f"value {value!r} is not a valid label value"
    if effect not in ("", *TAINT_EFFECTS):
        return f"effect {effect!r} must be one of {', '.join(TAINT_EFFECTS)} (or empty: all)"
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        return f"tolerationSeconds {seconds!r} must be a whole number of seconds"
    if seconds is not None and effect != "NoExecute":
        return "tolerationSeconds needs effect NoExecute"
    return None


def _check_subdomain(value: str | None, what: str) -> str | None:
    if value is not None and not is_dns1123_subdomain(value):
        raise ValueError(
            f"'{value}' is not a valid {what}: lowercase letters, digits, '-' and '.', "
            "beginning and ending with a letter or digit"
        )
    return value


def with_default_requests(
    pod_settings: KubernetesPodSettings | None,
    defaults: Mapping[str, str] = ORCHESTRATOR_POD_DEFAULT_REQUESTS,
) -> KubernetesPodSettings:
    """``pod_settings`` with ``defaults`` added to its requests where the user set neither a
    request nor a limit for that resource (Kubernetes takes an unset request from the limit,
    and a default above a user's limit would be refused)."""
    settings = pod_settings or KubernetesPodSettings()
    requests = dict(settings.resources.get("requests", {}))
    limits = settings.resources.get("limits", {})
    added = {key: value for key, value in defaults.items() if key not in requests | limits}
    if not added:
        return settings.model_copy(deep=True)
    resources = {**copy.deepcopy(settings.resources), "requests": {**added, **requests}}
    return settings.model_copy(update={"resources": resources}, deep=True)


class _KubernetesSettings(BaseModel):
    """Settings both Kubernetes components share."""

    model_config = ConfigDict(extra="forbid")
    _TITLE: ClassVar[str] = "Kubernetes settings"

    namespace: str = "default"
    context: str | None = None
    """The kubeconfig context (None: the current one); unused inside the cluster."""
    kubeconfig: str | None = None
    """A kubeconfig file (None: ``KUBECONFIG`` or ``~/.kube/config``)."""
    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    service_account_name: str | None = None
    privileged: bool = False
    pod_settings: KubernetesPodSettings | None = None
    """Settings of step pods."""
    job_name_prefix: str | None = None
    backoff_limit_margin: NonNegativeInt32 = 0
    """Pod restarts allowed beyond the step's retries."""
    ttl_seconds_after_finished: NonNegativeInt32 | None = None
    active_deadline_seconds: PositiveInt64 | None = None
    pod_failure_policy: dict[str, Any] | None = None
    """A Job ``podFailurePolicy`` (None: count main-container failures, ignore disruptions)."""
    fail_on_container_waiting_reasons: list[str] = Field(
        default_factory=lambda: list(DEFAULT_WAITING_REASONS)
    )
    job_monitoring_interval: Annotated[float, Field(gt=0)] = 1.0
    pod_stop_grace_period: NonNegativeInt64 = 30
    """Seconds a pod has between SIGTERM and SIGKILL (``terminationGracePeriodSeconds``)."""
    pod_startup_timeout: Annotated[float, Field(ge=0)] = 600.0
    """Seconds a step pod may take from its Job's creation to its first heartbeat (image pull,
    node scale-up) before it is lost; waiting reasons above still fail it at once."""
    mounts_artifact_store: bool = False
    """The cluster mounts the local artifact store's path into pods (at the same path)."""

    @field_validator("namespace")
    @classmethod
    def _check_namespace(cls, value: str) -> str:
        if not is_dns1123_label(value):
            raise ValueError(
                f"'{value}' is not a valid namespace: at most 63 lowercase letters, digits "
                "and '-', beginning and ending with a letter or digit"
            )
        return value

    @field_validator("service_account_name")
    @classmethod
    def _check_account(cls, value: str | None) -> str | None:
        return _check_subdomain(value, "service account name")

    @field_validator("job_name_prefix")
    @classmethod
    def _check_prefix(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > JOB_NAME_PREFIX_MAX or not is_dns1123_label(value)):
            raise ValueError(
                f"'{value}' is not a valid job name prefix: at most {JOB_NAME_PREFIX_MAX} "
                "lowercase letters, digits and '-', beginning and ending with a letter or digit"
            )
        return value

    @field_validator("pod_failure_policy")
    @classmethod
    def _check_policy(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        rules = value.get("rules")
        if not isinstance(rules, list) or not all(isinstance(rule, dict) for rule in rules):
            raise ValueError("a pod failure policy needs a list of 'rules' (mappings)")
        problem = api_shape_problem("V1PodFailurePolicy", value)
        if problem is not None:
            raise ValueError(problem)
        policy = copy.deepcopy(value)
        for rule in policy["rules"]:
            for pattern in rule.get("onPodConditions") or []:
                if isinstance(pattern, dict):
                    pattern.setdefault("status", "True")  # the API's default, spelt out
        return policy

    @classmethod
    def _title(cls) -> str:
        return cls._TITLE

    @classmethod
    def from_component(cls, configuration: Mapping[str, Any]) -> Self:
        """Settings from a component's configuration, as ``-c key=value`` stores it: text is
        parsed as JSON for mapping and list fields (``-c 'pod_settings={"labels": ...}'``; a
        list of text may also be comma-separated), booleans and numbers from their text
        (``true``, ``3``), numbers given to text fields kept as text (``-c namespace=2024``)."""
        values = {key: _component_value(cls, key, value) for key, value in configuration.items()}
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            raise _invalid(cls, error, cls._title()) from None

    def merged(self, override: Mapping[str, Any] | BaseModel | None) -> Self:
        """These settings with ``override`` (step- or run-level) layered over them: only the
        fields it set count (a step's ``KubernetesOrchestratorSettings(namespace="x")``
        changes the namespace and nothing else); mappings merge at every depth (pod settings
        field by field, node selectors key by key), lists and scalars replace."""
        if override is None:
            return self.model_copy(deep=True)
        layer = _plain(override)
        if not isinstance(layer, Mapping):
            raise InputError(f"{self._title()} must be a mapping or settings object.")
        try:
            return type(self).model_validate(deep_merge(_plain(self), layer))
        except ValidationError as error:
            raise _invalid(type(self), error, self._title()) from None


class KubernetesOrchestratorSettings(_KubernetesSettings):
    """Settings of the ``kubernetes`` orchestrator (component, pipeline or step level)."""

    _TITLE: ClassVar[str] = "Kubernetes orchestrator settings"

    synchronous: bool = True
    """The client waits for the orchestrator Job and streams its logs."""
    step_pod_service_account_name: str | None = None
    orchestrator_pod_settings: KubernetesPodSettings | None = None
    max_parallelism: PositiveInt | None = None
    orchestrator_job_backoff_limit: NonNegativeInt32 = 3
    prevent_orchestrator_pod_caching: bool = False
    successful_jobs_history_limit: NonNegativeInt32 | None = None
    failed_jobs_history_limit: NonNegativeInt32 | None = None
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] | None = None
    starting_deadline_seconds: NonNegativeInt64 | None = None

    @field_validator("step_pod_service_account_name")
    @classmethod
    def _check_step_account(cls, value: str | None) -> str | None:
        return _check_subdomain(value, "service account name")

    @field_validator("prevent_orchestrator_pod_caching")
    @classmethod
    def _check_caching_place(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "true is not supported: Wharf's orchestrator pod decides caching right before "
                "each step pod (batched, against the latest store state), and step pods never "
                "decide it themselves; leave it false, or disable caching with "
                "enable_cache=False on the pipeline or step"
            )
        return value

    @property
    def step_service_account(self) -> str | None:
        """The service account of step pods: the step one, else the orchestrator's."""
        return self.step_pod_service_account_name or self.service_account_name


class KubernetesStepOperatorSettings(_KubernetesSettings):
    """Settings of the ``kubernetes`` step operator (component or step level)."""

    _TITLE: ClassVar[str] = "Kubernetes step operator settings"


# ----------------------------------------------------------------------------- component values


def _component_value(model: type[BaseModel], key: str, value: Any) -> Any:
    field = model.model_fields.get(key)
    if field is None or not isinstance(value, str | int | float | bool):
        return value  # unknown keys and structured values: validation says what is wrong
    kinds = _kinds(field.annotation)
    if isinstance(value, str) and kinds & {"structured"}:
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            if "text_list" in kinds:  # -c fail_on_container_waiting_reasons=ErrImagePull,Other
                return [item.strip() for item in value.split(",") if item.strip()]
            title = getattr(model, "_TITLE", model.__name__)
            raise InputError(
                f"Invalid {title}: '{key}' must be JSON "
                f"(for example -c '{key}={_json_example(kinds)}')."
            ) from None
    if not isinstance(value, str) and kinds == {"text"}:
        return json.dumps(value) if isinstance(value, bool) else str(value)
    return value


def _json_example(kinds: set[str]) -> str:
    return '{"key": "value"}' if "mapping" in kinds else '["a", "b"]'


def _kinds(annotation: Any) -> set[str]:
    """What a field accepts: ``text``, ``structured`` (+ ``mapping`` or ``text_list``),
    ``other``."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _kinds(get_args(annotation)[0])
    if origin in (types.UnionType, typing.Union):
        kinds: set[str] = set()
        for arg in get_args(annotation):
            if arg is not type(None):
                kinds |= _kinds(arg)
        return kinds
    if origin is Literal:
        return {"text"} if all(isinstance(a, str) for a in get_args(annotation)) else {"other"}
    if annotation is str:
        return {"text"}
    if origin is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return {"structured", "mapping"}
    if origin is list:
        return {"structured", "text_list"} if get_args(annotation) == (str,) else {"structured"}
    return {"other"}
