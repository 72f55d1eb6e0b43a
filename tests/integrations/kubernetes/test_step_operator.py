"""The ``kubernetes`` step operator, end to end on the test bed: pipelines on the *local*
orchestrator whose steps that name the operator run as Jobs/pods while the others run inline.

The submitter is a script in a directory of its own (the operator's steps reach their pods only
through the run's code archive); the process kubelet runs the step Jobs' pods as processes of
this machine. Artifacts lie on a real S3 server (moto; the kubelet gives every container the S3
credentials); the metadata store is the embedded SQLite file, which the pods open directly.
What the emulator created is recorded by a listener on its object store, so Jobs deleted after
their step still count. The scenarios share one bed: each looks only at its own run's objects."""

from __future__ import annotations

from tests.artifacts.s3_server import s3_bucket, s3_server
from tests.integrations.kubernetes.step_operator_bed import (
    CLEANUP,
    OPERATOR,
    Submitted,
    bed,
    step_jobs,
    submit,
    submit_each,
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
        for p in bed.seen.of_run("Pod", str(run.id))
        if p["metadata"].get("labels", {}).get(STEP_KEY) == "train"
    ]
    assert outputs["train"]["value"] == 20  # loaded in the submitting process
    assert outputs["train"]["pod"] == pod["metadata"]["name"]
    assert outputs["train"]["pid"] != outputs["submitter"]
    assert outputs["report"] == outputs["submitter"]  # inline
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert "training on 2" in client.step_logs("train", run=run.id)


def test_operator_steps_run_as_jobs_on_either_orchestrator_unless_the_store_is_local(
    bed: Bed,
) -> None:
    # The local orchestrator, a dynamic then a static pipeline, submitted by one process.
    dynamic, static = submit_each(bed, ("dynamic_training", {}), ("static_training", {}))
    assert_ran_as_one_job(bed, dynamic)
    assert_ran_as_one_job(bed, static)
    # The static run's progress line says where its step ran: as the Job (the others inline).
    (job,) = step_jobs(bed, static.run)
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    started = f"Step 'train' started as Kubernetes Job {name} (namespace {namespace})."
    assert started in static.output, static.output
    assert "in its own process" not in static.output
    # Each Job is cleaned up with its step, each run's credentials' Secret (one per run) once
    # the run's last operator step ended.
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"
    secrets = bed.seen.of_kind("Secret")
    assert sorted(s["metadata"]["labels"][RUN_ID_KEY] for s in secrets) == sorted(
        [str(dynamic.run.id), str(static.run.id)]
    )

    # The Kubernetes orchestrator runs an operator step through the operator, its other step
    # itself.
    submitted = submit(bed, "two_placements", stack="k8s-operated")
    run = submitted.run
    assert run.status is ExecutionStatus.COMPLETED, submitted.output
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(run.id, "train")["value"] == 20
    jobs = {j["metadata"]["labels"].get(STEP_KEY): j for j in step_jobs(bed, run)}
    assert set(jobs) == {None, "prepare", "train"}  # None: the orchestrator Job
    assert jobs["train"]["metadata"]["labels"][STEP_OPERATOR_KEY] == OPERATOR
    assert "ownerReferences" not in jobs["train"]["metadata"]
    # The orchestrator's own step Job, owned by its Job.
    assert STEP_OPERATOR_KEY not in jobs["prepare"]["metadata"]["labels"]
    assert jobs["prepare"]["metadata"]["ownerReferences"]
    for name in ("prepare", "train"):  # the pod's progress lines, as the submitter streams them
        started = f"Step '{name}' started as Kubernetes Job {jobs[name]['metadata']['name']} "
        assert started + "(namespace default)." in submitted.output, submitted.output
    assert wait_until(lambda: not remaining_secrets(bed.emulator), CLEANUP)

    # A local artifact store is refused, and no Job is created.
    jobs_before = len(bed.seen.of_kind("Job"))
    done = run_script(bed, "static_training", "operated-locally")
    assert done.returncode == 1
    assert "RunFailedError" in done.stderr and "cannot read the local artifact store" in done.stderr
    known = {dynamic.run.id, static.run.id, run.id}
    (refused,) = [r for r in bed.workspace.store.runs.list().items if r.id not in known]
    assert refused.status is ExecutionStatus.FAILED
    reason = steps_of(bed, refused)["train"].status_reason or ""
    assert f"Step operator '{OPERATOR}' runs steps in Kubernetes pods" in reason
    assert "cannot read the local artifact store" in reason
    assert "-c mounts_artifact_store=true" in reason
    assert len(bed.seen.of_kind("Job")) == jobs_before
    assert bed.seen.of_run("Job", str(refused.id)) == []
