"""A real static pipeline on a Kubernetes stack, end to end on the test bed.

The submitter is a script in a directory of its own (its steps reach the pods only through the
run's code archive); it creates the orchestrator Job on the API emulator; the process kubelet
runs the Job's pod, which runs the engine's run loop and each step as a Job/pod of its own.
Artifacts lie on a real S3 server (moto; the kubelet gives every container the S3 credentials,
as a cluster's node or service account would); the metadata store is the embedded SQLite file,
which the pods open directly because they are processes on this machine.

What the emulator saw is recorded by a listener on its object store (every pod and Job created),
so step Jobs deleted after their run still count as created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    Bed,
    BedFactory,
    current_job,
    job_exists,
    metadata_of,
    register_kubernetes_stack,
    remaining_secrets,
    run_script,
    runner_script,
    step_statuses,
    stop_gracefully_once_seen,
    submit_script,
    wait_for_run_end,
    wait_for_step,
    wharf_cli,
)
from tests.kube.emulator.resources import JOBS
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.integrations.kubernetes.orchestrator import JOB_KEY, JOB_UID_KEY, NAMESPACE_KEY
from wharf.integrations.kubernetes.orchestrator_launch import secret_key, token_secret_name
from wharf.integrations.kubernetes.orchestrator_main import (
    ORCHESTRATOR_RUN_ID_KEY,
    POD_KEY,
)
from wharf.integrations.kubernetes.step_backend_secret import STORE_URL_ENV
from wharf.store.models import PageRequest, PipelineRunRecord

__all__ = ["BOUND", "IMAGE", "Bed", "bed", "metadata_of", "wait_for_step"]
# (the bed and helpers other modules import from here)

MISSING_IMAGE = "registry.example/wharf-missing:1"

STEPS_MODULE = """
from wharf import pipeline, step


@step
def make(value: int) -> int:
    print("making", value)
    return value


@step
def double(value: int) -> int:
    return value * 2


@step
def add(a: int, b: int) -> int:
    return a + b


@pipeline
def on_kubernetes(value: int = 3) -> None:
    first = make(value)
    add(first, double(first))


@step
def explode(value: int) -> int:
    raise ValueError(f"no good: {value}")


@pipeline(raise_on_failure=False)
def failing_on_kubernetes() -> None:
    double(explode(make(1)))


@step(enable_cache=False)
def wait_for(path: str) -> int:
    import pathlib
    import time

    print("waiting for", path, flush=True)
    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def stoppable(path: str) -> None:
    double(wait_for(path))
