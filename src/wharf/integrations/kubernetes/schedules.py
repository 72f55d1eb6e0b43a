"""A schedule on Kubernetes: one ``batch/v1`` CronJob per recorded schedule.

Owns which schedules Kubernetes can fire (:func:`check_schedulable`), the CronJob and its Secret
(:func:`schedule_cron_job`), the orchestrator pod's ``--schedule-id`` argument, and the API calls
that create, suspend, resume and delete them.

Invariants: a schedule's CronJob carries ``wharf.io/schedule-id`` and is found by that label,
never by name alone; ``spec.suspend`` is ``not schedule.active`` and applying a schedule again is
idempotent; a credential of the fired pods lives only in the schedule's Secret (on a workspace
server a token of the schedule, never the user's: ``schedule_credentials``); every failure
talking to the cluster is a one-line :class:`WharfError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from kubernetes.client import ApiException

from wharf.config.settings import Schedule
from wharf.core.errors import InputError, WharfError
from wharf.integrations.kubernetes.clients import KubeClients, cluster_call
from wharf.integrations.kubernetes.labels import (
    CRONJOB_NAME_MAX,
    label_value,
    resource_name,
    run_annotations,
    run_labels,
)
from wharf.integrations.kubernetes.manifests import (
    check_cron_schedule,
    credentials_secret,
    cron_job_for,
    orchestrator_job_for,
    owner_reference,
)
from wharf.integrations.kubernetes.orchestrator_launch import (
    DEFAULT_JOB_PREFIX,
    RUN_ENDED_UNCOMPLETED,
    OrchestratorArgs,
    PodEnvironment,
    orchestrator_arguments,
)
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.store.models import ScheduleRecord, SnapshotRecord

SCHEDULE_ID_KEY = "wharf.io/schedule-id"
SCHEDULE_NAME_KEY = "wharf.io/schedule-name"
"""Label (id, sanitised name) and annotation (full name) keys of a schedule's objects."""
SCHEDULE_ID_OPTION = "--schedule-id"
"""The orchestrator pod's argument naming the schedule that fired it (no ``--run-id`` then)."""
UNSUPPORTED = (
    "Kubernetes schedules need cron_expression; interval_seconds and run_once_start_time are "
    "not supported"
)


def check_schedulable(pipeline: str, schedule: Schedule) -> None:
    """InputError unless Kubernetes can fire ``schedule`` (a cron expression it takes, no
    catch-up; start and end times are checked by the fired pod:
    ``wharf.store.schedule_window.in_window``)."""
    if schedule.cron_expression is None:
        raise InputError(f"Pipeline '{pipeline}': {UNSUPPORTED}.")
    if schedule.catchup:
        raise InputError(
            f"Pipeline '{pipeline}': Kubernetes CronJobs do not catch up on missed runs "
            "(catchup=True is not supported; the orchestrator's starting_deadline_seconds "
            "bounds how late a run may start)."
        )
    check_cron_schedule(schedule.cron_expression)


def cron_job_name(prefix: str | None, schedule: ScheduleRecord) -> str:
    """The schedule's CronJob name: prefix, schedule name and 8 hex digits of its id (so two
    projects' schedules of one name never share a CronJob)."""
    return resource_name(
        prefix or DEFAULT_JOB_PREFIX,
        schedule.name,
        schedule.id.hex[:8],
        max_length=CRONJOB_NAME_MAX,
    )


def schedule_secret_name(cron_job: str) -> str:
    """The Secret of the schedule whose CronJob is named ``cron_job``."""
    return f"{cron_job}-env"


def schedule_selector(schedule_id: UUID) -> str:
    return f"{SCHEDULE_ID_KEY}={schedule_id}"


def scheduled_arguments(args: OrchestratorArgs, schedule_id: UUID) -> list[str]:
    """The orchestrator container's arguments for runs fired by schedule ``schedule_id``."""
    return [*orchestrator_arguments(args), SCHEDULE_ID_OPTION, str(schedule_id)]


