"""The credential of a schedule's fired runs on a workspace server, without a cluster: the
submitter's environment gets a schedule token instead of its own credential, and a fired pod's
firing switches it to its run's token (a real server: the server tests' ``world``; the pod's Job
is the manifest a CronJob's Job has, as data)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest

from tests.server.conftest import (  # noqa: F401 (fixtures)
    World,
    live,
    world,
)
from tests.store.conftest import spec
from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV
from wharf.core.enums import MetadataResourceType
from wharf.core.errors import InputError
from wharf.execution.services import run_token_scope
from wharf.integrations.kubernetes.orchestrator_launch import OrchestratorArgs
from wharf.integrations.kubernetes.schedule_credentials import (
    fire_scheduled_run,
    holds_schedule_token,
    schedule_child_env,
)
from wharf.store.models import RunFilter, ScheduleCreate, ScheduleRecord, SnapshotCreate
from wharf.store.rest.store import RestStore

PATIENCE = 30.0
"""Seconds a pod's firing rides out an outage of the server."""


def schedule_of(server: World) -> ScheduleRecord:
    store = server.stores.store
    pipeline = store.pipelines.get_or_create(server.a.id, "nightly")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=server.a.id, pipeline_id=pipeline.id, spec=spec())
    )
    return store.schedules.create(
        ScheduleCreate(
            project_id=server.a.id,
            pipeline_id=pipeline.id,
            snapshot_id=snapshot.id,
            name="every-five",
            cron_expression="*/5 * * * *",
        )
    )


def fired_job(name: str = "wharf-nightly-29481234") -> dict[str, Any]:
    """A Job as a CronJob creates it (its pod finds it through its owner reference)."""
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid4()),
            "ownerReferences": [{"kind": "CronJob", "name": "wharf-every-five-1234abcd"}],
        }
    }


def cron_args(schedule: ScheduleRecord) -> OrchestratorArgs:
    return OrchestratorArgs(
        snapshot_id=schedule.snapshot_id,
        run_id=None,
        namespace="default",
        job_name="wharf-every-five-1234abcd",
        settings_json="{}",
        token_secret=None,
    )


def test_a_sql_stores_environment_is_kept_as_it_is(world: World) -> None:  # noqa: F811
    env = {"WHARF_STORE_URL": "sqlite:////data/wharf.db", "WHARF_PROJECT": "A"}
    assert schedule_child_env(world.stores.store, schedule_of(world), env) == env
    assert not holds_schedule_token(env)


def test_the_fired_pods_get_a_schedule_token_instead_of_the_submitters_credential(
    world: World,  # noqa: F811 (the fixture)
) -> None:
    schedule = schedule_of(world)
    member = str(world.credentials["member"])
    submitted = {SERVER_URL_ENV: world.url, API_KEY_ENV: member, "WHARF_PROJECT": "A"}
    with RestStore(world.url, member) as store:
        env = schedule_child_env(store, schedule, submitted)
    assert env[API_KEY_ENV] != member and env["WHARF_PROJECT"] == "A"
    assert env[SERVER_URL_ENV] == world.url
    assert holds_schedule_token(env) and not holds_schedule_token(submitted)
    # A SQL store cannot issue one for a server's environment: refused, never passed on.
    with pytest.raises(InputError, match="workspace server"):
        schedule_child_env(world.stores.store, schedule, submitted)


def test_a_firing_switches_the_pod_to_its_runs_token(world: World) -> None:  # noqa: F811
    schedule = schedule_of(world)
    with RestStore(world.url, str(world.credentials["member"])) as submitter:
        env = schedule_child_env(submitter, schedule, {SERVER_URL_ENV: world.url})
    job = fired_job()
    run_id = f"kubernetes-{job['metadata']['uid']}"
    fired = fire_scheduled_run(
        RestStore(world.url, env[API_KEY_ENV]),
        cron_args(schedule),
        env,
        schedule.id,
        job,
        run_id,
        PATIENCE,
    )
    assert fired is not None
    try:
        run_uuid = fired.args.run_id
        assert isinstance(run_uuid, UUID)
        assert fired.args.job_name == "wharf-nightly-29481234" and fired.args.token_secret is None
        assert run_token_scope(fired.environ[API_KEY_ENV]) == run_uuid
        run = fired.store.runs.get(run_uuid)  # the run token reads its run
        assert run.orchestrator_run_id == run_id and run.is_placeholder
        pipeline = world.stores.store.snapshots.get(schedule.snapshot_id).spec.name
        assert run.name.startswith(f"{pipeline}-")  # named as a SQL store's pod names it
        records = fired.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run_uuid)
        assert {m.key: m.value for m in records} == {
            "schedule_id": str(schedule.id),
            "schedule_name": "every-five",
            "kubernetes_cronjob": "wharf-every-five-1234abcd",
        }
    finally:
        fired.store.close()
    # A second pod of the same Job finds that run again.
    again = fire_scheduled_run(
        RestStore(world.url, env[API_KEY_ENV]),
        cron_args(schedule),
        env,
        schedule.id,
        job,
        run_id,
        PATIENCE,
    )
    assert again is not None
    again.store.close()
    assert again.args.run_id == run_uuid


def test_a_paused_schedule_fires_nothing(world: World) -> None:  # noqa: F811
    schedule = schedule_of(world)
    with RestStore(world.url, str(world.credentials["member"])) as submitter:
        env = schedule_child_env(submitter, schedule, {SERVER_URL_ENV: world.url})
    world.stores.store.schedules.set_active(schedule.id, False)
    job = fired_job()
    with RestStore(world.url, env[API_KEY_ENV]) as pod:
        fired = fire_scheduled_run(pod, cron_args(schedule), env, schedule.id, job, "k-1", PATIENCE)
        assert fired is None
    assert world.stores.store.runs.list(RunFilter(snapshot_id=schedule.snapshot_id)).total == 0
