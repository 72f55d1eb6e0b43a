"""Steps shared by the end-to-end tests (importable, so runs can resolve them by source)."""

from __future__ import annotations

import threading
from typing import Annotated

from wharf import step

EVENTS: list[str] = []
RELEASE = threading.Event()
SLOW_STARTED = threading.Event()
FLAKY_COUNTS: dict[str, int] = {}


@step(enable_cache=False)
def merge(a: int = 0, b: int = 0, c: int = 0, label: str = "", fail: bool = False) -> int:
    EVENTS.append(label)
    if fail:
        raise RuntimeError(f"boom in {label}")
    return a + b + c + 1


@step(enable_cache=False)
def wait_for_release(label: str = "") -> int:
    """Runs until released or interrupted; records its cleanup."""
    SLOW_STARTED.set()
    try:
        while not RELEASE.wait(0.005):
            pass
        return 1
    finally:
        EVENTS.append(f"cleanup:{label}")


@step(enable_cache=False)
def wait_for_a_failure() -> int:
    """Finish only once another step of this run has been recorded failed."""
    import time

    from wharf import Client, get_step_context

    run_id = get_step_context().pipeline_run.id
    with Client() as client:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if client.list_run_steps(run_id, status="failed").total:
                # the failed step's thread still has to hand its outcome to the runner
                time.sleep(0.3)
                return 1
            time.sleep(0.01)
    raise TimeoutError("no step failed")


@step(enable_cache=False)
def fail_once_slow_started() -> None:
    """Fail only once `wait_for_release` is inside its body, so fail-fast has a step to interrupt."""
    if not SLOW_STARTED.wait(30):
        raise TimeoutError("the slow step never started")
    raise RuntimeError("failing while the slow step runs")


@step(enable_cache=False)
def release_then_fail() -> None:
    RELEASE.set()
    raise RuntimeError("failing after releasing the slow step")


@step(enable_cache=False)
def flaky(key: str, failures: int) -> int:
    FLAKY_COUNTS[key] = FLAKY_COUNTS.get(key, 0) + 1
    if FLAKY_COUNTS[key] <= failures:
        raise ValueError(f"attempt {FLAKY_COUNTS[key]} failed")
    return FLAKY_COUNTS[key]


@step
def produce(value: int = 1) -> int:
    return value


@step
def double(x: int) -> int:
    return 2 * x


@step
def two_outputs(x: int) -> tuple[Annotated[int, "low"], Annotated[int, "high"]]:
    return x - 1, x + 1


# --- steps for isolated (subprocess) tests: state lives in files, not in memory -------------


@step(enable_cache=False)
def whoami(label: str = "") -> int:
    """Report the process id the step ran in; print something for the log."""
    import os

    print(f"hello from {label} in {os.getpid()}")
    return os.getpid()


@step(enable_cache=False)
def self_kill() -> int:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return 0


@step(enable_cache=False)
def exit_without_reporting(code: int = 7) -> int:
    import os

    os._exit(code)


@step(enable_cache=False)
def unserialisable() -> object:
    return threading.Lock()


@step(enable_cache=False)
def stop_own_run_then_wait(marker: str, force: bool = False, stubborn: bool = False) -> int:
    """Ask for this run to stop (as another process would), then wait to be interrupted."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from wharf import get_step_context

    run_id = str(get_step_context().pipeline_run.id)
    command = [sys.executable, "-m", "wharf.cli.main", "runs", "stop", run_id]
    if force:
        command.append("--force")
    try:
        subprocess.Popen(command)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                time.sleep(0.01)
            except BaseException:
                if not stubborn:
                    raise
        return 0
    finally:
        Path(marker).write_text("cleaned up")


@step(enable_cache=False)
def file_flaky(counter: str, failures: int) -> int:
    from pathlib import Path

    path = Path(counter)
    count = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(count))
    if count <= failures:
        raise ValueError(f"attempt {count} failed")
    return count


@step(enable_cache=False, runtime="isolated")
def isolated_double(x: int) -> int:
    return 2 * x


@step(enable_cache=False)
def repr_of(value: object) -> str:
    """What the step was given, as Python shows it (its types too), and its process id."""
    import os

    return f"{os.getpid()} {value!r}"


@step
def noop() -> None:
    return None


@step(enable_cache=False)
def freeze() -> int:
    """Stop this process (as a hung machine would): no more heartbeats, no exit."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGSTOP)
    return 0


# --- steps for resource tests ----------------------------------------------------------------


@step(enable_cache=False)
def hold_license(label: str, seconds: float = 0.3) -> str:
    """Record when it held the licence; sleep a little (the resource is scarce)."""
    import time

    from wharf import get_step_context

    context = get_step_context()
    start = time.time()
    time.sleep(seconds)
    allocation = context.allocation
    held = allocation.allocations[0].resource if allocation and allocation.allocations else "-"
    return f"{label}:{start:.6f}:{time.time():.6f}:{held}"


@step(enable_cache=False)
def wait_for_file(path: str, marker: str = "", started: str = "") -> int:
    """Hold resources until ``path`` exists (a test's signal); record start and cleanup."""
    import time
    from pathlib import Path

    if started:
        Path(started).write_text("started")
    try:
        deadline = time.monotonic() + 60
        while not Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return 1
    finally:
        if marker:
            with open(marker, "a") as f:
                f.write("cleanup\n")


@step(enable_cache=False)
def affinity() -> int:
    import os

    return len(os.sched_getaffinity(0))
