"""Dynamic pipelines on the Kubernetes orchestrator, end to end on the test bed.

The orchestrator pod runs the pipeline's function (imported from the run's code archive) with
the engine's dynamic runner; every step it launches runs as a Job/pod of its own, its caching
decided right before its pod. The pipelines here decide their fan-out at run time (from a step's
output), so their steps exist only once the pod ran that step. One pipeline is defined in a
module the submitting script imports, one in the script itself (``__main__``). Each attempt of
a retried step is a pod of its own; stopped runs end stopped with no further step pod (a
graceful stop lets the running step pod finish, a forced one ends it). A killed orchestrator
pod is restarted by its Job and resumes the run by running the function again: the steps that
finished are not run again, the running step's pod is adopted; a function that calls a step
differently on the restarted pod, or returns without calling one the earlier pod called, ends
the run failed, naming the step, and the earlier step pod still running is ended."""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import pytest

from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    Bed,
    BedFactory,
    attempts,
    kill_orchestrator_pod,
    metadata_of,
    orchestrator_logs,
    orchestrator_pods,
    register_kubernetes_stack,
    reported_run_id,
    run_in_project,
    runner_script,
    step_statuses,
    steps_of,
    stop_gracefully_once_seen,
    submit_script,
    wait_for_run_end,
    wait_for_step,
)
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.integrations.kubernetes.orchestrator_dynamic import SCRIPT_KEY
from wharf.store.models import PipelineRunRecord

DYNAMIC_MODULE = """
from wharf import pipeline, step


@step
def count_of(n: int) -> int:
    return n


@step
def square(x: int) -> int:
    print("squaring", x)
    return x * x


@step
def summed(values: list) -> int:
    return sum(values)


@pipeline(dynamic=True)
def fan_out(n: int = 3) -> None:
    count = count_of(n)
    squares = square.map(list(range(count.load())))
    summed(squares.load())


@step
def explode(x: int) -> int:
    raise ValueError(f"no good: {x}")


@pipeline(dynamic=True, raise_on_failure=False)
def failing_fan_out() -> None:
    count = count_of(2)
    exploded = explode.map(list(range(count.load())))
    square(sum(exploded.load()))  # never reached: loading a failed step's output raises


@step(enable_cache=False)
def wait_for(path: str) -> int:
    import pathlib
    import time

    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@step(enable_cache=False)
def after_wait(value: int) -> int:
    return value


@pipeline(dynamic=True, enable_cache=False, raise_on_failure=False)
def stoppable(path: str) -> None:
    after_wait(wait_for(path))


@step(enable_cache=False, retry={"max_retries": 1})
def flaky(path: str) -> int:
    import pathlib

    marker = pathlib.Path(path)
    if not marker.exists():  # the first attempt fails; the retry finds the marker
        marker.touch()
        raise RuntimeError("first attempt fails")
    return 1


@pipeline(dynamic=True, enable_cache=False)
def retried(path: str) -> None:
    after_wait(flaky.submit(path))


def ran(log: str, line: str) -> None:
    with open(log, "a") as f:
        f.write(line + "\\n")


@step(enable_cache=False)
def bumped(log: str, value: int) -> int:
    ran(log, f"bumped {value}")
    return value + 1


@step(enable_cache=False)
def held(log: str, release: str, value: int) -> int:
    import pathlib
    import time

    ran(log, f"held {value}")
    while not pathlib.Path(release).exists():
        time.sleep(0.05)
    return value + 1


@pipeline(dynamic=True, enable_cache=False, raise_on_failure=False)
def replayed(log: str, release: str, start: str) -> None:
    import pathlib

    first = pathlib.Path(start).read_text()  # read again by a restarted orchestrator pod
    twice = bumped(log, bumped(log, 1 if first == "skip" else int(first)))
    if first != "skip":
        bumped(log, held(log, release, twice))
"""

MODULE_SCRIPT = runner_script("k8s_dynamic")

IN_SCRIPT = """
from wharf import pipeline, step


@step
def halve(x: int) -> int:
    return x // 2


@step
def count_of(n: int) -> int:
    return n


@pipeline(dynamic=True)
def in_script(n: int = 2) -> None:
    halve.map([10 * (i + 1) for i in range(count_of(n).load())])


run = in_script()  # no __main__ guard: the pods that load this script must not run it
print("RUN", run.id, run.status.value)
"""


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    """The bed with stacks ``k8s`` (synchronous), ``k8s-async`` and ``k8s-serial`` (one step
    at a time: ``max_parallelism=1``)."""
    made = make_bed(
        {"k8s_dynamic.py": DYNAMIC_MODULE, "run.py": MODULE_SCRIPT, "in_script.py": IN_SCRIPT},
        active_stack="k8s",
    )
    ws = made.workspace
    register_kubernetes_stack(ws, "k8s", {"image": IMAGE, "job_monitoring_interval": 0.5})
    register_kubernetes_stack(
        ws, "k8s-async", {"image": IMAGE, "synchronous": False, "pod_stop_grace_period": 5}
    )
    register_kubernetes_stack(
        ws, "k8s-serial", {"image": IMAGE, "job_monitoring_interval": 0.5, "max_parallelism": 1}
    )
    return made


