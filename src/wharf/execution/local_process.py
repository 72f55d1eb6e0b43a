"""The local-process step backend: each isolated attempt in its own process on this machine.

Owns :class:`LocalProcessBackend`, used by both the ``local_process`` orchestrator and step
operator. Invariants: a handle names the step run and the pid; the backend keeps the live
process for each handle until :meth:`LocalProcessBackend.cleanup`; what the store says alone
never gets a process signalled (:meth:`LocalProcessBackend.stop_recorded`).
"""

from __future__ import annotations

import contextlib
import difflib
import math
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any
from uuid import UUID

from wharf.core.errors import InputError
from wharf.execution import started_here
from wharf.execution.backends import AttemptOutcome, Ended, StepLaunch
from wharf.execution.heartbeat import BEAT_NOW_SIGNAL
from wharf.execution.pinning import allocation_env
from wharf.execution.stop_deadline import (
    DEFAULT_STOP_GRACE_SECONDS,
    MAX_STOP_GRACE_SECONDS,
    STOP_GRACE_ENV,
)
from wharf.execution.subprocesses import StepProcess, collect_logs, start_step_process
from wharf.store.models import StepRunRecord
from wharf.store.process_identity import cpu_ticks, kill_if_ours, start_token, this_host

if TYPE_CHECKING:
    from wharf.execution.backends import Allocation

NO_SENTINEL_POLL_SECONDS = 0.05
"""How often :meth:`LocalProcessBackend.poll` looks at a process the OS gives no descriptor for."""
CODE_TRAVELS = "code_travels"
"""The configuration key of the ``local_process`` components that run steps as if elsewhere."""
PYTHON = "python"
"""The configuration key of the interpreter that runs the steps (default: this one)."""
STOP_GRACE_PERIOD = "stop_grace_period"
"""The configuration key of the seconds a cancelled step's process has to end before it is cut
off (``wharf.execution.stop_deadline``; default :data:`DEFAULT_STOP_GRACE_SECONDS`)."""
OPTIONS = (PYTHON, CODE_TRAVELS, STOP_GRACE_PERIOD)
"""Every configuration key of the ``local_process`` orchestrator and step operator."""
STARTUP_SECONDS = 60.0
"""How long a step's process may take from its submit to its first heartbeat, whatever the
heartbeat interval (``backends.SlowStarting``: the engine allows the longer of this and the
usual liveness timeout). A fork server's first start, a new interpreter's imports or a busy
machine can take seconds, more than the usual timeout at a short interval (2 s at 0.2 s); at the
default 15 s (76 s) it changes nothing. A process allowed it beats as it starts
(``heartbeat.startup_allowance_granted``), so a hang after its start is seen as soon as before."""


