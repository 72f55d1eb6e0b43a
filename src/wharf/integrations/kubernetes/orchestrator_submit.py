"""Creating a run's orchestrator Job and the run's Secret (the submitting side's API calls).

Owns :func:`create_orchestrator_job`, :func:`delete_token_secret`, :class:`JobMayExistError` and
:func:`kept_for_its_job` (the Secret's owner patch and the deletes are ``owned_secret``'s,
shared with the step operator's per-Job Secrets).

Invariants: a credential of the pod (``SECRET_ENV``) lives only in the run's Secret, read
through ``secretKeyRef``, never a plain value in the Job; the Secret exists before the Job and
is then owned by it; a failed submission leaves neither behind; every API failure is a one-line
:class:`WharfError` (:func:`cluster_call`). A create whose failure does not tell whether it was
applied (its answer lost, a server error) is settled by reading the Job back by its name,
chosen before the create: there, it is the run's; not there, the create failed; unreadable,
:class:`JobMayExistError` (the run must be kept, and its Secret).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from kubernetes.client import ApiException
from urllib3.exceptions import ConnectTimeoutError, HTTPError, MaxRetryError

from wharf.core.errors import WharfError
from wharf.execution.run_loop import RunJob
from wharf.integrations.kubernetes.clients import KubeClients, cluster_call
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, run_annotations, run_labels
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
from wharf.store.models import PipelineRunRecord

__all__ = [
    "JobMayExistError",
    "SubmittedJob",
    "create_orchestrator_job",
    "delete_job",
    "delete_token_secret",
    "kept_for_its_job",
    "orchestrator_manifest",
    "with_run_secret",
]

logger = logging.getLogger(__name__)

RUN_SECRET = "the run's Secret"
NOT_FOUND = 404


class JobMayExistError(WharfError):
    """The orchestrator Job's create failed without telling whether the Job was made, and it
    could not be read back: it may exist and run the run, which must be kept (the message says
    so, and how to check and stop it)."""


def kept_for_its_job(what: str, namespace: str, job_name: str, run_name: str) -> str:
    """The line saying that run ``run_name`` is kept since its Job may exist; ``what``: what
    happened, e.g. ``Interrupted while creating the orchestrator Job NS/JOB of run RUN``."""
    return (
        f"{what}: the Job may exist and run it, so the run is kept (`kubectl -n {namespace} "
        f"get job {job_name}` tells; `wharf runs stop --force {run_name}` ends the run and "
        "deletes its Job if there is one)."
    )


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
        created = _create_job(clients, namespace, args.job_name, manifest, job.run)
    except JobMayExistError:
        raise  # its Secret stays: the Job may need it
    except WharfError:
        if secret is not None:
            delete_secret_quietly(clients, namespace, secret, what=RUN_SECRET)
        raise
    if secret is not None:  # collected with the Job, whatever happens to the run's processes
        # On failure the run is forgotten: its Job must not start it (both are deleted).
        own_secret_or_undo(clients, namespace, secret, created, what=RUN_SECRET)
    return SubmittedJob(
        namespace=namespace,
        name=created["metadata"]["name"],
        uid=created["metadata"].get("uid", ""),
        token_secret=secret,
    )


def _create_job(
    clients: KubeClients,
    namespace: str,
    name: str,
    manifest: dict[str, Any],
    run: PipelineRunRecord,
) -> dict[str, Any]:
    """Create the orchestrator Job ``name``; the Job as the API has it. A failure that may
    have come after the Job was made (:func:`_maybe_applied`) is settled by reading it back:
    there (and the run's), it is the Job; not there, the failure is raised (a one-line
    :class:`WharfError`); unreadable, :class:`JobMayExistError`."""
    action = f"create the orchestrator Job {namespace}/{name}"
    with cluster_call(action):
        create: Any = clients.batch.create_namespaced_job  # a plain dict as the body
        try:
            response: Any = create(namespace, manifest, _preload_content=False)
        except (ApiException, HTTPError) as exc:
            if not _maybe_applied(exc):
                raise
            found = _read_back(clients, namespace, name, run, exc)
            if found is None:
                raise
            return found
        return dict(json.loads(response.data))


def _maybe_applied(exc: ApiException | HTTPError) -> bool:
    """Whether a failed create may have been applied all the same: its answer was lost (the
    connection cut or timed out once the request was sent) or the server failed (5xx). A
    refusal (4xx) or a connection never made says it was not."""
    if isinstance(exc, ApiException):
        return exc.status is not None and exc.status >= 500
    cause = exc.reason if isinstance(exc, MaxRetryError) else exc
    return not isinstance(cause, ConnectTimeoutError)  # NewConnectionError included


def _read_back(
    clients: KubeClients,
    namespace: str,
    name: str,
    run: PipelineRunRecord,
    failure: ApiException | HTTPError,
) -> dict[str, Any] | None:
    """The Job ``name`` of ``run`` if its create, which failed with ``failure``, made it after
    all; None if there is no such Job. Raises :class:`JobMayExistError` if it cannot be read."""
    if isinstance(failure, ApiException):
        why = f"HTTP {failure.status} {failure.reason}"
    else:
        why = " ".join(str(getattr(failure, "reason", None) or failure).split())
    try:
        with cluster_call(f"read back the orchestrator Job {namespace}/{name}"):
            try:
                response: Any = clients.batch.read_namespaced_job(
                    name, namespace, _preload_content=False
                )
            except ApiException as exc:
                if exc.status == NOT_FOUND:
                    return None
                raise
    except WharfError as exc:
        what = (
            f"The create of the orchestrator Job {namespace}/{name} of run {run.name} failed "
            f"without saying whether it was made ({why}), and reading it back failed too "
            f"({exc})"
        )
        raise JobMayExistError(kept_for_its_job(what, namespace, name, run.name)) from None
    found = dict(json.loads(response.data))
    if found.get("metadata", {}).get("labels", {}).get(RUN_ID_KEY) != str(run.id):
        return None  # not this run's: the create cannot have made it
    logger.warning(
        "The create of the orchestrator Job %s/%s failed without saying whether it was made "
        "(%s); the orchestrator Job %s/%s exists: the run goes on with it.",
        namespace,
        name,
        why,
        namespace,
        name,
    )
    return found


def delete_token_secret(clients: KubeClients, namespace: str, name: str) -> bool:
    """Delete the run's Secret; whether it existed."""
    return delete_secret(clients, namespace, name, what=RUN_SECRET)
