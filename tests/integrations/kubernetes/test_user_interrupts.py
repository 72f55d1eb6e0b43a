"""The user's own process interrupted while a run is on Kubernetes, with real processes on the
step operator's bed (:mod:`.step_operator_bed`): the user's script is a process of its own
(``start_script``), signalled by pid as a terminal would (never the test's process group).

- Ctrl-C to a synchronous run on the Kubernetes orchestrator only stops following (as
  documented): the call returns the run as it is, having said how to follow it, without a
  traceback (a second Ctrl-C while it says so included); the run completes in the cluster
  and its step Jobs and Secrets go (the orchestrator Job stays, as after any synchronous run,
  unless ``ttl_seconds_after_finished`` is set);
- Ctrl-C while the orchestrator Job is being created (the emulator holds its create) waits
  for the cluster's answer, then stops following as above: the run is kept for the Job's pod
  and completes; a second Ctrl-C stops waiting: the call returns the run, kept as its Job may
  exist, and says how to check and stop it (the Job, created after all, runs it);
- Ctrl-C to a local run whose step runs on the Kubernetes step operator stops the run as for
  local steps: the step's pod is interrupted, the run ends stopped, nothing is left, and the
  process exits as interrupted; a second Ctrl-C forces it (a step that ignores the graceful
  stop: its Job is deleted);
- kill -9 of that local process: the sweep ends the run lost and its step failed; the step's
  pod learns it through its heartbeat and stops. Its Job goes once its
  ``ttl_seconds_after_finished`` has passed (a day by default; 1 s here, a per-step setting)
  and takes its own Secret of credentials along (the Job owns it): nothing is left.

Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path
from uuid import UUID

from tests.integrations.kubernetes.step_operator_bed import (
    CLEANUP,
    OPERATOR,
    SCRIPT,
    bed,
    step_jobs,
    wait_for_running_step,
)
from tests.integrations.kubernetes.testbed import (
    BOUND,
    Bed,
    nothing_left,
    remaining_secrets,
    start_script,
    steps_of,
    wait_for_run_end,
)
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ExecutionStatus
from wharf.execution.attempt_ends import FORCE_STOPPED_STEP
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.store.models import PipelineRunRecord, StepRunRecord

__all__ = ["bed"]  # the fixture

PROMPT = 20.0
"""Seconds: how soon an interrupted script must have exited."""
LEARN = 60.0
"""Seconds: ample for a step pod to learn its run's end (heartbeat every 2 s), on a busy machine too."""


def interrupt(script: subprocess.Popen[str]) -> tuple[int, str, float]:
    """Ctrl-C to the script (SIGINT, to its process only); its exit code, its output and how
    long it took to exit."""
    sent = time.monotonic()
    os.kill(script.pid, signal.SIGINT)
    try:
        output, _ = script.communicate(timeout=PROMPT)
    except subprocess.TimeoutExpired:
        script.kill()
        output, _ = script.communicate()
        raise AssertionError(f"the script did not exit within {PROMPT} s:\n{output}") from None
    return script.returncode, output, time.monotonic() - sent


def run_of(bed: Bed, step: StepRunRecord) -> PipelineRunRecord:
    return bed.workspace.store.runs.get(step.run_id)


def step_pod_gone(bed: Bed, run: PipelineRunRecord) -> bool:
    """Every step pod of ``run`` ended (its process exited) or was deleted."""
    pods = bed.seen.step_objects("Pod", run)
    return bool(pods) and all(
        bed.seen.gone("Pod", p)
        or bed.seen.last_state(p).get("status", {}).get("phase") in ("Succeeded", "Failed")
        for p in pods
    )


# ----------------------------------------------------------------------------- orchestrator


