"""Creating a run's orchestrator Job and the run's Secret (the submitting side's API calls).

Owns :func:`create_orchestrator_job` and :func:`delete_token_secret` (the Secret's owner patch
and the deletes are ``owned_secret``'s, shared with the step operator's per-Job Secrets).

Invariants: a credential of the pod (``SECRET_ENV``) lives only in the run's Secret, read
through ``secretKeyRef``, never a plain value in the Job; the Secret exists before the Job and
is then owned by it; a failed submission leaves neither behind; every API failure is a one-line
:class:`WharfError` (:func:`cluster_call`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from kubernetes.client import ApiException

from wharf.core.errors import WharfError
from wharf.execution.run_loop import RunJob
from wharf.integrations.kubernetes.clients import KubeClients, cluster_call
from wharf.integrations.kubernetes.labels import run_annotations, run_labels
from wharf.integrations.kubernetes.manifests import (
    credentials_secret,
    orchestrator_job_for,
)
from wharf.integrations.kubernetes.orchestrator_launch import (
    RUN_ENDED_UNCOMPLETED,
    OrchestratorArgs,
    PodEnvironment,
    orchestrator_arguments,
    token_secret_name,
)
from wharf.integrations.kubernetes.owned_secret import (
    delete_job,
    delete_secret,
    delete_secret_quietly,
    own_secret_or_undo,
)
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings

__all__ = [
    "SubmittedJob",
    "create_orchestrator_job",
    "delete_job",
    "delete_token_secret",
    "orchestrator_manifest",
    "with_run_secret",
]

RUN_SECRET = "the run's Secret"


@dataclass(frozen=True)
class SubmittedJob:
    namespace: str
    name: str
    uid: str
    token_secret: str | None
    """The run's Secret created with it (None: the pod needs no credential)."""


def with_run_secret(
    args: OrchestratorArgs, environment: PodEnvironment, run_id: UUID
) -> OrchestratorArgs:
    """``args`` naming the run's Secret (``token_secret``) when the pod needs one: whenever
    ``environment`` holds a credential; ValueError when a Secret is named with none to hold."""
    if args.token_secret is None and environment.secrets:
        return replace(args, token_secret=token_secret_name(run_id))
    if args.token_secret is not None and not environment.secrets:
        raise ValueError("A run Secret is named but there is no credential to put in it.")
    return args


def orchestrator_manifest(
    settings: KubernetesOrchestratorSettings,
    job: RunJob,
    args: OrchestratorArgs,
    *,
    image: str,
    environment: PodEnvironment,
) -> dict[str, Any]:
    """The orchestrator Job of ``job``'s run, as :func:`create_orchestrator_job` creates it
    (its credentials read from the run's Secret: :func:`with_run_secret`)."""
    spec, run = job.snapshot.spec, job.run
    args = with_run_secret(args, environment, job.run.id)
    secret = args.token_secret
    return orchestrator_job_for(
        settings,
        name=args.job_name,
        image=image,
        args=orchestrator_arguments(args),
        labels=run_labels(spec.name, str(run.id), run.name),
        annotations=run_annotations(spec.name, str(run.id), run.name),
        env=environment.env,
        secret_env=environment.secret_env(secret) if secret is not None else {},
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
    """Create the run's Secret (when the pod needs a credential: :func:`with_run_secret`) and
    its orchestrator Job.

    The Secret holds each credential under its ``secret_key`` and, once the Job exists, is
    owned by it (garbage-collected with it, whatever happens to the run's processes). A Job
    that cannot be created (refused, or the API unreachable) leaves no Secret behind, and a
    Secret the Job cannot be made to own takes the Job away with it (the client then forgets
    the run, whose pod must not start)."""
    namespace = args.namespace
    args = with_run_secret(args, environment, job.run.id)
    manifest = orchestrator_manifest(settings, job, args, image=image, environment=environment)
    secret = args.token_secret
    if secret is not None:
        labels = run_labels(job.snapshot.spec.name, str(job.run.id), job.run.name)
        body = credentials_secret(
            name=secret, namespace=namespace, data=environment.secret_data(), labels=labels
        )
        create_secret: Any = clients.core.create_namespaced_secret  # a plain dict as the body
        replace_secret: Any = clients.core.replace_namespaced_secret
        with cluster_call(f"create the run's Secret {namespace}/{secret}"):
            try:
                create_secret(namespace, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                replace_secret(secret, namespace, body)  # a resubmission of the same run
    try:
        with cluster_call(f"create the orchestrator Job {namespace}/{args.job_name}"):
            create: Any = clients.batch.create_namespaced_job  # a plain dict as the body
            response: Any = create(namespace, manifest, _preload_content=False)
    except WharfError:
        if secret is not None:
            delete_secret_quietly(clients, namespace, secret, what=RUN_SECRET)
        raise
    created = json.loads(response.data)
    if secret is not None:  # collected with the Job, whatever happens to the run's processes
        # On failure the run is forgotten: its Job must not start it (both are deleted).
        own_secret_or_undo(clients, namespace, secret, created, what=RUN_SECRET)
    return SubmittedJob(
        namespace=namespace,
        name=created["metadata"]["name"],
        uid=created["metadata"].get("uid", ""),
        token_secret=secret,
    )


def delete_token_secret(clients: KubeClients, namespace: str, name: str) -> bool:
    """Delete the run's Secret; whether it existed."""
    return delete_secret(clients, namespace, name, what=RUN_SECRET)
