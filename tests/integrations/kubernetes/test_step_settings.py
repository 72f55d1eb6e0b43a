"""Per-step and per-pipeline Kubernetes settings, end to end on the test bed: a step's
``orchestrator.kubernetes`` settings (over its pipeline's, over the component's) reach its own
Job's pod template and no other step's; a step operator step gets its
``step_operator.kubernetes`` settings; an invalid setting fails before anything reaches the
cluster, naming the step and the field. Pure checks (no cluster) cover every field a step's
Job takes from its settings and the refusal of another namespace for one step.

The bed (emulator, process kubelet, S3 artifact store, the ``k8s`` orchestrator and the
``k8s-op`` step operator) is :mod:`test_step_operator`'s; this module adds its own pipelines to
the bed's project directory and runs them through a script of its own, as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.integrations.kubernetes import test_step_operator as operator_bed
from tests.integrations.kubernetes.test_step_operator import (
    BOUND,
    IMAGE,
    OPERATOR,
    Bed,
    step_jobs,
    steps_of,
)
from wharf import Client
from wharf.config.spec import PipelineConfig, PipelineSpec, StepConfig, StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.integrations.kubernetes.manifests import step_job_for
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesPodSettings,
)
from wharf.integrations.kubernetes.step_operator import STEP_OPERATOR_KEY
from wharf.integrations.kubernetes.step_settings import (
    ORCHESTRATOR_SETTINGS_KEY,
    pipeline_settings,
    step_settings,
)
from wharf.store.models import PipelineRunRecord

bed = operator_bed.bed
s3_server = operator_bed.s3_server
s3_bucket = operator_bed.s3_bucket

STEPS_MODULE = f"""
import os

from wharf import pipeline, step

PLACED = {{
    "pod_settings": {{
        "node_selectors": {{"pool": "a"}},
        "annotations": {{"wharf.test/owner": "vision"}},
        "env": [{{"name": "PLACED_POOL", "value": "a"}}],
    }},
    "ttl_seconds_after_finished": 600,
}}


@step(settings={{"orchestrator.kubernetes": PLACED}})
def placed() -> dict:
    return {{"pool": os.environ.get("PLACED_POOL"), "pod": os.environ.get("HOSTNAME")}}


@step
def plain(result: dict) -> dict:
    return {{"pool": os.environ.get("PLACED_POOL"), "pod": os.environ.get("HOSTNAME")}}


@step(
    step_operator="{OPERATOR}",
    settings={{
        "step_operator.kubernetes": {{
            "pod_settings": {{
                "node_selectors": {{"accelerator": "h200"}},
                "tolerations": [{{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}}],
            }},
            "active_deadline_seconds": 300,
            "backoff_limit_margin": 2,
        }}
    }},
)
def operated(result: dict) -> int:
    return 1


@pipeline(
    enable_cache=False,
    settings={{"orchestrator.kubernetes": {{"pod_settings": {{"labels": {{"kind": "nightly"}}}}}}}},
)
def settled() -> None:
    operated(plain(placed()))


@step(settings={{"orchestrator.kubernetes": {{"pod_settings": {{"node_selector": {{"pool": "a"}}}}}}}})
def mistyped() -> dict:
    return {{}}


@pipeline(enable_cache=False)
def invalid() -> None:
    plain(mistyped())


@step(
    step_operator="{OPERATOR}",
    settings={{"step_operator.kubernetes": {{"active_deadline_seconds": 0}}}},
)
def bad_deadline() -> int:
    return 1


@pipeline(enable_cache=False, dynamic=True, raise_on_failure=False)
def invalid_when_running() -> None:
    bad_deadline()
"""

SCRIPT = """
import sys

import settings_steps

if __name__ == "__main__":
    run = getattr(settings_steps, sys.argv[1])()
    print("RUN", run.id, run.status.value)
"""


def run_pipeline(bed: Bed, pipeline: str, stack: str) -> subprocess.CompletedProcess[str]:
    (bed.project / "settings_steps.py").write_text(STEPS_MODULE)
    (bed.project / "run_settings.py").write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, "run_settings.py", pipeline],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**bed.env, "WHARF_ACTIVE_STACK": stack},
        cwd=bed.project,
    )


def the_run(bed: Bed, done: subprocess.CompletedProcess[str]) -> PipelineRunRecord:
    run_id = next(line for line in done.stdout.splitlines() if line.startswith("RUN ")).split()[1]
    return next(r for r in bed.workspace.store.runs.list().items if str(r.id) == run_id)


def pod_template(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata, spec) of a Job's pod template."""
    template = job["spec"]["template"]
    return template["metadata"], template["spec"]


