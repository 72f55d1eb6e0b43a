"""Creating a run's orchestrator Job and its run token Secret (the submitting side's API calls).

Invariants: the Secret exists before the Job that refers to it, and is then owned by the Job
(garbage-collected with it, whatever happens to the run's processes); a Job that cannot be
created leaves no Secret behind; the Secret holds the run token under ``TOKEN_SECRET_KEY`` and
the Job's pod reads it through ``secretKeyRef`` (never as a plain value in the Job). An API
refusal becomes a one-line :class:`WharfError` naming the object, the namespace and the
server's message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiException

from wharf.config.global_config import API_KEY_ENV
from wharf.core.errors import WharfError
from wharf.execution.run_loop import RunJob
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.labels import run_annotations, run_labels
from wharf.integrations.kubernetes.manifests import (
    orchestrator_job_for,
    owner_reference,
    run_token_secret,
)
from wharf.integrations.kubernetes.orchestrator_launch import (
    RUN_ENDED_UNCOMPLETED,
    TOKEN_SECRET_KEY,
    OrchestratorArgs,
    PodEnvironment,
    orchestrator_arguments,
)
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings


@dataclass(frozen=True)
class SubmittedJob:
    namespace: str
    name: str
    uid: str
    token_secret: str | None
    """The run token Secret created with it (None: the store needs no token)."""


def orchestrator_manifest(
    settings: KubernetesOrchestratorSettings,
    job: RunJob,
    args: OrchestratorArgs,
    *,
    image: str,
    environment: PodEnvironment,
) -> dict[str, Any]:
    """The orchestrator Job of ``job``'s run, as :func:`create_orchestrator_job` creates it."""
    spec, run = job.snapshot.spec, job.run
    secret_env = {}
    if args.token_secret is not None:
        secret_env[API_KEY_ENV] = (args.token_secret, TOKEN_SECRET_KEY)
    return orchestrator_job_for(
        settings,
        name=args.job_name,
        image=image,
        args=orchestrator_arguments(args),
        labels=run_labels(spec.name, str(run.id), run.name),
        annotations=run_annotations(spec.name, str(run.id), run.name),
        env=environment.env,
        secret_env=secret_env,
        fail_job_exit_codes=(RUN_ENDED_UNCOMPLETED,),
    )


def create_orchestrator_job(
    clients: KubeClients,
    settings: KubernetesOrchestratorSettings,
    job: RunJob,
    args: OrchestratorArgs,
    *,
    image: str,
    environment: PodEnvironment,
) -> SubmittedJob:
    """Create the run's token Secret (when ``args`` names one) and its orchestrator Job."""
    namespace = args.namespace
    manifest = orchestrator_manifest(settings, job, args, image=image, environment=environment)
    secret = args.token_secret
    if secret is not None:
        if environment.token is None:
            raise ValueError("A token Secret is named but there is no token to put in it.")
        labels = run_labels(job.snapshot.spec.name, str(job.run.id), job.run.name)
        body = run_token_secret(
            name=secret, namespace=namespace, token=environment.token, labels=labels
        )
        create_secret: Any = clients.core.create_namespaced_secret  # a plain dict as the body
        replace_secret: Any = clients.core.replace_namespaced_secret
        try:
            create_secret(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise api_error(exc, f"create the run token Secret {namespace}/{secret}") from None
            replace_secret(secret, namespace, body)  # a resubmission of the same run
    try:
        create: Any = clients.batch.create_namespaced_job  # a plain dict as the body
        response: Any = create(namespace, manifest, _preload_content=False)
    except ApiException as exc:
        if secret is not None:
            delete_token_secret(clients, namespace, secret)
        raise api_error(exc, f"create the orchestrator Job {namespace}/{args.job_name}") from None
    created = json.loads(response.data)
    if secret is not None:  # collected with the Job, whatever happens to the run's processes
        owned = {"metadata": {"ownerReferences": [owner_reference(created)]}}
        try:
            clients.core.patch_namespaced_secret(secret, namespace, owned)
        except ApiException as exc:
            raise api_error(exc, f"let the Job own the run token Secret {secret}") from None
    return SubmittedJob(
        namespace=namespace,
        name=created["metadata"]["name"],
        uid=created["metadata"].get("uid", ""),
        token_secret=secret,
    )


def delete_token_secret(clients: KubeClients, namespace: str, name: str) -> bool:
    """Delete the run token Secret; whether it existed."""
    try:
        clients.core.delete_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise api_error(exc, f"delete the run token Secret {namespace}/{name}") from None
    return True


def delete_job(clients: KubeClients, namespace: str, name: str) -> bool:
    """Delete a Job and its pods (background propagation); whether it existed."""
    try:
        clients.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise api_error(exc, f"delete the Job {namespace}/{name}") from None
    return True


def api_error(exc: ApiException, action: str) -> WharfError:
    """A one-line error for an API refusal: what could not be done, and the server's reason."""
    message = exc.reason or "refused"
    try:
        body = json.loads(exc.body or "{}")
        message = body.get("message") or message
    except (TypeError, ValueError):
        pass
    return WharfError(f"Cannot {action} (HTTP {exc.status}): {message}")
