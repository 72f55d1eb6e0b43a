"""The credential of a schedule's fired runs when the store is a workspace server.

Owns the submitting side (:func:`schedule_child_env`) and the fired side
(:func:`fire_scheduled_run`) of a schedule's token.

Invariants: the user's own key never goes to the cluster; a schedule token serves only to fire
the schedule's run (the server would refuse it otherwise); the REST store is imported only by
the two functions that use it, so a pod with a direct store connection does not import it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV
from wharf.core.enums import MetadataResourceType
from wharf.core.errors import InputError
from wharf.core.names import run_name
from wharf.execution.outages import retry_through_outage
from wharf.execution.services import utc_now
from wharf.integrations.kubernetes.orchestrator_launch import OrchestratorArgs
from wharf.store.models import ScheduleRecord
from wharf.store.ports import Store
from wharf.store.schedule_window import in_window

logger = logging.getLogger("wharf.kubernetes.orchestrator")

T = TypeVar("T")

CRON_JOB_KEY = "kubernetes_cronjob"
"""Run metadata key of the CronJob that fired a run (as a pod on a SQL store records it)."""


def schedule_child_env(
    store: Store, schedule: ScheduleRecord, child_env: Mapping[str, str]
) -> dict[str, str]:
    """``child_env`` for the pods ``schedule`` fires: on a workspace server, its credential
    replaced by a token of the schedule (issued now, to ``store``'s credential:
    ``POST /schedules/{id}/token``); else as is (a SQL store's pods need no token)."""
    env = dict(child_env)
    if SERVER_URL_ENV not in env and API_KEY_ENV not in env:
        return env
    from wharf.store.rest.schedule_tokens import issue_schedule_token
    from wharf.store.rest.store import RestStore

    if not isinstance(store, RestStore):
        raise InputError(
            "Scheduled runs on Kubernetes with a workspace server need the schedule recorded "
            "on that server (the store in use is not a workspace server)."
        )
    env[SERVER_URL_ENV] = store.url
    env[API_KEY_ENV] = issue_schedule_token(store, schedule.id)
    return env


def _token_type(credential: str) -> str | None:
    """A server token's ``typ`` claim, read without checking its signature (only the server
    can, and does on every request); None for any other credential."""
    parts = credential.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    kind = claims.get("typ") if isinstance(claims, dict) else None
    return kind if isinstance(kind, str) else None


def holds_schedule_token(environ: Mapping[str, str]) -> bool:
    """Whether this process's store credential is a workspace server's schedule token."""
    credential = environ.get(API_KEY_ENV)
    return credential is not None and _token_type(credential) == "schedule"


@dataclass(frozen=True)
class FiredRun:
    """What the orchestrator pod continues with once the schedule's run is fired."""

    args: OrchestratorArgs
    """Its command line naming the run, and its own Job (not the CronJob)."""
    store: Store
    """The store, authenticated with the run's token."""
    environ: dict[str, str]
    """Its environment, the run's token in place of the schedule's (for its step pods)."""


def fire_scheduled_run(
    store: Store,
    args: OrchestratorArgs,
    environ: Mapping[str, str],
    schedule_id: UUID,
    own_job: Mapping[str, Any],
    orchestrator_run_id: str,
    patience: float,
) -> FiredRun | None:
    """Fire the run of ``schedule_id`` for this pod's Job ``own_job`` with the schedule token
    ``store`` holds, and switch to that run's token (``store`` is closed then); None when the
    schedule fires nothing now (paused, or outside its start and end times).

    The server creates the run (``POST /schedules/{id}/runs``), recorded with the schedule,
    or finds the one an earlier pod of that Job created; the run token it gives back serves
    the pod's own store and its step pods' environment. From then on the pod is the
    orchestrator of an ordinary run. Each call to the server is repeated through an outage of
    up to ``patience`` seconds: a firing repeated after its answer was lost gets the run it
    created (the server finds it by ``orchestrator_run_id``), never a second one."""
    from wharf.store.rest.schedule_tokens import fire_schedule
    from wharf.store.rest.store import RestStore

    if not isinstance(store, RestStore):
        raise InputError("A schedule token works with a workspace server's store only.")

    def repeated(call: Callable[[], T], what: str) -> T:
        return retry_through_outage(
            call, what=what, patience=patience, clock=utc_now, sleep=time.sleep
        )

    schedule = repeated(lambda: store.schedules.get(schedule_id), "read the schedule")
    if not schedule.active:
        logger.warning("Schedule %s is paused: this firing runs nothing.", schedule.name)
        return None
    if not in_window(schedule, utc_now()):
        logger.warning(
            "Schedule %s fires only between its start and end times: this firing runs nothing.",
            schedule.name,
        )
        return None
    snapshot = repeated(lambda: store.snapshots.get(schedule.snapshot_id), "read the snapshot")
    name = run_name(snapshot.spec.name, utc_now())
    fired = repeated(
        lambda: fire_schedule(store, schedule.id, orchestrator_run_id, name),
        f"fire schedule {schedule.name}",
    )
    run_store = RestStore(store.url, fired.access_token)
    try:
        cron_jobs = [
            ref["name"]
            for ref in own_job["metadata"].get("ownerReferences") or []
            if ref.get("kind") == "CronJob"
        ]
        if cron_jobs:
            recorded = {CRON_JOB_KEY: cron_jobs[0]}
            repeated(
                lambda: run_store.run_metadata.add(
                    MetadataResourceType.PIPELINE_RUN, fired.run.id, recorded
                ),
                f"record the CronJob of run {fired.run.name}",
            )
    except BaseException:
        run_store.close()
        raise
    store.close()
    logger.info(
        "Schedule %s fired run %s (%s).",
        schedule.name,
        fired.run.name,
        "created" if fired.created else "created by an earlier pod of this Job",
    )
    return FiredRun(
        args=dataclasses.replace(
            args, run_id=fired.run.id, job_name=own_job["metadata"]["name"], token_secret=None
        ),
        store=run_store,
        environ={**environ, API_KEY_ENV: fired.access_token},
    )
