"""Kubernetes manifests Wharf creates, as the plain dicts the API takes (camelCase).

Owns the step and orchestrator Jobs (:func:`step_job`, :func:`orchestrator_job`, each from one
:class:`JobSpec` built by :func:`step_job_for`, :func:`orchestrator_job_for`,
:func:`cron_job_for`), credential Secrets, owner references, the default pod failure policy and
the default TTL of a step operator's Jobs (:data:`STEP_OPERATOR_JOB_TTL_SECONDS`).

Invariants: pure (no I/O, clock or randomness; a new dict sharing nothing with the inputs, never
a field a real API server would refuse for valid input); a Job's pod runs one container ``main``
with ``restartPolicy: Never``, Wharf's own labels, annotations and env vars winning over pod
settings'; a CronJob's ``jobTemplate`` is exactly the orchestrator Job a manual run creates.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from wharf.integrations.kubernetes.cron_manifest import (
    CRON_MACROS,
    CronJobSpec,
    check_cron_schedule,
    cron_job,
)
from wharf.integrations.kubernetes.job_spec import JobSpec, SecretEnv
from wharf.integrations.kubernetes.labels import JOB_NAME_MAX
from wharf.integrations.kubernetes.pod_template import (
    MAIN_CONTAINER,
    env_entries,
    pod_template,
    pruned,
)
from wharf.integrations.kubernetes.settings import (
    ORCHESTRATOR_POD_DEFAULT_REQUESTS,
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
    KubernetesStepOperatorSettings,
    with_default_requests,
)

__all__ = [
    "CRON_MACROS",
    "MAIN_CONTAINER",
    "ORCHESTRATOR_COMMAND",
    "ORCHESTRATOR_MODULE",
    "STEP_OPERATOR_JOB_TTL_SECONDS",
    "TOKEN_KEY",
    "CronJobSpec",
    "JobSpec",
    "SecretEnv",
    "check_cron_schedule",
    "credentials_secret",
    "cron_job",
    "cron_job_for",
    "default_pod_failure_policy",
    "env_entries",
    "orchestrator_job",
    "orchestrator_job_for",
    "owner_reference",
    "run_token_secret",
    "step_backoff_limit",
    "step_job",
    "step_job_for",
]

ORCHESTRATOR_MODULE = "wharf.integrations.kubernetes.orchestrator_main"
ORCHESTRATOR_COMMAND = ("python", "-m", ORCHESTRATOR_MODULE)
TOKEN_KEY = "token"
"""The key of the run token in its Secret."""
STEP_OPERATOR_JOB_TTL_SECONDS = 86400
"""``ttlSecondsAfterFinished`` of a step operator's Job whose settings set none (one day): its
submitting process deletes it at cleanup anyway, so this only removes the Jobs (and, through
their owner references, the Secrets) of a process that died before it could."""


def default_pod_failure_policy(fail_job_exit_codes: Sequence[int] = ()) -> dict[str, Any]:
    """Disruptions (preemption, eviction, node drain) do not count as a failure; a non-zero exit
    of ``main`` counts toward ``backoffLimit``; ``fail_job_exit_codes`` of ``main`` fail the Job
    at once (no retry). The disruption rule comes first: rules apply in order, and a disrupted
    pod's ``main`` usually exits non-zero too."""
    rules: list[dict[str, Any]] = [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    ]
    codes = sorted({code for code in fail_job_exit_codes if code != 0})
    if codes:
        rules.append(
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": MAIN_CONTAINER, "operator": "In", "values": codes},
            }
        )
    rules.append(
        {
            "action": "Count",
            "onExitCodes": {"containerName": MAIN_CONTAINER, "operator": "NotIn", "values": [0]},
        }
    )
    return {"rules": rules}


def step_backoff_limit(max_retries: int | None, margin: int) -> int:
    """``backoffLimit`` of a step Job: its retries plus the settings' margin."""
    return max(0, max_retries or 0) + max(0, margin)