SECOND_CTRL_C = """
import os
import runpy
import signal
import sys


class SecondCtrlC:
    \"\"\"Standard output that gets a second Ctrl-C the moment it is told that following stopped
    (a user pressing Ctrl-C again while it says so).\"\"\"

    def __init__(self, inner):
        self.inner = inner
        self.sent = False

    def write(self, text):
        if "Stopped following" in text and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)
        return self.inner.write(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


sys.stdout = SecondCtrlC(sys.stdout)
runpy.run_path("run.py", run_name="__main__")
"""


ONE_STEP = f"""
import pathlib
import time

from wharf import pipeline, step


@step(step_operator="{OPERATOR}")
def wait_for(path: str) -> int:
    print("waiting for", path, flush=True)
    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def stoppable(path: str) -> None:
    wait_for(path)
"""
"""``stoppable`` with one step, for a scenario whose run need only complete: a pod fewer."""


def write_one_step(bed: Bed) -> str:
    """The project's ``one_step.py``: ``run.py`` for :data:`ONE_STEP`'s pipeline; its name."""
    (bed.project / "one_step_steps.py").write_text(ONE_STEP)
    (bed.project / "one_step.py").write_text(SCRIPT.replace("k8s_op_steps", "one_step_steps"))
    return "one_step.py"


def start_steps(bed: Bed, name: str, text: str, release: Path) -> subprocess.Popen[str]:
    """The project's script ``name`` (written from ``text``) run on the local orchestrator with
    the operator (stack ``operated``), its step waiting for ``release``; its output, stderr
    included, on ``stdout``."""
    (bed.project / name).write_text(text)
    return subprocess.Popen(
        [sys.executable, name, str(release)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**bed.env, "WHARF_ACTIVE_STACK": "operated"},
        cwd=bed.project,
    )


def start_following(bed: Bed, release: Path, script: str) -> subprocess.Popen[str]:
    """The project's ``script`` running ``stoppable`` (its step waits for ``release``) on the
    Kubernetes orchestrator, synchronously (its output, stderr included, on ``stdout``)."""
    parameters = json.dumps({"path": str(release)})
    return subprocess.Popen(
        [sys.executable, script, "stoppable", parameters],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**bed.env, "WHARF_ACTIVE_STACK": "k8s-operated"},
        cwd=bed.project,
    )


def ctrl_c_while_following(
    bed: Bed, tmp_path: Path, script: str, steps_run: set[str] | None = None
) -> None:
    """Ctrl-C to ``script`` following its run once its first step runs; the run then goes on
    in the cluster and its steps (``steps_run``: ``stoppable``'s two unless said) complete."""
    release = tmp_path / "release"
    following = start_following(bed, release, script)
    try:
        running = wait_for_running_step(bed, "wait_for")
        code, output, took = interrupt(following)
    finally:
        following.kill()
    run = run_of(bed, running)
    assert "Traceback" not in output, output
    assert took < PROMPT
    assert f"Stopped following run {run.name}; it goes on in the cluster" in output, output
    assert f"wharf runs logs {run.name} --follow" in output, output
    # The call returns the run as it is (the script goes on: it prints it), and exits normally.
    assert code == 0, output
    assert f"RUN {run.id} running" in output, output
    assert not run.status.is_finished, run.status_reason

    release.touch()  # the run goes on in the cluster: its step completes, the next one runs
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    steps = steps_of(bed, ended)
    assert {s.status for s in steps.values()} == {ExecutionStatus.COMPLETED}, steps
    assert set(steps) == (steps_run or {"wait_for", "prepare"})
    assert wait_until(lambda: not remaining_secrets(bed.emulator), CLEANUP), "a Secret is left"
    for job in step_jobs(bed, run):
        if STEP_KEY in job["metadata"]["labels"]:
            assert wait_until(partial(bed.seen.gone, "Job", job), CLEANUP), "a step Job"


def test_ctrl_c_stops_following_a_synchronous_run_which_completes_in_the_cluster(
    bed: Bed, tmp_path: Path
) -> None:
    ctrl_c_while_following(bed, tmp_path, "run.py")