def split_schedule_id(argv: Sequence[str]) -> tuple[UUID | None, list[str]]:
    """The ``--schedule-id`` of an orchestrator command line (None: a manual run) and the
    other arguments; ValueError for a malformed id or a missing value."""
    rest = list(argv)
    if SCHEDULE_ID_OPTION not in rest:
        return None, rest
    at = rest.index(SCHEDULE_ID_OPTION)
    if at + 1 >= len(rest):
        raise ValueError(f"{SCHEDULE_ID_OPTION} needs a value.")
    schedule_id = UUID(rest[at + 1])
    del rest[at : at + 2]
    return schedule_id, rest


@dataclass(frozen=True)
class ScheduleObjects:
    """What a schedule is on the cluster, as :func:`apply_cron_job` creates it."""

    cron_job: dict[str, Any]
    secret: dict[str, Any] | None
    """The fired pods' credentials (None: they need none)."""


def schedule_cron_job(
    settings: KubernetesOrchestratorSettings,
    snapshot: SnapshotRecord,
    schedule: ScheduleRecord,
    *,
    image: str,
    environment: PodEnvironment,
) -> ScheduleObjects:
    """The schedule's CronJob and Secret: the CronJob's ``jobTemplate`` is the orchestrator Job
    of a manual run (``orchestrator_submit.orchestrator_manifest``: same builder and settings)
    whose pod gets the snapshot and the schedule id instead of a run, and its credentials from
    the schedule's Secret."""
    if schedule.cron_expression is None:
        raise InputError(f"Schedule '{schedule.name}': {UNSUPPORTED}.")
    name = cron_job_name(settings.job_name_prefix, schedule)
    pipeline = snapshot.spec.name
    args = OrchestratorArgs(
        snapshot_id=snapshot.id,
        run_id=None,
        namespace=settings.namespace,
        job_name=name,  # the CronJob: each fired pod finds its own Job through its pod
        settings_json=settings.model_dump_json(exclude_defaults=True),
        token_secret=None,
    )
    labels = {**run_labels(pipeline), SCHEDULE_ID_KEY: str(schedule.id)}
    labels[SCHEDULE_NAME_KEY] = label_value(schedule.name)
    annotations = {**run_annotations(pipeline), SCHEDULE_ID_KEY: str(schedule.id)}
    annotations[SCHEDULE_NAME_KEY] = schedule.name
    secret_name = schedule_secret_name(name)
    job = orchestrator_job_for(
        settings,
        name=name,
        image=image,
        args=scheduled_arguments(args, schedule.id),
        labels=labels,
        annotations=annotations,
        env=environment.env,
        secret_env=environment.secret_env(secret_name),
        fail_job_exit_codes=(RUN_ENDED_UNCOMPLETED,),
    )
    cron = cron_job_for(
        settings,
        name=name,
        schedule=schedule.cron_expression,
        job=job,
        suspend=not schedule.active,
    )
    secret = None
    if environment.secrets:
        secret = credentials_secret(
            name=secret_name,
            namespace=settings.namespace,
            data=environment.secret_data(),
            labels=labels,
            annotations=annotations,
        )
    return ScheduleObjects(cron_job=cron, secret=secret)


# ----------------------------------------------------------------------------- API calls


def apply_cron_job(clients: KubeClients, objects: ScheduleObjects) -> None:
    """Create the schedule's Secret and CronJob, or replace those of that name (the same
    schedule applied again); the Secret first (the fired pods read it), then owned by the
    CronJob. A CronJob that cannot be created leaves no new Secret behind."""
    secret = objects.secret
    created_secret = secret is not None and _put_secret(clients, secret)
    try:
        cron_job = _put_cron_job(clients, objects.cron_job)
    except WharfError:
        if created_secret and secret is not None:
            _delete_secret(clients, secret["metadata"]["namespace"], secret["metadata"]["name"])
        raise
    if secret is not None:  # collected with the CronJob, whatever else happens
        namespace, name = secret["metadata"]["namespace"], secret["metadata"]["name"]
        owned = {"metadata": {"ownerReferences": [owner_reference(cron_job)]}}
        with cluster_call(f"let the CronJob own the schedule's Secret {namespace}/{name}"):
            clients.core.patch_namespaced_secret(name, namespace, owned)