def owner_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An owner reference to ``obj`` — a created object as the API returned it (with
    ``metadata``), or a reference — with ``controller: false`` (the Job controller owns the
    pods) and ``blockOwnerDeletion: true`` (a foreground delete of the owner waits for it)."""
    metadata = obj.get("metadata")
    source = metadata if isinstance(metadata, Mapping) else obj
    reference = {
        "apiVersion": obj.get("apiVersion") or obj.get("api_version"),
        "kind": obj.get("kind"),
        "name": source.get("name"),
        "uid": source.get("uid"),
    }
    missing = [key for key, value in reference.items() if not value]
    if missing:
        raise ValueError(f"An owner reference needs {', '.join(missing)}; got {dict(obj)!r:.200}.")
    return {**reference, "controller": False, "blockOwnerDeletion": True}


def _job(spec: JobSpec) -> dict[str, Any]:
    if len(spec.name) > JOB_NAME_MAX:
        raise ValueError(f"Job name '{spec.name}' is longer than {JOB_NAME_MAX} characters.")
    metadata = pruned(
        {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": dict(spec.labels),
            "annotations": dict(spec.annotations),
            "ownerReferences": _owner_references(spec.owners),
        }
    )
    policy = spec.pod_failure_policy or default_pod_failure_policy(spec.fail_job_exit_codes)
    job_spec = pruned(
        {
            "backoffLimit": spec.backoff_limit,
            "activeDeadlineSeconds": spec.active_deadline_seconds,
            "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
            "podFailurePolicy": copy.deepcopy(dict(policy)),
            "template": pod_template(spec),
        }
    )
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}


def _owner_references(owners: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One non-controller reference per owner uid, in the given order."""
    references: dict[str, dict[str, Any]] = {}
    for obj in owners:
        reference = owner_reference(obj)
        references.setdefault(reference["uid"], reference)
    return list(references.values())


def step_job(spec: JobSpec) -> dict[str, Any]:
    """The Job of one step attempt: one pod, container ``main`` running ``spec.command`` +
    ``spec.args``; its owners (the orchestrator Job, as created or as a reference, and e.g.
    those copied from the orchestrator pod) garbage-collect it."""
    return _job(spec)


def orchestrator_job(spec: JobSpec) -> dict[str, Any]:
    """The Job whose pod runs the orchestrator entry point (``spec.command``, normally
    :data:`ORCHESTRATOR_COMMAND`). Its pod gets the default requests (400Mi memory, 100m CPU)
    where the pod settings set none."""
    pod_settings = with_default_requests(spec.pod_settings, ORCHESTRATOR_POD_DEFAULT_REQUESTS)
    return _job(replace(spec, pod_settings=pod_settings))