def test_a_second_ctrl_c_while_it_says_so_neither_fails_the_run_nor_prints_a_traceback(
    bed: Bed, tmp_path: Path
) -> None:
    """Before, the second Ctrl-C escaped the call, which took the run for one that failed to
    start: it ended the run failed in the store while its pods ran on. (That the next step
    starts after the first Ctrl-C is the test above's: here the run has one step.)"""
    one_step = write_one_step(bed)
    (bed.project / "second_ctrl_c.py").write_text(SECOND_CTRL_C.replace("run.py", one_step))
    ctrl_c_while_following(bed, tmp_path, "second_ctrl_c.py", {"wait_for"})


HOLD = 5.0
"""Seconds the emulator holds the orchestrator Job's create: ample to press Ctrl-C during it."""


def ctrl_c_during_the_job_create(
    bed: Bed, tmp_path: Path, presses: int
) -> tuple[int, str, float, PipelineRunRecord]:
    """Ctrl-C ``presses`` times (each once the script said it got the one before) to a
    synchronous run on the Kubernetes orchestrator while the cluster holds the create of its
    orchestrator Job; the script's exit code, its output, how long it took to exit after the
    first Ctrl-C and its run (which must still exist, and completes in the cluster: the run of
    :data:`ONE_STEP`)."""
    bed.emulator.faults.delay("create", HOLD, "jobs")  # the first Job: the orchestrator's
    release = tmp_path / "release"
    script = start_following(bed, release, write_one_step(bed))
    lines: list[str] = []

    def read() -> None:
        assert script.stdout is not None
        for line in script.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert wait_until(lambda: bed.emulator.faults.pending_delays() == 0, BOUND), "no create"
        sent = time.monotonic()
        for press in range(presses):
            if press:  # as a user does: once told that the first one was taken
                assert wait_until(lambda: any("Ctrl-C again" in x for x in lines), PROMPT)
            os.kill(script.pid, signal.SIGINT)
        code = script.wait(timeout=HOLD + PROMPT)
        took = time.monotonic() - sent
    finally:
        script.kill()
    reader.join(PROMPT)
    output = "".join(lines)
    reported = [line for line in lines if line.startswith("RUN ")]
    assert reported, output
    run = bed.workspace.store.runs.get(UUID(reported[-1].split()[1]))  # kept
    release.touch()  # the run goes on in the cluster: its steps complete
    ended = wait_for_run_end(bed, run)
    steps = {name: step.status_reason for name, step in steps_of(bed, ended).items()}
    assert ended.status is ExecutionStatus.COMPLETED, f"{ended.status_reason} {steps}\n{output}"
    return code, output, took, run


def test_ctrl_c_while_the_orchestrator_job_is_created_waits_for_it_then_stops_following(
    bed: Bed, tmp_path: Path
) -> None:
    """Before, the Ctrl-C cut the create short and the client deleted the run as one that
    failed to start, while the cluster created its Job: its pod found no run."""
    code, output, _, run = ctrl_c_during_the_job_create(bed, tmp_path, presses=1)
    assert "Traceback" not in output, output
    assert code == 0, output
    assert "Ctrl-C: waiting for the cluster to create the orchestrator Job" in output, output
    assert f"Stopped following run {run.name} before it started" in output, output
    assert f"wharf runs logs {run.name} --follow" in output, output


def test_a_second_ctrl_c_while_the_orchestrator_job_is_created_keeps_the_run_for_it(
    bed: Bed, tmp_path: Path
) -> None:
    """The create's answer never came: the Job may exist, so the run is kept (and the Job,
    created after all, runs it)."""
    code, output, took, run = ctrl_c_during_the_job_create(bed, tmp_path, presses=2)
    assert "Traceback" not in output, output
    assert code == 0, output
    assert took < HOLD, output  # it did not wait for the create
    assert f"of run {run.name}: the Job may exist and run it, so the run is kept" in output
    assert f"wharf runs stop --force {run.name}" in output, output


