"""The pipeline stages of ``scripts/k8s-smoke``: temporary Wharf components, then four checks.

Owns: the smoke run's temporary components and stacks (:class:`SmokeWharf`: a ``kubernetes``
orchestrator and step operator in the smoke namespace, stacks ``smoke-<id>-k8s`` and
``smoke-<id>-operator`` over a remote artifact store), the temporary directory the pipelines run
from (:func:`prepare_workdir`), one pipeline call in a process of its own (:func:`run_pipeline`)
and the stages: a 3-step static pipeline and its fully cached re-run, a failing step, the step
operator from a local dynamic pipeline, a CronJob round trip.

Invariants:

- every pod the smoke run starts carries ``wharf.io/smoke=<id>`` (the components' pod settings),
  so its Jobs and CronJobs are known by their pod templates;
- a stage prints exactly one line, ``PASS``/``FAIL``/``SKIP``, its title, its time and a detail;
  a stage that fails does not stop the next, a timeout stops them all;
- the schedule the smoke run records (``smoke-<id>-schedule``) is deleted, CronJob and record,
  by its stage, or by :meth:`SmokeWharf.remove` when the stage did not get that far.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

SMOKE_LABEL = "wharf.io/smoke"
SHIPPED = Path(__file__).resolve().parent
SHIPPED_FILES = ("smoke_pipelines.py", "smoke_run.py")
RESULT_PREFIX = "SMOKE-RESULT "
FAILING_EXIT_CODE = 3
SCHEDULE_CRON = "0 0 1 1 *"  # once a year: the stage triggers its run itself
SCHEDULE_LABEL = "wharf.io/schedule-id"
POLL_SECONDS = 0.5


class StageError(Exception):
    """A stage's check did not hold: its message is the stage line's detail."""


class StageSkippedError(Exception):
    """A stage this Wharf or cluster cannot run: its message says why."""


class SmokeTimeout(BaseException):
    """The overall ``--timeout`` ran out (a BaseException: no stage's error handling, nor a
    library's, may swallow it)."""


@dataclass
class Smoke:
    """What every stage works with."""

    smoke_id: str
    namespace: str
    api: Any  # kubernetes.client.ApiClient
    workdir: Path
    deadline: float  # time.monotonic() by which the stages must be done
    wharf: SmokeWharf

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise SmokeTimeout("the stages ran out of time")
        return left


@dataclass
class SmokeWharf:
    """The temporary components and stacks of one smoke run, in the user's Wharf store."""

    workspace: Any  # wharf.sdk.workspace.Workspace
    smoke_id: str
    orchestrator_stack: str = ""
    operator_stack: str = ""
    registered: list[tuple[Any, str]] = field(default_factory=list)  # (ComponentType, name)
    stacks: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"smoke-{self.smoke_id}"

    @property
    def step_operator(self) -> str:
        return f"{self.prefix}-step-operator"

    def register(
        self,
        *,
        namespace: str,
        image: str,
        artifact_store: str | None,
        context: str | None,
        kubeconfig: str | None,
    ) -> None:
        """Register the smoke components and stacks over ``artifact_store`` (default: the
        active stack's), which must be a remote one."""
        from wharf.core.enums import ComponentType
        from wharf.core.errors import WharfError
        from wharf.integrations.kubernetes.orchestrator import is_local_path
        from wharf.sdk import stacks

        ws = self.workspace
        try:
            store_name = artifact_store or stacks.describe_stack(ws).artifact_store
            if store_name is None:
                raise StageError("the active stack has no artifact store: pass --artifact-store")
            store = stacks.find_component(ws, ComponentType.ARTIFACT_STORE, store_name)
        except WharfError as error:
            raise StageError(f"artifact store: {error}") from None
        path = str(store.configuration.get("path", ""))
        if store.flavor == "local" or is_local_path(path):
            raise StageError(
                f"artifact store '{store_name}' is local ({path}): pods cannot read it; "
                "pass --artifact-store NAME of a remote one (e.g. fsspec on s3://BUCKET/PREFIX)"
            )
        labels = {"labels": {SMOKE_LABEL: self.smoke_id}}
        target: dict[str, Any] = {"namespace": namespace, "image": image, "pod_settings": labels}
        if context:
            target["context"] = context
        if kubeconfig:
            target["kubeconfig"] = os.path.abspath(kubeconfig)
        orchestrator = f"{self.prefix}-orchestrator"
        operator = self.step_operator
        self._component(
            ComponentType.ORCHESTRATOR,
            orchestrator,
            {**target, "orchestrator_pod_settings": labels, "job_monitoring_interval": 0.5},
        )
        self._component(ComponentType.STEP_OPERATOR, operator, target)
        self.orchestrator_stack = self._stack(
            "k8s", orchestrator=orchestrator, artifact_store=store_name
        )
        self.operator_stack = self._stack(
            "operator", orchestrator="default", artifact_store=store_name, step_operator=operator
        )

    def _component(self, type: Any, name: str, configuration: dict[str, Any]) -> None:
        from wharf.sdk import stacks

        stacks.register_component(self.workspace, name, type, "kubernetes", configuration)
        self.registered.append((type, name))

    def _stack(self, suffix: str, **components: Any) -> str:
        from wharf.sdk import stacks

        name = f"{self.prefix}-{suffix}"
        stacks.register_stack(self.workspace, name, **components)
        self.stacks.append(name)
        return name

    def _unfinished_runs(self) -> list[str]:
        """The names of the unfinished runs on this smoke run's stacks."""
        from wharf.core.enums import ExecutionStatus
        from wharf.store.models import PageRequest, RunFilter

        store = self.workspace.store
        stack_ids = {store.stacks.get_stack_by_name(name).id for name in self.stacks}
        names = []
        for status in (s for s in ExecutionStatus if not s.is_finished):
            for run in store.runs.list(RunFilter(status=status), PageRequest(size=100)).items:
                if store.snapshots.get(run.snapshot_id).stack_id in stack_ids:
                    names.append(run.name)
        return names

    @property
    def schedule_name(self) -> str:
        return f"{self.prefix}-schedule"

    def remove(self, env: dict[str, str], timeout: float) -> list[str]:
        """Delete what this smoke run left in the store, best effort: its schedule, if recorded
        (through the CLI, so its CronJob goes too), the runs a cut-short stage left unfinished
        (stopped with ``--force``: a stack with an unfinished run cannot be deleted), then its
        stacks, then its components (a stack holds them); what could not be deleted, each with
        the reason."""
        from wharf.core.errors import WharfError
        from wharf.store.models import ScheduleFilter

        deadline = time.monotonic() + timeout
        left: list[str] = []
        found = self.workspace.store.schedules.list(ScheduleFilter(name=self.schedule_name))
        for schedule in found.items:
            try:
                delete_schedule(str(schedule.id), env, timeout)
            except StageError as error:
                left.append(f"schedule {schedule.name} ({error})")
        for run in self._unfinished_runs():
            try:
                stop_run(run, env, max(deadline - time.monotonic(), 1.0))
            except StageError as error:
                left.append(f"run {run} ({error})")
        while self._unfinished_runs() and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)  # the run's orchestrator ends it; polled, with a deadline
        repository = self.workspace.store.stacks
        for name in reversed(self.stacks):
            try:
                repository.delete_stack(repository.get_stack_by_name(name).id)
            except WharfError as error:
                left.append(f"stack {name} ({error})")
        for type, name in reversed(self.registered):
            try:
                repository.delete_component(repository.get_component_by_name(type, name).id)
            except WharfError as error:
                left.append(f"{type.value.replace('_', ' ')} {name} ({error})")
        return left


