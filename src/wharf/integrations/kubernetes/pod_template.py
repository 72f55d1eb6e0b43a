"""The pod template of Wharf's Jobs: one container ``main``, pod settings applied.

Owns :func:`pod_template` (a Job's ``spec.template``), :func:`env_entries` and :func:`pruned`.

Invariants: pure, sharing no mutable container with the inputs; ``restartPolicy`` is ``Never``;
Wharf's own labels, annotations and env vars win over pod settings' entries of the same name,
and the pod settings' service account wins over the one given; empty fields are left out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from wharf.integrations.kubernetes.job_spec import JobSpec, SecretEnv
from wharf.integrations.kubernetes.settings import KubernetesPodSettings

__all__ = ["MAIN_CONTAINER", "SecretEnv", "env_entries", "pod_template", "pruned"]

MAIN_CONTAINER = "main"


def env_entries(
    env: Mapping[str, str],
    secret_env: SecretEnv,
    pod_env: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Container env: pod settings' entries (unless Wharf sets the same name), then literal
    values, then values read from Secrets (``secretKeyRef``)."""
    ours = set(env) | set(secret_env)
    entries = [copy.deepcopy(dict(entry)) for entry in pod_env if entry.get("name") not in ours]
    entries += [{"name": name, "value": str(value)} for name, value in env.items()]
    entries += [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for name, (secret, key) in secret_env.items()
        if name not in env
    ]
    return entries


def pruned(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """``mapping`` without None and empty values (the API omits them)."""
    return {key: value for key, value in mapping.items() if value not in (None, {}, [], "")}


def pod_template(spec: JobSpec) -> dict[str, Any]:
    """The ``spec.template`` of ``spec``'s Job (``restartPolicy: Never``: a Job retries by
    starting a new pod). The pod settings' service account wins over ``spec``'s, being the
    more specific setting; empty fields are left out, as the API server's own encoding leaves
    them out."""
    pod = spec.pod_settings or KubernetesPodSettings()
    container = pruned(
        {
            "name": MAIN_CONTAINER,
            "image": spec.image,
            "imagePullPolicy": spec.image_pull_policy,
            "command": list(spec.command),
            "args": list(spec.args),
            "env": env_entries(spec.env, spec.secret_env, pod.env),
            "envFrom": copy.deepcopy(pod.env_from),
            "resources": copy.deepcopy(pruned(pod.resources)),
            "volumeMounts": copy.deepcopy(pod.volume_mounts),
            "securityContext": {"privileged": True} if spec.privileged else None,
        }
    )
    pod_spec = pruned(
        {
            "restartPolicy": "Never",
            "containers": [container],
            "terminationGracePeriodSeconds": spec.grace_period_seconds,
            "serviceAccountName": pod.service_account_name or spec.service_account_name,
            "nodeSelector": dict(pod.node_selectors),
            "affinity": copy.deepcopy(pod.affinity),
            "tolerations": copy.deepcopy(pod.tolerations),
            "volumes": copy.deepcopy(pod.volumes),
            "imagePullSecrets": [{"name": name} for name in pod.image_pull_secrets],
        }
    )
    metadata = pruned(
        {
            "labels": {**pod.labels, **spec.labels},
            "annotations": {**pod.annotations, **spec.annotations},
        }
    )
    return {"metadata": metadata, "spec": pod_spec}