# ----------------------------------------------------------------------------- step operator


def test_ctrl_c_stops_a_local_run_and_its_operator_step_pod(bed: Bed, tmp_path: Path) -> None:
    release = tmp_path / "release"  # never created: only the stop ends the step
    script = start_script(bed, "stoppable", "operated", path=str(release))
    try:
        running = wait_for_running_step(bed, "wait_for")
        assert wait_until(lambda: bed.workspace.store.steps.get(running.id).pid, BOUND)
        code, output, took = interrupt(script)
    finally:
        script.kill()
    assert "Traceback" not in output, output
    assert code == -signal.SIGINT, output  # as a local run's (130 in a shell)
    assert "Stopping run" in output, output
    run = run_of(bed, running)
    assert run.status is ExecutionStatus.STOPPED, run.status_reason
    steps = steps_of(bed, run)
    assert steps["wait_for"].status is ExecutionStatus.STOPPED, steps["wait_for"].status_reason
    assert "prepare" not in steps
    assert step_pod_gone(bed, run)
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"
    assert took < PROMPT


STUBBORN_STEPS = f"""
import pathlib
import sys
import time

from wharf import pipeline, step


@step(step_operator="{OPERATOR}")
def stubborn(path: str) -> int:
    print("waiting for", path, flush=True)
    while True:
        try:
            pathlib.Path(path + ".started").touch()  # from here on, an interrupt is caught
            while not pathlib.Path(path).exists():
                time.sleep(0.05)
            return 1
        except BaseException:  # the graceful stop's interrupt: ignored
            pathlib.Path(path + ".interrupted").write_text("yes")


@pipeline(enable_cache=False, raise_on_failure=False)
def stubbornly(path: str) -> None:
    stubborn(path)


if __name__ == "__main__":
    stubbornly(sys.argv[1])
"""


def test_a_second_ctrl_c_forces_the_stop_of_a_stubborn_operator_step(
    bed: Bed, tmp_path: Path
) -> None:
    """A step that ignores the graceful stop: the second Ctrl-C deletes its Job (its pod is
    killed), the run ends stopped, nothing is left, the process exits as interrupted.

    The first Ctrl-C comes once the step's code runs inside its ``try``. Its pod's process
    records its pid before it fetches the run's code and imports the step (tens of seconds on
    a busy machine); a stop it learns meanwhile is kept and ends the step as its code would
    start (``InterruptibleRegion``), so the step itself would never see it."""
    release = tmp_path / "release"  # never created
    started = tmp_path / "release.started"
    interrupted = tmp_path / "release.interrupted"
    script = start_steps(bed, "stubborn_steps.py", STUBBORN_STEPS, release)
    try:
        running = wait_for_running_step(bed, "stubborn")
        assert wait_until(started.exists, BOUND), "the step's code never ran"
        os.kill(script.pid, signal.SIGINT)
        assert wait_until(interrupted.exists, LEARN), "the step never saw the graceful stop"
        code, output, took = interrupt(script)
    finally:
        script.kill()
    assert "Traceback" not in output, output
    assert "Forcing the stop" in output, output
    assert code == -signal.SIGINT, output
    run = run_of(bed, running)
    assert run.status is ExecutionStatus.STOPPED, run.status_reason
    step = bed.workspace.store.steps.get(running.id)
    assert step.status is ExecutionStatus.STOPPED, step.status_reason
    assert step.status_reason == FORCE_STOPPED_STEP  # not "killed by SIGTERM": the force did
    assert step_pod_gone(bed, run)
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"
    assert took < PROMPT