# ----------------------------------------------------------------------------- running pipelines


def prepare_workdir(workdir: Path, wharf: SmokeWharf) -> None:
    """Copy the pipelines into ``workdir`` and write this run's names beside them."""
    for name in SHIPPED_FILES:
        shutil.copyfile(SHIPPED / name, workdir / name)
    (workdir / "smoke_names.py").write_text(
        '"""Names of one smoke run (written by scripts/k8s-smoke)."""\n\n'
        f"STEP_OPERATOR = {wharf.step_operator!r}\n"
        f"SCHEDULE_NAME = {wharf.schedule_name!r}\n"
        f"SCHEDULE_CRON = {SCHEDULE_CRON!r}\n"
    )


def keep_logs(workdir: Path, smoke_id: str) -> Path | None:
    """Copy the pipeline calls' output out of ``workdir`` (about to be deleted) into a
    directory that stays; None when there is none."""
    logs = sorted(workdir.glob("*.log"))
    if not logs:
        return None
    kept = Path(tempfile.mkdtemp(prefix=f"wharf-smoke-{smoke_id}-logs-"))
    for log in logs:
        shutil.copyfile(log, kept / log.name)
    return kept


def run_pipeline(smoke: Smoke, stack: str, pipeline: str, **parameters: Any) -> dict[str, Any]:
    """Call ``pipeline`` on ``stack`` in a process started from the work directory (its source
    root): what ``smoke_run.py`` reported. Its output goes to ``<pipeline>-<n>.{out,err}.log``
    there as it comes (so a call cut short by the timeout leaves what it printed)."""
    env = {**os.environ, "WHARF_ACTIVE_STACK": stack}
    calls = len(list(smoke.workdir.glob(f"{pipeline}-*.out.log")))
    out_path = smoke.workdir / f"{pipeline}-{calls + 1}.out.log"
    err_path = smoke.workdir / f"{pipeline}-{calls + 1}.err.log"
    with out_path.open("w") as out, err_path.open("w") as err:
        try:
            done = subprocess.run(
                [sys.executable, "smoke_run.py", pipeline, json.dumps(parameters)],
                cwd=smoke.workdir,
                env=env,
                stdout=out,
                stderr=err,
                timeout=smoke.remaining(),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SmokeTimeout(f"{pipeline} did not end in time") from None
    stdout, stderr = out_path.read_text(), err_path.read_text()
    results = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not results:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        raise StageError(f"{pipeline} exited with code {done.returncode}: {last}")
    result: dict[str, Any] = json.loads(results[-1][len(RESULT_PREFIX) :])
    return result


def wharf_cli(args: list[str], env: dict[str, str], timeout: float) -> None:
    """Run ``wharf ARGS...``; StageError with its last error line unless it succeeded."""
    done = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise StageError(f"wharf {' '.join(args)}: {last}")


def delete_schedule(schedule: str, env: dict[str, str], timeout: float) -> None:
    """``wharf schedule delete SCHEDULE --yes``: its CronJob, then its record."""
    wharf_cli(["schedule", "delete", schedule, "--yes"], env, timeout)


def stop_run(run: str, env: dict[str, str], timeout: float) -> None:
    """``wharf runs stop RUN --force``: its step pods deleted, the run ended by its orchestrator
    (at once when no orchestrator ever beat for it)."""
    wharf_cli(["runs", "stop", run, "--force"], env, timeout)


def expect_run(result: dict[str, Any], status: str, steps: dict[str, str]) -> None:
    """StageError unless the run ended with ``status`` and exactly ``steps`` (name: status)."""
    if result["status"] != status:
        raise StageError(f"run {result['run_name']} is {result['status']}: {result['reason']}")
    seen = {name: step["status"] for name, step in result["steps"].items()}
    if seen != steps:
        raise StageError(f"run {result['run_name']}: steps {seen}, expected {steps}")


# ----------------------------------------------------------------------------- the stages


def static_pipeline(smoke: Smoke) -> str:
    stack = smoke.wharf.orchestrator_stack
    first = run_pipeline(smoke, stack, "static_pipeline", seed=smoke.smoke_id)
    expect_run(first, "completed", dict.fromkeys(("measure", "repeat", "combine"), "completed"))
    again = run_pipeline(smoke, stack, "static_pipeline", seed=smoke.smoke_id)
    expect_run(again, "completed", dict.fromkeys(("measure", "repeat", "combine"), "cached"))
    return f"run {first['run_name']}: 3 step pods; re-run {again['run_name']}: 3 steps cached"


def failing_step(smoke: Smoke) -> str:
    result = run_pipeline(
        smoke,
        smoke.wharf.orchestrator_stack,
        "failing_pipeline",
        seed=smoke.smoke_id,
        code=FAILING_EXIT_CODE,
    )
    expect_run(result, "failed", {"exit_with": "failed"})
    run_reason, step_reason = result["reason"], result["steps"]["exit_with"]["reason"]
    if f"code {FAILING_EXIT_CODE}" not in f"{run_reason} {step_reason}":
        raise StageError(
            f"exit code {FAILING_EXIT_CODE} is in neither the run's reason ({run_reason!r}) "
            f"nor the step's ({step_reason!r})"
        )
    return f"run {result['run_name']} failed ({run_reason}); step exit_with {step_reason}"


def step_operator(smoke: Smoke) -> str:
    result = run_pipeline(
        smoke, smoke.wharf.operator_stack, "operator_pipeline", seed=smoke.smoke_id
    )
    expect_run(result, "completed", {"where_am_i": "completed"})
    pod = result.get("pod") or ""
    created = f"Created pod: {pod}"
    from kubernetes import client

    events = client.CoreV1Api(smoke.api).list_namespaced_event(smoke.namespace).items
    if not pod or not any(event.message == created for event in events):
        raise StageError(
            f"the step ran in {pod or 'no pod'!r}, which no Job of the namespace created"
        )
    return f"step where_am_i ran in pod {pod} (run {result['run_name']})"


def cron_round_trip(smoke: Smoke) -> str:
    from kubernetes import client

    batch = client.BatchV1Api(smoke.api)
    scheduled = run_pipeline(
        smoke, smoke.wharf.orchestrator_stack, "scheduled_pipeline", seed=smoke.smoke_id
    )
    if "schedule_id" not in scheduled:
        raise StageError("the scheduled pipeline made a run instead of a CronJob")
    selector = f"{SCHEDULE_LABEL}={scheduled['schedule_id']}"
    cron_jobs = batch.list_namespaced_cron_job(smoke.namespace, label_selector=selector).items
    if len(cron_jobs) != 1:
        raise StageError(f"{len(cron_jobs)} CronJobs labelled {selector} in {smoke.namespace}")
    cron_job = cron_jobs[0]
    job_name = trigger_now(smoke, cron_job)
    if not wait_for_job(smoke, job_name):
        raise StageError(f"the Job {job_name} made from CronJob {cron_job.metadata.name} failed")
    fired = _fired_run(smoke, scheduled["snapshot_id"])
    delete_schedule(scheduled["schedule_id"], dict(os.environ), smoke.remaining())
    if batch.list_namespaced_cron_job(smoke.namespace, label_selector=selector).items:
        raise StageError(f"CronJob {cron_job.metadata.name} is left after the schedule's delete")
    return (
        f"Job {job_name} from CronJob {cron_job.metadata.name} completed; {fired}; schedule deleted"
    )


def trigger_now(smoke: Smoke, cron_job: Any) -> str:
    """Create a Job from the CronJob's ``jobTemplate``, as ``kubectl create job --from=cronjob/``
    does (the template's labels, annotations and spec; the CronJob as its controlling owner)."""
    from kubernetes import client

    template = cron_job.spec.job_template
    name = f"{cron_job.metadata.name}-now"
    annotations = {
        **(template.metadata.annotations or {}),
        "cronjob.kubernetes.io/instantiate": "manual",
    }
    labels = {**(template.metadata.labels or {}), SMOKE_LABEL: smoke.smoke_id}
    owner = client.V1OwnerReference(
        api_version="batch/v1",
        kind="CronJob",
        name=cron_job.metadata.name,
        uid=cron_job.metadata.uid,
        controller=True,
        block_owner_deletion=True,
    )
    job = client.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=client.V1ObjectMeta(
            name=name, labels=labels, annotations=annotations, owner_references=[owner]
        ),
        spec=template.spec,
    )
    client.BatchV1Api(smoke.api).create_namespaced_job(smoke.namespace, job)
    return name


