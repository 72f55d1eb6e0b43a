"""A scheduled Job's pod creates (or fires) its run through a lost answer and a short outage,
once: the run is created under an id chosen from the Job's, and every call is repeated through
the outage, so a repeat gets the run written and another pod of the Job finds it.

A real server (the server tests' ``world``) behind the balancer of :mod:`tests.faults.balancer`,
whose hook loses answers after the server wrote them; the pod's Job is the manifest a CronJob's
Job has, as data (no cluster: the pod's own functions, as ``orchestrator_main`` calls them).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.faults.balancer import Balancer
from tests.integrations.kubernetes.test_schedule_credentials import (
    PATIENCE,
    cron_args,
    fired_job,
    schedule_of,
)
from tests.server.conftest import (  # noqa: F401 (fixtures)
    World,
    live,
    world,
)
from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV
from wharf.core.enums import MetadataResourceType
from wharf.integrations.kubernetes.orchestrator_main import (
    SCHEDULE_ID_KEY,
    job_run_id,
    job_run_uuid,
    scheduled_run,
)
from wharf.integrations.kubernetes.schedule_credentials import (
    fire_scheduled_run,
    schedule_child_env,
)
from wharf.store.models import RunFilter
from wharf.store.rest.store import RestStore

LOST = 3
"""Answers lost in a row: the first after the server's commit, the next in an outage."""


@pytest.fixture
def balancer(world: World) -> Iterator[Balancer]:  # noqa: F811 (the fixture)
    with Balancer([urlsplit(world.url).netloc]) as opened:
        yield opened


def lose_answers(balancer: Balancer, method: str, path: str) -> list[str]:
    """Lose the first answer to ``method path`` and the answers to the next requests, whatever
    they are (the server gone a while): :data:`LOST` in all; the list of those lost."""
    lost: list[str] = []

    def hook(asked: str, asked_path: str, upstream: str) -> bool:
        if len(lost) >= LOST or (not lost and (asked, asked_path) != (method, path)):
            return False
        lost.append(f"{asked} {asked_path}")
        return True

    balancer.on_answered = hook
    return lost


def test_a_firing_whose_answers_are_lost_fires_one_run(
    world: World,  # noqa: F811 (the fixture)
    balancer: Balancer,
) -> None:
    schedule = schedule_of(world)
    with RestStore(world.url, str(world.credentials["member"])) as submitter:
        env = schedule_child_env(submitter, schedule, {SERVER_URL_ENV: balancer.url})
    job = fired_job()
    lost = lose_answers(balancer, "POST", f"/api/v1/schedules/{schedule.id}/runs")
    pod = RestStore(balancer.url, env[API_KEY_ENV])
    fired = fire_scheduled_run(
        pod, cron_args(schedule), env, schedule.id, job, job_run_id(job), PATIENCE
    )
    assert fired is not None
    fired.store.close()
    assert len(lost) == LOST
    runs = world.stores.store.runs.list(RunFilter(snapshot_id=schedule.snapshot_id)).items
    assert [r.id for r in runs] == [fired.args.run_id]  # one run: the repeats found it
    assert runs[0].orchestrator_run_id == job_run_id(job)


def test_a_pods_run_creation_whose_answers_are_lost_creates_one_run(
    world: World,  # noqa: F811 (the fixture)
    balancer: Balancer,
) -> None:
    """A pod holding an account's key (no schedule token) creates the run itself."""
    schedule = schedule_of(world)
    snapshot = world.stores.store.snapshots.get(schedule.snapshot_id)
    job = fired_job()
    lost = lose_answers(balancer, "POST", "/api/v1/runs")
    with RestStore(balancer.url, str(world.credentials["member"])) as pod:
        run = scheduled_run(pod, snapshot, schedule.id, job, PATIENCE)
    assert run is not None and len(lost) == LOST
    runs = world.stores.store.runs.list(RunFilter(snapshot_id=schedule.snapshot_id)).items
    assert [r.id for r in runs] == [run.id]
    assert run.orchestrator_run_id == job_run_id(job) and run.is_placeholder
    records = world.stores.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    assert {m.key: m.value for m in records}[SCHEDULE_ID_KEY] == str(schedule.id)


def test_every_pod_of_a_job_gets_the_run_under_the_id_chosen_from_the_jobs(
    world: World,  # noqa: F811 (the fixture)
) -> None:
    store = world.stores.store  # a SQL store, as a pod opens it directly: ids kept as chosen
    schedule = schedule_of(world)
    snapshot = store.snapshots.get(schedule.snapshot_id)
    job, other_job = fired_job(), fired_job("wharf-nightly-29481239")
    first = scheduled_run(store, snapshot, schedule.id, job, PATIENCE)
    again = scheduled_run(store, snapshot, schedule.id, job, PATIENCE)  # a restarted pod
    other = scheduled_run(store, snapshot, schedule.id, other_job, PATIENCE)
    assert first is not None and again is not None and other is not None
    assert first.id == again.id == job_run_uuid(snapshot.id, job_run_id(job))
    assert other.id == job_run_uuid(snapshot.id, job_run_id(other_job)) != first.id
    assert store.runs.list(RunFilter(snapshot_id=snapshot.id)).total == 2