def step_pods(bed: Bed, run: PipelineRunRecord) -> list[str]:
    """The step names of the pods of ``run``'s step Jobs, sorted."""
    pods = bed.seen.of_run("Pod", str(run.id))
    return sorted(
        p["metadata"]["labels"][STEP_KEY] for p in pods if STEP_KEY in p["metadata"]["labels"]
    )


def test_a_dynamic_fan_out_runs_each_step_in_its_own_pod_within_max_parallelism_and_is_cached(
    bed: Bed,
) -> None:
    """The first run is on ``k8s-serial`` (``max_parallelism=1``: its squares one at a time),
    the same run again on ``k8s`` (the cache is the artifact store's, both stacks' own)."""
    run, output = submit_script(bed, "fan_out", stack="k8s-serial", n=3)
    assert run.status is ExecutionStatus.COMPLETED, output
    assert run.orchestrator_run_id is not None
    assert run.orchestrator_run_id.startswith("kubernetes-")
    expected = ["count_of", "square_0", "square_1", "square_2", "summed"]
    assert sorted(step_statuses(bed, run)) == expected
    assert set(step_statuses(bed, run).values()) == {ExecutionStatus.COMPLETED}
    assert step_pods(bed, run) == expected  # one pod per step, the fan-out decided in the pod
    assert len(orchestrator_pods(bed, run)) == 1
    squares = sorted(
        (s for s in steps_of(bed, run).values() if s.name.startswith("square_")),
        key=lambda s: s.start_time or s.created,
    )
    for earlier, later in pairwise(squares):
        assert earlier.end_time is not None and later.start_time is not None
        assert later.start_time >= earlier.end_time, (earlier.name, later.name)  # one at a time
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(run.id, "square_2") == 4
        assert client.load_step_output(run.id, "summed") == 5
        assert "squaring 2" in client.step_logs("square_2", run=run.id)

    # The same run again: every step is cached right before its pod, so no step pod starts.
    again, output = submit_script(bed, "fan_out", n=3)
    assert again.status is ExecutionStatus.COMPLETED, output
    assert sorted(step_statuses(bed, again)) == expected
    assert set(step_statuses(bed, again).values()) == {ExecutionStatus.CACHED}
    assert step_pods(bed, again) == []
    assert len(orchestrator_pods(bed, again)) == 1
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(again.id, "summed") == 5


def test_a_failing_step_of_a_dynamic_pipeline_fails_the_run(bed: Bed) -> None:
    run, output = submit_script(bed, "failing_fan_out")
    assert run.status is ExecutionStatus.FAILED, output
    assert "explode" in (run.status_reason or ""), run.status_reason
    steps = steps_of(bed, run)
    assert steps["count_of"].status is ExecutionStatus.COMPLETED
    assert {steps["explode_0"].status, steps["explode_1"].status} == {ExecutionStatus.FAILED}
    assert "no good: 0" in (steps["explode_0"].status_reason or "")
    assert "square" not in steps  # the body stopped at the failure
    assert step_pods(bed, run) == ["count_of", "explode_0", "explode_1"]
    # The orchestrator pod exited 1 (the run ended failed): its Job started no second pod.
    assert len(orchestrator_pods(bed, run)) == 1


def test_a_retried_step_of_a_dynamic_pipeline_runs_each_attempt_in_a_pod_of_its_own(
    bed: Bed, tmp_path: Path
) -> None:
    run, output = submit_script(bed, "retried", path=str(tmp_path / "tried"))
    assert run.status is ExecutionStatus.COMPLETED, output
    flaky = [s for s in attempts(bed, run) if s.name == "flaky"]
    assert sorted((s.attempt, s.status) for s in flaky) == [
        (1, ExecutionStatus.RETRYING),
        (2, ExecutionStatus.COMPLETED),
    ]
    assert "first attempt fails" in (flaky[0].status_reason or "")
    assert step_pods(bed, run) == ["after_wait", "flaky", "flaky"]


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "forced"])
def test_a_stopped_dynamic_run_starts_no_further_step_pod_and_ends_stopped(
    bed: Bed, tmp_path: Path, force: bool
) -> None:
    """A graceful stop lets the running step pod finish; a forced one ends it."""
    release = tmp_path / "release"
    run, _ = submit_script(bed, "stoppable", stack="k8s-async", path=str(release))
    waiting = wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)
    if force:
        with Client(bed.workspace.config, bed.workspace.store) as client:
            client.stop_run(run.id, force=True)
    else:
        stop_gracefully_once_seen(bed, waiting)
        release.touch()
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.STOPPED, ended.status_reason
    step = bed.workspace.store.steps.get(waiting.id)
    expected = ExecutionStatus.STOPPED if force else ExecutionStatus.COMPLETED
    assert step.status is expected, step.status_reason
    assert step_pods(bed, run) == ["wait_for"]
    assert "after_wait" not in step_statuses(bed, ended)