def _put_secret(clients: KubeClients, secret: dict[str, Any]) -> bool:
    """Create ``secret`` or replace the one of its name; whether it was created."""
    namespace, name = secret["metadata"]["namespace"], secret["metadata"]["name"]
    create: Any = clients.core.create_namespaced_secret  # a plain dict as the body
    replace: Any = clients.core.replace_namespaced_secret
    with cluster_call(f"create the schedule's Secret {namespace}/{name}"):
        try:
            create(namespace, secret)
            return True
        except ApiException as exc:
            if exc.status != 409:
                raise
        replace(name, namespace, secret)
    return False


def _put_cron_job(clients: KubeClients, manifest: dict[str, Any]) -> dict[str, Any]:
    """Create the CronJob, or replace the one of that name; the CronJob as the API has it."""
    namespace = manifest["metadata"]["namespace"]
    name = manifest["metadata"]["name"]
    create: Any = clients.batch.create_namespaced_cron_job  # a plain dict as the body
    replace: Any = clients.batch.replace_namespaced_cron_job
    with cluster_call(f"create the CronJob {namespace}/{name}"):
        try:
            response: Any = create(namespace, manifest, _preload_content=False)
            created: dict[str, Any] = json.loads(response.data)
            return created
        except ApiException as exc:
            if exc.status != 409:
                raise
        response = clients.batch.read_namespaced_cron_job(name, namespace, _preload_content=False)
        existing = json.loads(response.data)
        body = json.loads(json.dumps(manifest))
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        response = replace(name, namespace, body, _preload_content=False)
        replaced: dict[str, Any] = json.loads(response.data)
        return replaced


def _delete_secret(clients: KubeClients, namespace: str, name: str) -> None:
    with cluster_call(f"delete the schedule's Secret {namespace}/{name}"):
        try:
            clients.core.delete_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise


def schedule_cron_jobs(clients: KubeClients, namespace: str, schedule_id: UUID) -> list[str]:
    """The names of the CronJobs of schedule ``schedule_id`` in ``namespace``."""
    with cluster_call(f"list the CronJobs of schedule {schedule_id} in {namespace}"):
        response: Any = clients.batch.list_namespaced_cron_job(
            namespace, label_selector=schedule_selector(schedule_id), _preload_content=False
        )
    return [item["metadata"]["name"] for item in json.loads(response.data)["items"]]


def suspend_cron_jobs(
    clients: KubeClients, namespace: str, schedule_id: UUID, suspend: bool
) -> list[str]:
    """Set ``spec.suspend`` of the schedule's CronJobs (a merge patch); their names."""
    names = schedule_cron_jobs(clients, namespace, schedule_id)
    for name in names:
        with cluster_call(f"{'suspend' if suspend else 'resume'} the CronJob {namespace}/{name}"):
            clients.batch.patch_namespaced_cron_job(
                name,
                namespace,
                {"spec": {"suspend": suspend}},
                _content_type="application/merge-patch+json",
            )
    return names


def delete_cron_jobs(clients: KubeClients, namespace: str, schedule_id: UUID) -> list[str]:
    """Delete the schedule's CronJobs (Background propagation: its Jobs go with it, a run in
    flight included) and their Secrets (by name: no ``list`` of Secrets needed); the names of
    the CronJobs that existed."""
    deleted = []
    for name in schedule_cron_jobs(clients, namespace, schedule_id):
        with cluster_call(f"delete the CronJob {namespace}/{name}"):
            try:
                clients.batch.delete_namespaced_cron_job(
                    name, namespace, propagation_policy="Background"
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                continue
        deleted.append(name)
        _delete_secret(clients, namespace, schedule_secret_name(name))
    return deleted
