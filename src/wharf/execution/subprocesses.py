"""Starting, waiting for and killing a step's own process (``python -m wharf.sdk.step_entrypoint``).

The child gets the parent's environment plus what it needs to reach the same store
(``RunServices.child_env``). Its stdout and stderr go to a temporary file that is copied into
the artifact store at the step's ``logs_uri`` when the process has ended, then deleted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wharf.artifacts.store import ArtifactStore
from wharf.execution.attempts import ProcessResult
from wharf.execution.log_capture import write_log
from wharf.store.models import StepRunRecord

ENTRYPOINT_MODULE = "wharf.sdk.step_entrypoint"


@dataclass
class StepProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    step_run_id: str


def start_step_process(
    record: StepRunRecord, child_env: dict[str, str], python: str | None = None
) -> StepProcess:
    fd, log_name = tempfile.mkstemp(prefix=f"wharf-step-{record.id}-", suffix=".log")
    log_path = Path(log_name)
    env = {**os.environ, **child_env, "PYTHONUNBUFFERED": "1"}
    try:
        with os.fdopen(fd, "wb") as log:
            process = subprocess.Popen(
                [python or sys.executable, "-m", ENTRYPOINT_MODULE, str(record.id)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C in the parent's terminal is not the step's
            )
    except BaseException:
        log_path.unlink(missing_ok=True)
        raise
    return StepProcess(process, log_path, str(record.id))


def wait_step_process(step: StepProcess, timeout: float | None = None) -> ProcessResult | None:
    try:
        return ProcessResult(step.process.wait(timeout))
    except subprocess.TimeoutExpired:
        return None


def kill_step_process(step: StepProcess) -> None:
    if step.process.poll() is None:
        step.process.kill()
        step.process.wait()


def collect_logs(step: StepProcess, store: ArtifactStore, logs_uri: str | None) -> None:
    """Copy the process's output to the artifact store and remove the temporary file."""
    try:
        if logs_uri:
            write_log(store, logs_uri, step.log_path.read_bytes())
    finally:
        step.log_path.unlink(missing_ok=True)