def wait_for_job(smoke: Smoke, name: str) -> bool:
    """Whether the Job completed (False: it failed); SmokeTimeout when it does neither."""
    from kubernetes import client

    batch = client.BatchV1Api(smoke.api)
    while True:
        job = batch.read_namespaced_job_status(name, smoke.namespace)
        for condition in job.status.conditions or []:
            if condition.status == "True" and condition.type in ("Complete", "Failed"):
                return bool(condition.type == "Complete")
        smoke.remaining()
        time.sleep(POLL_SECONDS)  # polling the API for the Job's end, within the deadline


def _fired_run(smoke: Smoke, snapshot_id: str) -> str:
    """The run the triggered Job made (of the schedule's snapshot), which must have completed."""
    from wharf.store.models import RunFilter

    store = smoke.wharf.workspace.store
    runs = store.runs.list(RunFilter(snapshot_id=UUID(snapshot_id))).items
    if len(runs) != 1:
        raise StageError(f"{len(runs)} runs of the schedule's snapshot, expected 1")
    run = runs[0]
    if run.status.value != "completed":
        raise StageError(f"the fired run {run.name} is {run.status.value}: {run.status_reason}")
    return f"its run {run.name} completed"


STAGES: list[tuple[str, Callable[[Smoke], str]]] = [
    ("static pipeline + cached re-run", static_pipeline),
    ("failing step", failing_step),
    ("step operator", step_operator),
    ("CronJob round trip", cron_round_trip),
]


def run_stages(smoke: Smoke) -> bool:
    """Run every stage, one line each; whether none failed (a skip is not a failure)."""
    passed = True
    for title, stage in STAGES:
        started = time.monotonic()
        try:
            status, detail = "PASS", stage(smoke)
        except StageSkippedError as skipped:
            status, detail = "SKIP", str(skipped)
        except SmokeTimeout as timeout:
            _print_stage("FAIL", title, started, f"timed out: {timeout}")
            raise
        except Exception as error:  # any error is this stage's failure, told in one line
            status, detail = "FAIL", " ".join(str(error).split()) or type(error).__name__
        passed = passed and status != "FAIL"
        _print_stage(status, title, started, detail)
    return passed


def _print_stage(status: str, title: str, started: float, detail: str) -> None:
    elapsed = time.monotonic() - started
    print(f"{status}  {title:<32} {elapsed:6.1f} s  {detail}", flush=True)