def kill_the_local_process_once_its_step_pod_runs(
    bed: Bed,
    release: Path,
    script: subprocess.Popen[str] | None = None,
    step: str = "wait_for",
    started: Path | None = None,
) -> PipelineRunRecord:
    """Start ``stoppable`` on the local orchestrator (its step, on the operator, waits for
    ``release``) unless ``script`` runs already, kill -9 the script once the step's pod runs
    ``step`` (and, given ``started``, once the step's code has created that file), and sweep:
    the run as the sweep ended it."""
    if script is None:
        script = start_script(bed, "stoppable", "operated", path=str(release))
    try:
        running = wait_for_running_step(bed, step)
        assert wait_until(lambda: bed.workspace.store.steps.get(running.id).pid, BOUND)
        if started is not None:
            assert wait_until(started.exists, BOUND), "the step's code never ran"
        os.kill(script.pid, signal.SIGKILL)
        script.communicate(timeout=BOUND)
    finally:
        script.kill()
    # The run's liveness sweep (any Client read on this machine, which sees the process gone;
    # elsewhere or on a workspace server, once the run's heartbeat deadline passed).
    with Client(bed.workspace.config, bed.workspace.store) as client:
        run = client.get_pipeline_run(running.run_id)
    assert run.status is ExecutionStatus.FAILED, run.status_reason
    assert "orchestrator lost" in (run.status_reason or "")
    return run


def test_a_killed_local_process_s_stubborn_operator_step_pod_is_cut_off_after_its_grace(
    bed: Bed, tmp_path: Path
) -> None:
    """The step ignores the interrupt its pod's heartbeat raises once the run is lost: the
    step process exits once its ``pod_stop_grace_period`` (2 s here) has passed."""
    grace = 'settings={"step_operator.kubernetes": {"pod_stop_grace_period": 2}}'
    steps = STUBBORN_STEPS.replace(
        f'@step(step_operator="{OPERATOR}")', f'@step(step_operator="{OPERATOR}", {grace})'
    )
    assert grace in steps
    release = tmp_path / "release"  # never created
    script = start_steps(bed, "stubborn_steps.py", steps, release)
    started = tmp_path / "release.started"  # a loss learnt before the step's code runs ends it
    run = kill_the_local_process_once_its_step_pod_runs(bed, release, script, "stubborn", started)
    interrupted = tmp_path / "release.interrupted"
    assert wait_until(interrupted.exists, LEARN), "the step never learnt its run was lost"
    assert wait_until(lambda: step_pod_gone(bed, run), LEARN), "the step pod runs on"
    (step,) = steps_of(bed, run).values()
    assert step.status is ExecutionStatus.FAILED, step.status_reason  # the sweep's end stands
    assert "orchestrator lost" in (step.status_reason or ""), step.status_reason


EXPIRING_STEPS = f"""
import pathlib
import sys
import time

from wharf import pipeline, step

TTL = {{"step_operator.kubernetes": {{"ttl_seconds_after_finished": 1}}}}


@step(step_operator="{OPERATOR}", settings=TTL)
def wait_for(path: str) -> int:
    print("waiting for", path, flush=True)
    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def expiring(path: str) -> None:
    wait_for(path)


if __name__ == "__main__":
    expiring(sys.argv[1])
"""


def test_a_killed_local_process_s_operator_step_pod_stops_once_its_run_is_lost_leaving_nothing(
    bed: Bed, tmp_path: Path
) -> None:
    """The step's pod learns through its heartbeat that its run is lost and stops (nothing
    else ends the step: ``release`` is never created). Nobody is left to delete the step's
    Job: its TTL does (1 s after it finished, set for the step), and the garbage collector its
    Secret, which the Job owns."""
    release = tmp_path / "release"  # never created
    script = start_steps(bed, "expiring_steps.py", EXPIRING_STEPS, release)
    run = kill_the_local_process_once_its_step_pod_runs(bed, release, script)
    assert remaining_secrets(bed.emulator), "the step's Secret went before its Job ended"
    assert wait_until(lambda: step_pod_gone(bed, run), LEARN), "the step pod runs on"
    assert wait_until(lambda: nothing_left(bed.emulator), LEARN), "a Job or Secret is left"