"""

SCRIPT = runner_script("k8s_steps")


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    """The bed with stacks ``k8s`` (synchronous), ``k8s-async``, and ``k8s-no-image`` and
    ``k8s-async-no-image`` (an orchestrator image no registry has)."""
    made = make_bed({"k8s_steps.py": STEPS_MODULE, "run.py": SCRIPT}, active_stack="k8s")
    ws = made.workspace
    register_kubernetes_stack(
        ws, "k8s", {"image": IMAGE, "namespace": "default", "job_monitoring_interval": 0.5}
    )
    register_kubernetes_stack(
        ws, "k8s-async", {"image": IMAGE, "synchronous": False, "pod_stop_grace_period": 5}
    )
    register_kubernetes_stack(
        ws, "k8s-no-image", {"image": MISSING_IMAGE, "job_monitoring_interval": 0.5}
    )
    register_kubernetes_stack(
        ws, "k8s-async-no-image", {"image": MISSING_IMAGE, "synchronous": False}
    )
    return made


def submit(
    bed: Bed, pipeline: str = "on_kubernetes", stack: str = "k8s", **parameters: Any
) -> tuple[PipelineRunRecord, str]:
    """:func:`submit_script` of ``pipeline`` (``on_kubernetes`` unless said) on ``stack``."""
    return submit_script(bed, pipeline, stack, **parameters)


def secret_keys(secret: dict[str, Any]) -> set[str]:
    """The keys a Secret holds (``data`` or ``stringData``)."""
    return {*(secret.get("data") or {}), *(secret.get("stringData") or {})}


def test_a_static_pipeline_runs_each_step_in_its_own_pod_and_a_rerun_is_cached(
    bed: Bed,
) -> None:
    """A synchronous run, then the same run again asynchronously: the asynchronous submitter
    returns at once and says how to follow the run, which completes in the cluster, cached."""
    run, output = submit(bed)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert run.orchestrator_run_id is not None
    assert run.orchestrator_run_id.startswith("kubernetes-")
    assert step_statuses(bed, run) == {
        "make": ExecutionStatus.COMPLETED,
        "double": ExecutionStatus.COMPLETED,
        "add": ExecutionStatus.COMPLETED,
    }
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(run.id, "make") == 3
        assert client.load_step_output(run.id, "double") == 6
        assert client.load_step_output(run.id, "add") == 9
        assert "making 3" in client.step_logs("make", run=run.id)  # `wharf runs logs` has it

    # The orchestrator Job, recorded in the run's metadata; its pod's log reached the user.
    metadata = metadata_of(bed, run)
    jobs = bed.seen.of_run("Job", str(run.id))
    orchestrator_jobs = [j for j in jobs if STEP_KEY not in j["metadata"]["labels"]]
    assert [j["metadata"]["name"] for j in orchestrator_jobs] == [metadata[JOB_KEY]]
    assert metadata[NAMESPACE_KEY] == "default"
    assert "on_kubernetes" in output and "add" in output

    # Every step ran in a pod of its own, labelled with the run and the step.
    step_pods = bed.seen.step_objects("Pod", run)
    assert sorted(p["metadata"]["labels"][STEP_KEY] for p in step_pods) == ["add", "double", "make"]
    step_jobs = [j for j in jobs if STEP_KEY in j["metadata"]["labels"]]
    owners = {o["name"] for j in step_jobs for o in j["metadata"].get("ownerReferences", [])}
    assert owners == {metadata[JOB_KEY]}  # collected with the orchestrator Job
    orchestrator_pods = [
        p for p in bed.seen.of_run("Pod", str(run.id)) if STEP_KEY not in p["metadata"]["labels"]
    ]
    assert [p["metadata"]["name"] for p in orchestrator_pods] == [metadata[POD_KEY]]
    assert metadata[ORCHESTRATOR_RUN_ID_KEY] == run.orchestrator_run_id
    assert sorted(j["metadata"]["labels"][STEP_KEY] for j in step_jobs) == ["add", "double", "make"]
    # The embedded store needs no run token: the run's Secret holds no token (the store URL
    # only); it and the step pods' Secret are gone with the run.
    run_secrets = [
        s
        for s in bed.seen.created.get("Secret", [])
        if s["metadata"]["name"] == token_secret_name(run.id)
    ]
    (run_secret,) = run_secrets
    assert secret_keys(run_secret) == {secret_key(STORE_URL_ENV)}  # no TOKEN_SECRET_KEY
    assert remaining_secrets(bed.emulator) == []

    # The same run again, asynchronously: the call returns the run as submitted, not waited
    # for (the status it returned, as the script printed it), and says how to follow it.
    submitted, output = submit(bed, stack="k8s-async")
    (reported,) = [line.split() for line in output.splitlines() if line.startswith("RUN ")]
    assert reported[1] == str(submitted.id), output
    assert not ExecutionStatus(reported[2]).is_finished, output
    job_name = metadata_of(bed, submitted)[JOB_KEY]
    assert f"wharf runs logs {submitted.name} --follow" in output
    assert f"kubectl -n default logs -f job/{job_name}" in output
    # It completes in the cluster: every step is cached; the orchestrator pod starts no step pod.
    again = wait_for_run_end(bed, submitted)
    assert again.status is ExecutionStatus.COMPLETED, again.status_reason
    assert set(step_statuses(bed, again).values()) == {ExecutionStatus.CACHED}
    assert bed.seen.step_objects("Pod", again) == []
    assert len(bed.seen.of_run("Pod", str(again.id))) == 1  # its orchestrator pod
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(again.id, "add") == 9


def test_a_failing_step_fails_the_run_and_the_orchestrator_job_without_a_second_pod(
    bed: Bed,
) -> None:
    run, output = submit(bed, "failing_on_kubernetes")
    assert run.status is ExecutionStatus.FAILED
    steps = {s.name: s for s in bed.workspace.store.steps.list(page=PageRequest(size=100)).items}
    reasons = {name: (s.status, s.status_reason) for name, s in steps.items()}
    assert steps["make"].status is ExecutionStatus.COMPLETED, reasons
    assert steps["explode"].status is ExecutionStatus.FAILED, reasons
    assert "no good: 1" in (steps["explode"].status_reason or "")
    assert "double" not in steps or steps["double"].status is not ExecutionStatus.COMPLETED
    assert "RUN" in output and "failed" in output
    # The orchestrator pod exited 1 (the run ended failed): the Job failed at once, no retry.
    pods = bed.seen.of_run("Pod", str(run.id))
    assert len([p for p in pods if STEP_KEY not in p["metadata"]["labels"]]) == 1
    job = current_job(bed, run)
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in job["status"]["conditions"])


def test_an_orchestrator_image_that_cannot_be_pulled_fails_the_submission_and_leaves_nothing(
    bed: Bed,
) -> None:
    done = run_script(bed, "on_kubernetes", "k8s-no-image")
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()[-1]
    assert "The orchestrator Job default/" in error and MISSING_IMAGE in error, done.stderr
    assert "ErrImagePull" in error or "ImagePullBackOff" in error
    assert "did not start (nothing ran)" in error
    assert bed.workspace.store.runs.list().items == []  # the placeholder was taken away
    (created,) = bed.seen.created["Job"]
    name = created["metadata"]["name"]
    assert wait_until(lambda: not job_exists(bed.emulator, name), BOUND), (
        f"orchestrator Job {name} is left"
    )


def test_following_an_asynchronous_run_whose_orchestrator_image_cannot_be_pulled_fails_it(
    bed: Bed,
) -> None:
    """The command the asynchronous submitter prints says why the run never starts, in one
    line, and ends it failed as a synchronous submitter would; its Job is taken away."""
    run, _ = submit(bed, stack="k8s-async-no-image")
    assert run.status is ExecutionStatus.INITIALIZING
    job_name = metadata_of(bed, run)[JOB_KEY]
    followed = wharf_cli(bed, "runs", "logs", run.name, "--follow")
    assert followed.returncode == 1, followed.stdout + followed.stderr
    (error,) = followed.stderr.strip().splitlines()
    assert error.startswith(
        f"Error: Run '{run.name}' failed: The orchestrator Job default/{job_name} cannot start "
        f"its pod {job_name}-"
    ), error
    assert f"image '{MISSING_IMAGE}': " in error
    assert "ErrImagePull" in error or "ImagePullBackOff" in error
    assert error.endswith(f"run {run.name} did not start (nothing ran).")
    ended = bed.workspace.store.runs.get(run.id)
    assert ended.status is ExecutionStatus.FAILED
    assert error.endswith(str(ended.status_reason))
    assert wait_until(lambda: not job_exists(bed.emulator, job_name), BOUND), (
        f"orchestrator Job {job_name} is left"
    )


def test_following_an_asynchronous_run_whose_orchestrator_job_was_deleted_fails_it(
    bed: Bed,
) -> None:
    """Before, ``runs logs --follow`` followed forever: a Job not there could not be told from
    one not created yet. The run records its Job's uid once the create answered."""
    run, _ = submit(bed, stack="k8s-async-no-image")  # its pod never takes the run over
    job_name = metadata_of(bed, run)[JOB_KEY]
    assert metadata_of(bed, run)[JOB_UID_KEY] == current_job(bed, run)["metadata"]["uid"]
    # by hand, as `kubectl delete job` does
    bed.emulator.store.delete(JOBS, "default", job_name, propagation_policy="Background")
    assert wait_until(lambda: not job_exists(bed.emulator, job_name), BOUND)
    followed = wharf_cli(bed, "runs", "logs", run.name, "--follow")
    assert followed.returncode == 1, followed.stdout + followed.stderr
    (error,) = followed.stderr.strip().splitlines()
    assert error == (
        f"Error: Run '{run.name}' failed: The orchestrator Job default/{job_name} was deleted "
        f"before its pod took the run over; run {run.name} did not start (nothing ran)."
    ), error
    assert bed.workspace.store.runs.get(run.id).status is ExecutionStatus.FAILED


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "forced"])
def test_a_stopped_run_starts_no_further_step_pod_and_ends_stopped(
    bed: Bed, tmp_path: Path, force: bool
) -> None:
    """A graceful stop lets the running step pod finish; a forced one ends it."""
    release = tmp_path / "release"
    run, _ = submit(bed, "stoppable", stack="k8s-async", path=str(release))
    waiting = wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)
    steps = bed.workspace.store.steps
    if force:
        with Client(bed.workspace.config, bed.workspace.store) as client:
            client.stop_run(run.id, force=True)
    else:
        stop_gracefully_once_seen(bed, waiting)
        assert steps.get(waiting.id).status is ExecutionStatus.RUNNING  # it keeps running
        release.touch()
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.STOPPED, ended.status_reason
    step = steps.get(waiting.id)
    expected = ExecutionStatus.STOPPED if force else ExecutionStatus.COMPLETED
    assert step.status is expected, step.status_reason
    step_pods = bed.seen.step_objects("Pod", run)
    assert [p["metadata"]["labels"][STEP_KEY] for p in step_pods] == ["wait_for"]
    assert "double" not in step_statuses(bed, ended)
    # The step's Job is gone (deleted by the stop, or cleaned up after it ended).
    name = step_pods[0]["metadata"]["labels"]["job-name"]
    assert wait_until(lambda: not job_exists(bed.emulator, name), BOUND), f"step Job {name} is left"
