"""Kubernetes manifests Wharf creates, as the plain dicts the API takes (camelCase).

Owns: the step Job (:func:`step_job`), the orchestrator Job (:func:`orchestrator_job`), the
run-scoped token Secret (:func:`run_token_secret`), owner references (:func:`owner_reference`)
and the default pod failure policy (:func:`default_pod_failure_policy`); :func:`step_job_for`,
:func:`orchestrator_job_for` and :func:`cron_job_for` read those builders' arguments from the
settings. The pod template is
:mod:`.pod_template`'s, the CronJob (:func:`cron_job`, re-exported) :mod:`.cron_manifest`'s.

Invariants:
- pure: no I/O, no clock, no randomness; every builder returns a new dict that shares nothing
  with its inputs, and never emits a field a real API server would refuse for valid input;
- a Job's pod runs one container named ``main`` with ``restartPolicy: Never`` (retries are the
  Job's ``backoffLimit``); Wharf's own labels, annotations and env vars win over pod settings'
  entries of the same name (the orchestrator selects pods by those labels);
- a CronJob's ``jobTemplate`` is exactly the orchestrator Job a manual run creates (its labels,
  annotations and spec), so scheduled and manual runs start the same pod.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from wharf.integrations.kubernetes.cron_manifest import CRON_MACROS, check_cron_schedule, cron_job
from wharf.integrations.kubernetes.labels import JOB_NAME_MAX
from wharf.integrations.kubernetes.pod_template import (
    MAIN_CONTAINER,
    SecretEnv,
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
    "TOKEN_KEY",
    "SecretEnv",
    "check_cron_schedule",
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


def _job(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    template: dict[str, Any],
    backoff_limit: int,
    active_deadline_seconds: int | None,
    ttl_seconds_after_finished: int | None,
    pod_failure_policy: Mapping[str, Any],
    owners: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    if len(name) > JOB_NAME_MAX:
        raise ValueError(f"Job name '{name}' is longer than {JOB_NAME_MAX} characters.")
    metadata = pruned(
        {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(annotations),
            "ownerReferences": list(owners),
        }
    )
    spec = pruned(
        {
            "backoffLimit": backoff_limit,
            "activeDeadlineSeconds": active_deadline_seconds,
            "ttlSecondsAfterFinished": ttl_seconds_after_finished,
            "podFailurePolicy": copy.deepcopy(dict(pod_failure_policy)),
            "template": template,
        }
    )
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def step_job(
    *,
    name: str,
    namespace: str,
    image: str,
    command: Sequence[str],
    env: Mapping[str, str],
    secret_env: SecretEnv,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    pod_settings: KubernetesPodSettings | None,
    service_account_name: str | None,
    backoff_limit: int,
    active_deadline_seconds: int | None,
    ttl_seconds_after_finished: int | None,
    pod_failure_policy: Mapping[str, Any] | None,
    grace_period_seconds: int,
    owner: Mapping[str, Any] | None,
    args: Sequence[str] = (),
    image_pull_policy: str | None = None,
    privileged: bool = False,
    owner_references: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The Job of one step attempt: one pod, container ``main`` running ``command`` + ``args``;
    ``owner`` (the orchestrator Job, as created or as a reference) garbage-collects it, and so
    do ``owner_references`` (more owners, e.g. copied from the orchestrator pod; all of them
    become non-controller references, one per uid)."""
    template = pod_template(
        image=image,
        command=command,
        args=args,
        env=env,
        secret_env=secret_env,
        labels=labels,
        annotations=annotations,
        pod_settings=pod_settings,
        service_account_name=service_account_name,
        grace_period_seconds=grace_period_seconds,
        image_pull_policy=image_pull_policy,
        privileged=privileged,
    )
    return _job(
        name=name,
        namespace=namespace,
        labels=labels,
        annotations=annotations,
        template=template,
        backoff_limit=backoff_limit,
        active_deadline_seconds=active_deadline_seconds,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        pod_failure_policy=pod_failure_policy or default_pod_failure_policy(),
        owners=_owner_references(owner, owner_references),
    )


