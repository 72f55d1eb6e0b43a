"""The ``kubernetes`` step operator, end to end on the test bed: pipelines on the *local*
orchestrator whose steps that name the operator run as Jobs/pods while the others run inline.

The submitter is a script in a directory of its own (the operator's steps reach their pods only
through the run's code archive); the process kubelet runs the step Jobs' pods as processes of
this machine. Artifacts lie on a real S3 server (moto; the kubelet gives every container the S3
credentials); the metadata store is the embedded SQLite file, which the pods open directly.
What the emulator created is recorded by a listener on its object store, so Jobs deleted after
their step still count."""

from __future__ import annotations

from tests.artifacts.s3_server import s3_bucket, s3_server
from tests.integrations.kubernetes.step_operator_bed import (
    CLEANUP,
    OPERATOR,
    Submitted,
    bed,
    step_jobs,
    submit,
)
from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    Bed,
    nothing_left,
    remaining_secrets,
    run_script,
    steps_of,
)
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY
from wharf.integrations.kubernetes.step_operator import STEP_OPERATOR_KEY

__all__ = [  # the bed and helpers other modules take from here
    "BOUND",
    "IMAGE",
    "OPERATOR",
    "Bed",
    "bed",
    "s3_bucket",
    "s3_server",
    "step_jobs",
    "steps_of",
]


def assert_ran_as_one_job(bed: Bed, submitted: Submitted) -> None:
    """``train`` ran in a pod of one Job labelled with the operator, run and step; the other
    steps ran in the submitting process; the step's log reached the artifact store."""
    run, outputs = submitted.run, submitted.outputs
    assert run.status is ExecutionStatus.COMPLETED, submitted.output
    assert set(steps_of(bed, run)) == {"prepare", "train", "report"}
    (job,) = step_jobs(bed, run)
    labels = job["metadata"]["labels"]
    assert labels[STEP_OPERATOR_KEY] == OPERATOR
    assert labels[STEP_KEY] == "train"
    assert "ownerReferences" not in job["metadata"]  # the submitting orchestrator is local
    template = job["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "vision"  # the component's pod settings
    assert template["spec"]["containers"][0]["image"] == IMAGE
    (pod,) = [
        p
        for p in bed.seen.of_kind("Pod")
        if p["metadata"].get("labels", {}).get(STEP_KEY) == "train"
    ]
    assert outputs["train"]["value"] == 20  # loaded in the submitting process
    assert outputs["train"]["pod"] == pod["metadata"]["name"]
    assert outputs["train"]["pid"] != outputs["submitter"]
    assert outputs["report"] == outputs["submitter"]  # inline
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert "training on 2" in client.step_logs("train", run=run.id)
    # The Job is cleaned up with its step, the credentials' Secret once the run's last
    # operator step ended.
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"
    secrets = bed.seen.of_kind("Secret")
    assert [s["metadata"]["labels"][RUN_ID_KEY] for s in secrets] == [str(run.id)]


def test_a_local_dynamic_pipeline_runs_its_operator_step_as_a_job(bed: Bed) -> None:
    assert_ran_as_one_job(bed, submit(bed, "dynamic_training"))


def test_a_static_pipeline_on_the_local_orchestrator_runs_its_operator_step_as_a_job(
    bed: Bed,
) -> None:
    submitted = submit(bed, "static_training")
    assert_ran_as_one_job(bed, submitted)
    # Its progress line says where it ran: as the Job (the others inline).
    (job,) = step_jobs(bed, submitted.run)
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    started = f"Step 'train' started as Kubernetes Job {name} (namespace {namespace})."
    assert started in submitted.output, submitted.output
    assert "in its own process" not in submitted.output


def test_the_kubernetes_orchestrator_runs_an_operator_step_through_the_operator(
    bed: Bed,
) -> None:
    submitted = submit(bed, "static_training", stack="k8s-operated")
    run = submitted.run
    assert run.status is ExecutionStatus.COMPLETED, submitted.output
    assert submitted.outputs["train"]["value"] == 20
    jobs = {j["metadata"]["labels"].get(STEP_KEY): j for j in step_jobs(bed, run)}
    assert set(jobs) == {None, "prepare", "train", "report"}  # None: the orchestrator Job
    assert jobs["train"]["metadata"]["labels"][STEP_OPERATOR_KEY] == OPERATOR
    assert "ownerReferences" not in jobs["train"]["metadata"]
    for own in ("prepare", "report"):  # the orchestrator's own step Jobs, owned by its Job
        assert STEP_OPERATOR_KEY not in jobs[own]["metadata"]["labels"]
        assert jobs[own]["metadata"]["ownerReferences"]
    for name in ("prepare", "train"):  # the pod's progress lines, as the submitter streams them
        started = f"Step '{name}' started as Kubernetes Job {jobs[name]['metadata']['name']} "
        assert started + "(namespace default)." in submitted.output, submitted.output
    assert wait_until(lambda: not remaining_secrets(bed.emulator), CLEANUP)


def test_a_local_artifact_store_is_refused_and_no_job_is_created(bed: Bed) -> None:
    done = run_script(bed, "static_training", "operated-locally")
    assert done.returncode == 1
    assert "RunFailedError" in done.stderr and "cannot read the local artifact store" in done.stderr
    (run,) = bed.workspace.store.runs.list().items
    assert run.status is ExecutionStatus.FAILED
    reason = steps_of(bed, run)["train"].status_reason or ""
    assert f"Step operator '{OPERATOR}' runs steps in Kubernetes pods" in reason
    assert "cannot read the local artifact store" in reason
    assert "-c mounts_artifact_store=true" in reason
    assert bed.seen.of_kind("Job") == []