def check_configuration(configuration: Mapping[str, Any]) -> None:
    """Refuse at registration what no run of a ``local_process`` component could use: an
    unknown key (a typo would be ignored), a ``python`` that is not a path, a ``code_travels``
    that is not yes or no, a ``stop_grace_period`` that is not a number of seconds >= 0.
    Whether the interpreter exists is seen when a step starts."""
    for key in configuration:
        if key not in OPTIONS:
            close = difflib.get_close_matches(key, OPTIONS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InputError(
                f"Unknown local_process option '{key}'{hint}; known: {', '.join(OPTIONS)}."
            )
    python = configuration.get(PYTHON, "default")
    if not isinstance(python, str) or not python.strip():
        raise InputError(
            f"The component option {PYTHON} must be the path of a Python interpreter, "
            f"not {python!r}."
        )
    configured_flag(configuration, CODE_TRAVELS)
    configured_stop_grace(configuration)


def configured_stop_grace(configuration: Mapping[str, Any]) -> float:
    """The ``stop_grace_period`` component option: a number of seconds >= 0 (a JSON number, or
    one as text), default :data:`DEFAULT_STOP_GRACE_SECONDS`; a longer one than
    :data:`MAX_STOP_GRACE_SECONDS` is that (``stop_deadline``)."""
    value = configuration.get(STOP_GRACE_PERIOD, DEFAULT_STOP_GRACE_SECONDS)
    seconds = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            seconds = float(value)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InputError(
            f"The component option {STOP_GRACE_PERIOD} must be a number of seconds >= 0, "
            f"not {value!r}."
        )
    return min(seconds, MAX_STOP_GRACE_SECONDS)


def configured_flag(configuration: Mapping[str, Any], key: str) -> bool:
    """A yes/no component option: a JSON boolean, or ``true``/``false``/``1``/``0`` as text."""
    value = configuration.get(key, False)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise InputError(f"The component option {key} must be true or false, not {value!r}.")


@dataclass(frozen=True)
class LocalProcessHandle:
    step_run_id: UUID
    pid: int


@dataclass
class _Live:
    process: StepProcess
    launch: StepLaunch
    """Where the attempt's log goes (``launch.logs`` at its record's ``logs_uri``)."""
    cancelled: bool = False
    workdir: str | None = None
    """The empty working directory a travelling step started in (removed at cleanup)."""
    cpu: int | None = None
    """The CPU time (clock ticks) the process had used when :meth:`working` last looked."""
    token: str | None = None
    """The process's start token as it started (``process_identity.start_token``)."""


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


class LocalProcessBackend:
    """Runs each isolated attempt in its own process on this machine.

    The process starts with the attempt's Wharf settings and, for an allocated step, its
    allocation (``WHARF_STEP_ALLOCATION``, by which it pins itself:
    ``wharf.execution.pinning``); its output goes to a temporary file copied to the artifact
    store at cleanup (``wharf.execution.subprocesses``). ``python``: the interpreter that runs
    steps (None: a fork of a warm process of this interpreter, or this interpreter when
    ``code_travels``). With ``code_travels`` each step runs as if on another machine, to test
    what remote orchestrators do: a new interpreter in an empty working directory of its own,
    without the submitter's ``PYTHONPATH``, so the step imports the pipeline's code from the
    run's code archive (``wharf.execution.code_fetch``) and from nowhere else. ``stop_grace``:
    the seconds a cancelled attempt's process has to end before its own stop deadline cuts it
    off (given to it as ``stop_deadline.STOP_GRACE_ENV``, as a Kubernetes step pod's
    ``pod_stop_grace_period`` is). An attempt's process has :data:`STARTUP_SECONDS` to send its
    first heartbeat."""

    startup_timeout_seconds: float | None = STARTUP_SECONDS
    """``backends.SlowStarting``: the engine's liveness check waits this long for the first beat."""

    def __init__(
        self,
        python: str | None = None,
        *,
        code_travels: bool = False,
        stop_grace: float = DEFAULT_STOP_GRACE_SECONDS,
    ) -> None:
        self._python = python
        self.code_travels = code_travels
        self.stop_grace = stop_grace
        self._lock = threading.Lock()
        self._live: dict[LocalProcessHandle, _Live] = {}

    def submit(self, attempt: StepLaunch, allocation: Allocation | None) -> LocalProcessHandle:
        environment = dict(attempt.environment)
        environment[STOP_GRACE_ENV] = repr(float(self.stop_grace))  # a cancel's cut-off
        if allocation is not None:
            environment = allocation_env(environment, allocation)
        record = attempt.record
        workdir = None
        if self.code_travels:
            environment["PYTHONPATH"] = ""  # neither the submitter's nor an inherited one
            workdir = tempfile.mkdtemp(prefix=f"wharf-step-{record.id}-")
        try:
            process = start_step_process(record, environment, self._python, workdir)
        except BaseException:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        assert process.pid is not None
        handle = LocalProcessHandle(record.id, process.pid)
        token = start_token(process.pid)
        live = _Live(process, attempt, workdir=workdir, token=token)
        with self._lock:
            self._live[handle] = live
        started_here.record(record.id, process.pid, token)
        return handle

    def poll(
        self, handles: Sequence[LocalProcessHandle], timeout: float = 0.0
    ) -> Mapping[LocalProcessHandle, AttemptOutcome]:
        with self._lock:
            live = {handle: self._live[handle] for handle in handles}
        deadline = time.monotonic() + timeout
        while True:
            done = {}
            for handle, attempt in live.items():
                code = attempt.process.wait(0)
                if code is not None:
                    done[handle] = _outcome(code, attempt.cancelled)
            left = deadline - time.monotonic()
            if done or left <= 0:
                return done
            sentinels = [a.process.sentinel for a in live.values()]
            ready = [s for s in sentinels if s is not None]
            if len(ready) < len(sentinels):
                left = min(left, NO_SENTINEL_POLL_SECONDS)
            if ready:
                wait(ready, left)
            else:  # no descriptor for any of them (an OS without process descriptors)
                time.sleep(left)

    def working(self, handle: LocalProcessHandle) -> bool:
        """Whether the attempt's process is alive and used CPU time since the last time this
        was asked (False the first time, and where the OS does not tell): a step busy in code
        that holds the GIL (a long regular expression match, a C extension's loop) cannot
        beat, yet is healthy; one that is stopped or stuck without using the CPU is not.
        ``isolated_attempts.IsolatedExecutor`` beats for it while it works."""
        with self._lock:
            attempt = self._live.get(handle)
        if attempt is None or attempt.cancelled or attempt.process.wait(0) is not None:
            return False
        used, attempt.cpu = attempt.cpu, cpu_ticks(handle.pid)
        return used is not None and attempt.cpu is not None and attempt.cpu > used

    def beat_now(self, handle: LocalProcessHandle) -> None:
        """``backends.HearsStopsAtOnce``: send the attempt's process
        ``heartbeat.BEAT_NOW_SIGNAL`` (it beats at once, and so hears of its run's stop now),
        only while this backend still holds it and ``process_identity`` vouches it is the
        process started (same pid and start token on this machine: never a reused pid). The
        signal goes to that process alone, not to the workers of its group."""
        with self._lock:
            attempt = self._live.get(handle)
        if attempt is None or attempt.cancelled or attempt.process.wait(0) is not None:
            return
        kill_if_ours(this_host(), handle.pid, attempt.token, BEAT_NOW_SIGNAL)

    def cancel(self, handle: LocalProcessHandle, grace_seconds: float = 0.0) -> None:
        with self._lock:
            attempt = self._live.get(handle)
        if attempt is None:  # cleaned up: it ended
            return
        attempt.cancelled = True
        attempt.process.stop(grace_seconds)

    def cleanup(self, handle: LocalProcessHandle) -> None:
        with self._lock:
            attempt = self._live.pop(handle)
        try:
            attempt.process.end_leftovers()  # its workers die with it, never orphaned
            launch = attempt.launch
            collect_logs(
                attempt.process,
                launch.logs,
                launch.record.logs_uri,
                launch.record.name,
                launch.logs_through_outage,
            )
        finally:
            attempt.process.close()
            started_here.forget(handle.step_run_id)
            if attempt.workdir is not None:
                shutil.rmtree(attempt.workdir, ignore_errors=True)

    def stop_recorded(self, step: StepRunRecord) -> bool:
        """Signal the process a step's own process recorded in its step run (host, pid and
        start token: ``wharf.execution.entrypoint``), only when the backend that started it
        left the same pid and start token in this user's marker directory
        (``wharf.execution.started_here``) and ``wharf.store.process_identity`` vouches the
        process is that very one on this machine."""
        if step.pid is None or started_here.started(step.id) != (step.pid, step.pid_start):
            return False  # not a process this machine started for this step
        return kill_if_ours(step.pid_host, step.pid, step.pid_start)


def _outcome(code: int, cancelled: bool) -> AttemptOutcome:
    if code == 0:
        return AttemptOutcome(Ended.SUCCEEDED, describe_exit(code))
    if code > 0:
        return AttemptOutcome(Ended.FAILED, describe_exit(code))
    return AttemptOutcome(Ended.CANCELLED if cancelled else Ended.LOST, describe_exit(code))