def _owner_references(
    owner: Mapping[str, Any] | None, more: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    references: dict[str, dict[str, Any]] = {}
    for obj in ([owner] if owner is not None else []) + list(more):
        reference = owner_reference(obj)
        references.setdefault(reference["uid"], reference)
    return list(references.values())


def orchestrator_job(
    *,
    name: str,
    namespace: str,
    image: str,
    args: Sequence[str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    pod_settings: KubernetesPodSettings | None,
    service_account_name: str | None,
    backoff_limit: int,
    active_deadline_seconds: int | None,
    ttl_seconds_after_finished: int | None,
    pod_failure_policy: Mapping[str, Any] | None,
    grace_period_seconds: int,
    env: Mapping[str, str] | None = None,
    secret_env: SecretEnv | None = None,
    image_pull_policy: str | None = None,
    privileged: bool = False,
    command: Sequence[str] = ORCHESTRATOR_COMMAND,
    fail_job_exit_codes: Sequence[int] = (),
) -> dict[str, Any]:
    """The Job whose pod runs the orchestrator entry point with ``args``. Its pod gets the
    default requests (400Mi memory, 100m CPU) where the pod settings set none;
    ``fail_job_exit_codes`` (with the default policy) end the Job without a restart."""
    template = pod_template(
        image=image,
        command=command,
        args=args,
        env=env or {},
        secret_env=secret_env or {},
        labels=labels,
        annotations=annotations,
        pod_settings=with_default_requests(pod_settings, ORCHESTRATOR_POD_DEFAULT_REQUESTS),
        service_account_name=service_account_name,
        grace_period_seconds=grace_period_seconds,
        image_pull_policy=image_pull_policy,
        privileged=privileged,
    )
    return _job(
        name=name,
        namespace=namespace,
        labels=labels,
        annotations=annotations,
        template=template,
        backoff_limit=backoff_limit,
        active_deadline_seconds=active_deadline_seconds,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        pod_failure_policy=pod_failure_policy or default_pod_failure_policy(fail_job_exit_codes),
        owners=[],
    )


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
    """An ``Opaque`` Secret holding the run-scoped token under ``key`` (as ``stringData``, or
    base64 ``data`` with ``base64_data``); ``owner`` garbage-collects it with its owner."""
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
        secret["data"] = {key: base64.b64encode(token.encode()).decode("ascii")}
    else:
        secret["stringData"] = {key: token}
    return secret


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
    """:func:`step_job` with everything else from ``settings`` (``pod_settings``: instead of
    the settings' own, e.g. after an allocation was applied)."""
    account = (
        settings.step_service_account
        if isinstance(settings, KubernetesOrchestratorSettings)
        else settings.service_account_name
    )
    return step_job(
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
        backoff_limit=step_backoff_limit(max_retries, settings.backoff_limit_margin),
        active_deadline_seconds=settings.active_deadline_seconds,
        ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
        pod_failure_policy=settings.pod_failure_policy,
        grace_period_seconds=settings.pod_stop_grace_period,
        owner=owner,
        image_pull_policy=settings.image_pull_policy,
        privileged=settings.privileged,
        owner_references=owner_references,
    )


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
    """:func:`orchestrator_job` with everything else from ``settings``."""
    return orchestrator_job(
        name=name,
        namespace=settings.namespace,
        image=settings.image or image,
        args=args,
        labels=labels,
        annotations=annotations,
        pod_settings=settings.orchestrator_pod_settings,
        service_account_name=settings.service_account_name,
        backoff_limit=settings.orchestrator_job_backoff_limit,
        active_deadline_seconds=settings.active_deadline_seconds,
        ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
        pod_failure_policy=settings.pod_failure_policy,
        grace_period_seconds=settings.pod_stop_grace_period,
        env=env,
        secret_env=secret_env,
        image_pull_policy=settings.image_pull_policy,
        privileged=settings.privileged,
        fail_job_exit_codes=fail_job_exit_codes,
    )


def cron_job_for(
    settings: KubernetesOrchestratorSettings,
    *,
    name: str,
    schedule: str,
    job: Mapping[str, Any],
    time_zone: str | None = None,
) -> dict[str, Any]:
    """:func:`cron_job` of ``job`` with the history limits, concurrency policy and starting
    deadline of ``settings`` (``time_zone``: an IANA name; None: the cluster's)."""
    return cron_job(
        name=name,
        schedule=schedule,
        job=job,
        namespace=settings.namespace,
        successful_jobs_history_limit=settings.successful_jobs_history_limit,
        failed_jobs_history_limit=settings.failed_jobs_history_limit,
        concurrency_policy=settings.concurrency_policy,
        starting_deadline_seconds=settings.starting_deadline_seconds,
        time_zone=time_zone,
    )