def credentials_secret(
    *,
    name: str,
    namespace: str,
    data: Mapping[str, str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    base64_data: bool = False,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An ``Opaque`` Secret holding ``data`` (key -> value; as ``stringData``, or base64
    ``data`` with ``base64_data``); ``owner`` garbage-collects it with its owner."""
    metadata = pruned(
        {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(annotations or {}),
            "ownerReferences": [owner_reference(owner)] if owner is not None else [],
        }
    )
    secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata}
    secret["type"] = "Opaque"
    if base64_data:
        secret["data"] = {
            key: base64.b64encode(value.encode()).decode("ascii") for key, value in data.items()
        }
    else:
        secret["stringData"] = dict(data)
    return secret


def run_token_secret(
    *,
    name: str,
    namespace: str,
    token: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    key: str = TOKEN_KEY,
    base64_data: bool = False,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A :func:`credentials_secret` holding the run-scoped token under ``key``."""
    return credentials_secret(
        name=name,
        namespace=namespace,
        data={key: token},
        labels=labels,
        annotations=annotations,
        base64_data=base64_data,
        owner=owner,
    )


# ----------------------------------------------------------------------------- from settings


def step_job_for(
    settings: KubernetesOrchestratorSettings | KubernetesStepOperatorSettings,
    *,
    name: str,
    image: str,
    command: Sequence[str],
    env: Mapping[str, str],
    secret_env: SecretEnv,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    max_retries: int | None,
    owner: Mapping[str, Any] | None = None,
    args: Sequence[str] = (),
    pod_settings: KubernetesPodSettings | None = None,
    owner_references: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """:func:`step_job` of what the caller says, everything else from ``settings``
    (``pod_settings``: instead of the settings' own, e.g. after an allocation was applied;
    ``owner`` first, then ``owner_references``). A step operator's Job gets
    :data:`STEP_OPERATOR_JOB_TTL_SECONDS` unless its settings set a TTL."""
    ttl = settings.ttl_seconds_after_finished
    if isinstance(settings, KubernetesOrchestratorSettings):
        account = settings.step_service_account
    else:
        account = settings.service_account_name
        ttl = STEP_OPERATOR_JOB_TTL_SECONDS if ttl is None else ttl
    spec = JobSpec(
        name=name,
        namespace=settings.namespace,
        image=settings.image or image,
        command=command,
        args=args,
        env=env,
        secret_env=secret_env,
        labels=labels,
        annotations=annotations,
        pod_settings=pod_settings or settings.pod_settings,
        service_account_name=account,
        image_pull_policy=settings.image_pull_policy,
        privileged=settings.privileged,
        grace_period_seconds=settings.pod_stop_grace_period,
        backoff_limit=step_backoff_limit(max_retries, settings.backoff_limit_margin),
        active_deadline_seconds=settings.active_deadline_seconds,
        ttl_seconds_after_finished=ttl,
        pod_failure_policy=settings.pod_failure_policy,
        owners=[*([owner] if owner is not None else []), *owner_references],
    )
    return step_job(spec)


def orchestrator_job_for(
    settings: KubernetesOrchestratorSettings,
    *,
    name: str,
    image: str,
    args: Sequence[str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    env: Mapping[str, str] | None = None,
    secret_env: SecretEnv | None = None,
    fail_job_exit_codes: Sequence[int] = (),
) -> dict[str, Any]:
    """:func:`orchestrator_job` of what the caller says, everything else from ``settings``."""
    spec = JobSpec(
        name=name,
        namespace=settings.namespace,
        image=settings.image or image,
        command=ORCHESTRATOR_COMMAND,
        args=args,
        env=env or {},
        secret_env=secret_env or {},
        labels=labels,
        annotations=annotations,
        pod_settings=settings.orchestrator_pod_settings,
        service_account_name=settings.service_account_name,
        image_pull_policy=settings.image_pull_policy,
        privileged=settings.privileged,
        grace_period_seconds=settings.pod_stop_grace_period,
        backoff_limit=settings.orchestrator_job_backoff_limit,
        active_deadline_seconds=settings.active_deadline_seconds,
        ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
        pod_failure_policy=settings.pod_failure_policy,
        fail_job_exit_codes=fail_job_exit_codes,
    )
    return orchestrator_job(spec)


def cron_job_for(
    settings: KubernetesOrchestratorSettings,
    *,
    name: str,
    schedule: str,
    job: Mapping[str, Any],
    suspend: bool = False,
    time_zone: str | None = None,
) -> dict[str, Any]:
    """:func:`cron_job` of ``job`` with the history limits, concurrency policy and starting
    deadline of ``settings`` (``time_zone``: an IANA name; None: the cluster's)."""
    spec = CronJobSpec(
        name=name,
        schedule=schedule,
        job=job,
        namespace=settings.namespace,
        successful_jobs_history_limit=settings.successful_jobs_history_limit,
        failed_jobs_history_limit=settings.failed_jobs_history_limit,
        concurrency_policy=settings.concurrency_policy,
        starting_deadline_seconds=settings.starting_deadline_seconds,
        suspend=suspend,
        time_zone=time_zone,
    )
    return cron_job(spec)