def test_step_settings_reach_that_steps_job_only(bed: Bed) -> None:
    done = run_pipeline(bed, "settled", "k8s-operated")
    assert done.returncode == 0, done.stdout + done.stderr
    run = the_run(bed, done)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    jobs = {j["metadata"]["labels"].get(STEP_KEY): j for j in step_jobs(bed, run)}
    assert set(jobs) == {None, "placed", "plain", "operated"}  # None: the orchestrator Job

    placed_meta, placed_spec = pod_template(jobs["placed"])
    assert placed_spec["nodeSelector"] == {"pool": "a"}
    assert placed_meta["annotations"]["wharf.test/owner"] == "vision"
    assert placed_meta["labels"]["kind"] == "nightly"  # the pipeline's, under the step's
    assert {"name": "PLACED_POOL", "value": "a"} in placed_spec["containers"][0]["env"]
    assert jobs["placed"]["spec"]["ttlSecondsAfterFinished"] == 600
    assert placed_spec["containers"][0]["image"] == IMAGE

    plain_meta, plain_spec = pod_template(jobs["plain"])
    assert "nodeSelector" not in plain_spec
    assert "wharf.test/owner" not in (plain_meta.get("annotations") or {})
    assert plain_meta["labels"]["kind"] == "nightly"  # pipeline-level: every step
    assert "ttlSecondsAfterFinished" not in jobs["plain"]["spec"]

    with Client(bed.workspace.config, bed.workspace.store) as client:
        placed_out = client.load_step_output(run.id, "placed")
        plain_out = client.load_step_output(run.id, "plain")
    assert placed_out["pool"] == "a"  # the env setting reached the step's process
    assert plain_out["pool"] is None
    assert placed_out["pod"] != plain_out["pod"]

    # The operator step: its step_operator.kubernetes settings over the component's; the
    # orchestrator's settings of the pipeline are not the operator's.
    operated = jobs["operated"]
    assert operated["metadata"]["labels"][STEP_OPERATOR_KEY] == OPERATOR
    operated_meta, operated_spec = pod_template(operated)
    assert operated_spec["nodeSelector"] == {"accelerator": "h200"}
    assert operated_spec["tolerations"] == [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert operated_meta["labels"]["team"] == "vision"  # the component's pod settings
    assert "kind" not in operated_meta["labels"]
    # (at most its pod_startup_timeout, 600 s: the Job is created with it, not with the
    # deadline that bounds its wait for its Secret meanwhile, test_step_backend_secret_wait)
    assert operated["spec"]["activeDeadlineSeconds"] == 300
    assert operated["spec"]["backoffLimit"] == 2


def test_an_unknown_setting_fails_before_anything_reaches_the_cluster(bed: Bed) -> None:
    done = run_pipeline(bed, "invalid", "k8s-operated")
    assert done.returncode == 1
    message = (
        "Invalid settings['orchestrator.kubernetes'] of step 'mistyped': Invalid Kubernetes "
        "orchestrator settings: 'pod_settings.node_selector' is not a known field"
    )
    assert message in done.stderr, done.stderr
    assert done.stderr.count("node_selector") == 1, done.stderr  # one message
    assert bed.seen.of_kind("Job") == [] and bed.seen.of_kind("Pod") == []
    assert bed.workspace.store.runs.list().items == []  # refused before it was recorded


def test_an_invalid_setting_of_a_dynamic_step_fails_that_step_before_its_pod(bed: Bed) -> None:
    # Steps of a dynamic pipeline are known only while it runs: their backend checks them.
    done = run_pipeline(bed, "invalid_when_running", "operated")
    assert done.returncode == 0, done.stdout + done.stderr
    run = the_run(bed, done)
    assert run.status is ExecutionStatus.FAILED
    reason = steps_of(bed, run)["bad_deadline"].status_reason or ""
    assert "Step 'bad_deadline': invalid settings['step_operator.kubernetes']" in reason, reason
    assert "active_deadline_seconds" in reason, reason
    assert bed.seen.of_kind("Job") == [] and bed.seen.of_kind("Pod") == []


def test_the_run_wide_namespace_cannot_change_for_one_step() -> None:
    spec = StepSpec(
        name="elsewhere",
        source="m:f",
        code_hash="0",
        config=StepConfig(settings={"orchestrator.kubernetes": {"namespace": "other"}}),
    )
    base = KubernetesOrchestratorSettings(namespace="ml")
    with pytest.raises(InputError, match=r"Step 'elsewhere'.*sets namespace to 'other'"):
        step_settings(base, spec)
    assert json.loads(base.model_dump_json())["namespace"] == "ml"


def test_a_steps_job_takes_every_field_it_set_over_the_pipelines_and_components() -> None:
    component = KubernetesOrchestratorSettings(
        namespace="ml",
        image="registry/base:1",
        service_account_name="orchestrator",
        pod_settings=KubernetesPodSettings(labels={"team": "vision"}),
    )
    pipeline_level = PipelineSpec(
        name="p",
        config=PipelineConfig(
            settings={ORCHESTRATOR_SETTINGS_KEY: {"step_pod_service_account_name": "steps"}}
        ),
    )
    base = pipeline_settings(component, pipeline_level)
    layer = {
        "step_pod_service_account_name": "steps",  # the pipeline's, merged into the step's
        "image": "registry/gpu:2",
        "backoff_limit_margin": 3,
        "active_deadline_seconds": 120,
        "ttl_seconds_after_finished": 30,
        "pod_stop_grace_period": 5,
        "pod_settings": {"resources": {"limits": {"memory": "1Gi"}}},
    }
    spec = StepSpec(
        name="big",
        source="m:f",
        code_hash="0",
        config=StepConfig(settings={ORCHESTRATOR_SETTINGS_KEY: layer}),
    )
    job = step_job_for(
        step_settings(base, spec),
        name="j",
        image="registry/base:1",
        command=["python"],
        env={},
        secret_env={},
        labels={},
        annotations={},
        max_retries=None,
    )
    pod = job["spec"]["template"]
    assert job["metadata"]["namespace"] == "ml"
    assert job["spec"]["backoffLimit"] == 3
    assert job["spec"]["activeDeadlineSeconds"] == 120
    assert job["spec"]["ttlSecondsAfterFinished"] == 30
    assert pod["spec"]["serviceAccountName"] == "steps"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 5
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "registry/gpu:2"
    assert container["resources"]["limits"] == {"memory": "1Gi"}
    assert pod["metadata"]["labels"]["team"] == "vision"  # the component's, kept
    # Without an entry of its own a step's Job is the backend's.
    assert step_settings(base, StepSpec(name="s", source="m:f", code_hash="0")) == base