def test_a_dynamic_pipeline_defined_in_the_submitting_script_runs_on_kubernetes(
    bed: Bed,
) -> None:
    done = run_in_project(bed, sys.executable, "in_script.py")
    assert done.returncode == 0, done.stdout + done.stderr
    run = bed.workspace.store.runs.get(reported_run_id(done))
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert step_pods(bed, run) == ["count_of", "halve_0", "halve_1"]
    assert metadata_of(bed, run)[SCRIPT_KEY] == str((bed.project / "in_script.py").resolve())
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(run.id, "halve_1") == 10
    assert len(orchestrator_pods(bed, run)) == 1


def start_replayed(bed: Bed, tmp_path: Path) -> tuple[PipelineRunRecord, Path, Path, Path]:
    """Submit ``replayed`` (its function reads 1 from its start file) on the asynchronous
    stack and return once its orchestrator pod was killed while ``held``'s pod runs (called
    as ``bumped``, ``bumped_2``, ``held``, ``bumped_3``); the run, its log (each step's process
    appends a line), the release file and the start file."""
    log, release, start = tmp_path / "ran.log", tmp_path / "release", tmp_path / "start"
    start.write_text("1")
    parameters = {"log": str(log), "release": str(release), "start": str(start)}
    run, _ = submit_script(bed, "replayed", stack="k8s-async", **parameters)
    wait_for_step(bed, run, "held", ExecutionStatus.RUNNING)
    assert wait_until(lambda: log.exists() and "held 3" in log.read_text().splitlines(), BOUND)
    return run, log, release, start


def test_a_killed_orchestrator_pod_resumes_a_dynamic_run_by_replaying_its_function(
    bed: Bed, tmp_path: Path
) -> None:
    run, log, release, _ = start_replayed(bed, tmp_path)
    started = kill_orchestrator_pod(bed, run)
    release.touch()
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, orchestrator_logs(bed, run)
    assert ended.orchestrator_run_id == started.orchestrator_run_id  # the same Job's run
    # Each step's process ran once: the finished ones were not run again, held was adopted.
    assert log.read_text().splitlines() == ["bumped 1", "bumped 2", "held 3", "bumped 4"]
    assert sorted((s.name, s.attempt, s.status) for s in attempts(bed, run)) == [
        ("bumped", 1, ExecutionStatus.COMPLETED),
        ("bumped_2", 1, ExecutionStatus.COMPLETED),
        ("bumped_3", 1, ExecutionStatus.COMPLETED),
        ("held", 1, ExecutionStatus.COMPLETED),
    ]
    assert step_pods(bed, run) == ["bumped", "bumped_2", "bumped_3", "held"]  # one pod each
    assert len(orchestrator_pods(bed, run)) == 2
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(run.id, "held") == 4
        assert client.load_step_output(run.id, "bumped_3") == 5


@pytest.mark.parametrize(
    ("start_with", "reason"),
    [
        ("7", "called step 'bumped' differently (other parameters)"),  # calls bumped(7)
        ("skip", "did not call step(s) held again"),  # returns after bumped_2
    ],
    ids=["called-differently", "left-out"],
)
def test_a_restarted_orchestrator_pod_whose_function_calls_its_steps_differently_fails_the_run(
    bed: Bed, tmp_path: Path, start_with: str, reason: str
) -> None:
    run, log, _, start = start_replayed(bed, tmp_path)
    start.write_text(start_with)  # what the restarted pod's function reads
    kill_orchestrator_pod(bed, run)
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.FAILED, orchestrator_logs(bed, run)
    assert reason in (ended.status_reason or ""), ended.status_reason
    assert "replays the same calls" in (ended.status_reason or "")
    # Nothing was run again and no call's outputs reused for another; the running step was
    # ended, its Job deleted.
    steps = steps_of(bed, run)
    assert sorted((s.name, s.attempt, s.status) for s in steps.values()) == [
        ("bumped", 1, ExecutionStatus.COMPLETED),
        ("bumped_2", 1, ExecutionStatus.COMPLETED),
        ("held", 1, ExecutionStatus.FAILED),
    ]
    held_reason = steps["held"].status_reason or ""
    assert "not called again after the run's orchestrator restarted" in held_reason
    assert step_pods(bed, run) == ["bumped", "bumped_2", "held"]
    (held_job,) = [
        j for j in bed.seen.step_objects("Job", run) if j["metadata"]["labels"][STEP_KEY] == "held"
    ]
    assert wait_until(lambda: bed.seen.gone("Job", held_job), BOUND), orchestrator_logs(bed, run)
    assert log.read_text().splitlines() == ["bumped 1", "bumped 2", "held 3"]
    assert len(orchestrator_pods(bed, run)) == 2
