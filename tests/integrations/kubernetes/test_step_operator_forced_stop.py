"""``wharf runs stop --force`` of a local run whose stubborn step runs on the ``kubernetes``
step operator (its bed: :mod:`.step_operator_bed`): the command deletes the step's Job at once,
and the run's process may see the Job gone before its heartbeat tells it of the force. The step
still reads as force-stopped (the engine's words), not "deleted from outside". (A second Ctrl-C:
``test_user_interrupts``.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integrations.kubernetes.step_operator_bed import bed, wait_for_running_step
from tests.integrations.kubernetes.test_user_interrupts import LEARN, STUBBORN_STEPS
from tests.integrations.kubernetes.testbed import BOUND, Bed
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.execution.attempt_ends import FORCE_STOPPED_STEP

__all__ = ["bed"]  # the fixture


def test_a_forced_stop_from_elsewhere_reads_as_one_though_the_run_s_process_learns_it_late(
    bed: Bed, tmp_path: Path
) -> None:
    release = tmp_path / "release"  # never created
    started = tmp_path / "release.started"
    (bed.project / "stubborn_steps.py").write_text(STUBBORN_STEPS)
    script = subprocess.Popen(  # beats every 30 s: it learns of the force late
        [sys.executable, "stubborn_steps.py", str(release)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**bed.env, "WHARF_ACTIVE_STACK": "operated", "WHARF_HEARTBEAT_INTERVAL": "30"},
        cwd=bed.project,
    )
    try:
        running = wait_for_running_step(bed, "stubborn")
        assert wait_until(started.exists, BOUND), "the step's code never ran"
        stop = [sys.executable, "-m", "wharf.cli.main", "runs", "stop", str(running.run_id)]
        done = subprocess.run(
            [*stop, "--force"],
            check=False,
            env=bed.env,
            capture_output=True,
            text=True,
            timeout=BOUND,
        )
        assert done.returncode == 0, done.stderr
        steps = bed.workspace.store.steps
        assert wait_until(lambda: steps.get(running.id).status.is_finished, LEARN)
    finally:
        script.kill()
        output, _ = script.communicate(timeout=BOUND)
    step = steps.get(running.id)
    assert (step.status, step.status_reason) == (ExecutionStatus.STOPPED, FORCE_STOPPED_STEP), (
        output
    )
