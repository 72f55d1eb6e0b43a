"""The create of a synchronous run's orchestrator Job whose answer is lost or refused, on the
test bed (the emulator's injected faults, the bed of :mod:`.test_orchestrator_e2e`).

- the API server created the Job but its answer never came (the connection was cut): the
  submitter reads the Job back by its name, finds it and goes on as if the create had
  answered: a synchronous one follows it (here to its pod that cannot start, which fails the
  submission as usual), an asynchronous one keeps the run for it and says how to follow it;
- the Job cannot be read back either: it may exist, so the run is kept (and its Job, there
  after all, runs it), the submitter saying how to check and stop it;
- the same, the Job there after all: its pod lets the Job own the run's Secret (the
  submitter could not), so that the Secret goes with the Job;
- the create was refused before anything was created (a 503): the Job is not there when read
  back, so the run is forgotten as before, and nothing is left.
"""

from __future__ import annotations

from pathlib import Path

from tests.integrations.kubernetes.test_orchestrator_e2e import Bed, bed, submit
from tests.integrations.kubernetes.testbed import (
    BOUND,
    job_exists,
    nothing_left,
    run_script,
    wait_for_run_end,
    wait_for_step,
)
from tests.kube.emulator.resources import JOBS, SECRETS
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.integrations.kubernetes.orchestrator_launch import token_secret_name

__all__ = ["bed"]


def orchestrator_jobs(bed: Bed) -> list[str]:
    return [
        job["metadata"]["name"]
        for job in bed.seen.of_kind("Job")
        if STEP_KEY not in job["metadata"].get("labels", {})
    ]


def test_a_created_job_whose_answer_was_lost_is_followed_as_if_it_had_answered(bed: Bed) -> None:
    """Before, the submitter took the create for failed and forgot the run, while the Job
    existed and its pod would run a run that was gone. Now it follows the Job it read back:
    here one whose image cannot be pulled (its pod never runs), which it fails and removes
    as after any create."""
    bed.emulator.faults.lose_answer("create", "jobs")  # the first Job: the orchestrator's
    done = run_script(bed, "on_kubernetes", "k8s-no-image")
    assert bed.emulator.faults.pending_lost_answers() == 0
    (job,) = orchestrator_jobs(bed)
    assert f"the orchestrator Job default/{job} exists" in done.stderr, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert f"The orchestrator Job default/{job} cannot start its pod" in error, done.stderr
    assert "did not start (nothing ran)" in error, error
    assert bed.workspace.store.runs.list().items == []  # as after any such submission
    assert wait_until(lambda: not job_exists(bed.emulator, job), BOUND), f"{job} is left"


def test_an_asynchronous_run_whose_create_answer_was_lost_is_kept_for_its_job(bed: Bed) -> None:
    bed.emulator.faults.lose_answer("create", "jobs")
    run, output = submit(bed, stack="k8s-async")
    (job,) = orchestrator_jobs(bed)
    assert f"the orchestrator Job default/{job} exists" in output, output
    assert f"Submitted run {run.name} as Kubernetes Job default/{job}" in output, output
    assert job_exists(bed.emulator, job)  # its pod runs the run, kept in the store
    assert bed.workspace.store.runs.get(run.id).status is not ExecutionStatus.FAILED


def test_a_job_that_cannot_be_read_back_keeps_the_run(bed: Bed) -> None:
    bed.emulator.faults.lose_answer("create", "jobs")
    bed.emulator.faults.fail_next("get", "jobs", code=503)
    done = run_script(bed, "on_kubernetes", "k8s-no-image")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output, output
    (job,) = orchestrator_jobs(bed)
    (run,) = bed.workspace.store.runs.list().items  # kept
    assert f"Job default/{job} of run {run.name} failed without saying" in output, output
    assert "the Job may exist and run it, so the run is kept" in output, output
    assert f"wharf runs stop --force {run.name}" in output, output
    assert bed.emulator.faults.pending_failures() == 0


def test_a_create_refused_before_the_job_was_made_forgets_the_run(bed: Bed) -> None:
    bed.emulator.faults.fail_next("create", "jobs", code=503)
    done = run_script(bed, "on_kubernetes", "k8s")
    assert done.returncode != 0, done.stdout + done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert "Cannot create the orchestrator Job default/" in error, done.stderr
    assert "(HTTP 503)" in error, error
    assert bed.workspace.store.runs.list().items == []  # the placeholder was taken away
    assert not any(job_exists(bed.emulator, job) for job in orchestrator_jobs(bed))
    assert wait_until(lambda: nothing_left(bed.emulator), BOUND)


def test_a_run_kept_for_a_job_that_could_not_be_read_back_has_its_secret_owned_by_the_job(
    bed: Bed, tmp_path: Path
) -> None:
    """Before, the run's Secret of a Job whose create lost its answer and that could not be
    read back was owned by nothing: it outlived the Job (deleted by hand, by its TTL, or
    failed before its pods ended the run). The Job's pod now lets its Job own it."""
    bed.emulator.faults.lose_answer("create", "jobs")
    bed.emulator.faults.fail_next("get", "jobs", code=503)
    release = tmp_path / "release"
    run, output = submit(bed, "stoppable", stack="k8s-async", path=str(release))
    assert "the Job may exist and run it, so the run is kept" in output, output
    wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)  # its pod took the run over
    (job,) = orchestrator_jobs(bed)
    secret = bed.emulator.store.get(SECRETS, "default", token_secret_name(run.id))
    owners = secret["metadata"].get("ownerReferences") or []
    job_uid = bed.emulator.store.get(JOBS, "default", job)["metadata"]["uid"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("Job", job, job_uid)]
    release.touch()
    wait_for_run_end(bed, run)
