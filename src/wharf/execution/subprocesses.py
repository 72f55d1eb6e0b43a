"""Starting, waiting for and ending a step's own process (the local-process backend's part).

Owns :func:`start_step_process`, :class:`StepProcess` and :func:`collect_logs`. Invariants: both
ways to start a step (forked from a warm zygote, or a new interpreter) run the same entry point
(``wharf.execution.entrypoint``) with ``RunServices.child_env`` and no inherited Wharf setting;
the child's stdout and stderr go to a temporary file (named to it in ``STEP_LOG_ENV``), copied
into the artifact store at the step's ``logs_uri`` once the process has ended (through a short
outage of the store, as the run waits one out), then deleted (by the step's process itself when
this one is gone: ``log_capture.OwnLog``). The fork server's
socket lives in ``multiprocessing``'s temporary directory, kept short whatever TMPDIR is
(:func:`fit_fork_server_socket`); the step's own code still sees the user's TMPDIR.
"""

from __future__ import annotations

import io
import multiprocessing
import multiprocessing.process as mp_process
import multiprocessing.spawn as mp_spawn
import multiprocessing.util as mp_util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

from wharf.artifacts.store import ArtifactStore
from wharf.config.global_config import SERVER_URL_ENV
from wharf.execution.log_capture import (
    STEP_LOG_ENV,
    ThroughOutage,
    copy_log,
    once,
    store_step_log,
)
from wharf.store.models import StepRunRecord

WHARF_PREFIX = "WHARF_"
ENTRYPOINT_MODULE = "wharf.execution.entrypoint"
ZYGOTE_PRELOAD = [ENTRYPOINT_MODULE, "wharf.store.sql.store", "wharf.artifacts"]
REST_PRELOAD = ["wharf.store.rest"]

SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
"""The longest path an AF_UNIX socket can be bound to (``sun_path`` holds 108 bytes on Linux,
104 on macOS and the BSDs, with the closing NUL)."""
SHORT_TEMP_BASES = ("/tmp", "/var/tmp", "/usr/tmp")
"""Where ``multiprocessing``'s temporary directory goes when TMPDIR is too long for a socket."""
_MP_TEMP_DIR = "/pymp-12345678"
_MP_SOCKET = "/listener-12345678"
"""The names ``multiprocessing`` gives its temporary directory and the fork server's socket in
it (``tempfile``'s random part is 8 characters)."""

_zygote_lock = threading.Lock()
_zygote: ForkServerContext | None = None


def fit_fork_server_socket() -> str | None:
    """Make sure the fork server's socket path fits :data:`SUN_PATH_MAX`; the short directory
    made for it, or None when the usual one fits (or no short one could be made).

    ``multiprocessing`` binds the fork server's socket in its own temporary directory,
    ``$TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX``: under a TMPDIR longer than about 75
    characters (pytest-xdist's, a batch system's) every start would fail with "AF_UNIX path
    too long". Then this process's ``multiprocessing`` temporary directory becomes a private
    ``pymp-`` directory under ``/tmp`` instead (removed at exit, as ``multiprocessing`` removes
    its own), through the one setting ``multiprocessing.util.get_temp_dir`` reads: the process
    config's ``tempdir``. TMPDIR itself, ``tempfile``, and so the step's own code, are left
    alone. Python 3.11's ``multiprocessing`` has no such fallback (newer ones do: CPython
    gh-132124)."""
    config: dict[str, object] = mp_process.current_process()._config  # type: ignore[attr-defined]
    current = config.get("tempdir")
    if isinstance(current, str):  # made already (by an earlier use of multiprocessing)
        socket_path = current + _MP_SOCKET
    else:
        socket_path = tempfile.gettempdir() + _MP_TEMP_DIR + _MP_SOCKET
    if len(os.fsencode(socket_path)) <= SUN_PATH_MAX:
        return None
    for base in SHORT_TEMP_BASES:
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            short = tempfile.mkdtemp(prefix="pymp-", dir=base)
            mp_util.Finalize(
                None,
                shutil.rmtree,
                args=(short,),
                kwargs={"ignore_errors": True},
                exitpriority=-100,
            )
            config["tempdir"] = short
            return short
    return None  # nowhere shorter: the start fails as before, with the OS's message


def _zygote_context(rest: bool = False) -> ForkServerContext:
    global _zygote
    with _zygote_lock:
        if _zygote is None:
            fit_fork_server_socket()
            context = multiprocessing.get_context("forkserver")
            assert isinstance(context, ForkServerContext)
            context.set_forkserver_preload(ZYGOTE_PRELOAD + (REST_PRELOAD if rest else []))
            _zygote = context
        return _zygote


def step_environment(inherited: Mapping[str, str], child_env: Mapping[str, str]) -> dict[str, str]:
    """A step process's environment: what it inherits, minus every Wharf setting, plus
    ``child_env`` (the complete Wharf configuration its parent chose). Inherited Wharf settings
    must not leak in: the fork server keeps the environment it started with, which may name
    another store or server than the run's."""
    environment = {k: v for k, v in inherited.items() if not k.startswith(WHARF_PREFIX)}
    environment.update(child_env)
    environment["PYTHONUNBUFFERED"] = "1"
    return environment


def _zygote_child(step_run_id: str, environment: dict[str, str], log_path: str) -> None:
    """Runs in the forked child: leave the terminal's process group (a Ctrl-C there is for the
    orchestrator, which stops its steps itself), send output to the log, set the environment
    (the launching process's, from :func:`step_environment`: the fork server's is the one it
    started with, stale once that process set a variable such as a credential), run the
    step."""
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    _write_through_std_streams()
    os.environ.clear()
    os.environ.update(environment)
    os.environ[STEP_LOG_ENV] = log_path
    from wharf.execution.entrypoint import main

    code = main([step_run_id])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip atexit handlers inherited from the zygote


def _write_through_std_streams() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` write each write to the log at once, as
    ``PYTHONUNBUFFERED`` does for a new interpreter. A forked child inherits the fork server's
    streams, made when their file was another one (block-buffered unless a terminal), and the
    variable set now changes nothing: a step ended by a signal's default action (SIGTERM) lost
    what it had printed, still in the buffer."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        inherited = getattr(sys, name)
        encoding = getattr(inherited, "encoding", None) or "utf-8"
        errors = getattr(inherited, "errors", None) or "backslashreplace"
        raw = io.FileIO(fd, "w", closefd=False)
        setattr(sys, name, io.TextIOWrapper(raw, encoding, errors, write_through=True))


_start_lock = threading.Lock()


def _start_without_main(process: BaseProcess) -> None:
    """Start ``process`` without multiprocessing re-importing the user's ``__main__`` in the
    child: a script that calls its pipeline at top level (no ``if __name__ ...`` guard) must
    not run its pipeline again inside every step. Steps defined in the script are loaded by
    the entry point itself (``import_step``), without running the script's main block."""

    def without_main(name: str) -> dict[str, object]:
        data: dict[str, object] = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    with _start_lock:  # the patch is process-wide; starts are serialised while it is in place
        original = mp_spawn.get_preparation_data
        mp_spawn.get_preparation_data = without_main
        try:
            process.start()
        finally:
            mp_spawn.get_preparation_data = original


@dataclass
class StepProcess:
    """A step's process. ``wait`` and ``kill`` may be called from different threads (the
    step's waiter, and a force stop): the exit status is read once, under a lock."""

    step_run_id: str
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    forked: BaseProcess | None = None
    pidfd: int | None = None
    """A process descriptor of ``popen``'s process, where the OS has them."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else self.forked.pid  # type: ignore[union-attr]

    def wait(self, timeout: float | None) -> int | None:
        if self.popen is not None:
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        assert self.forked is not None
        wait([self.forked.sentinel], timeout)
        with self._lock:  # two threads must not both read the status the fork server sends
            self.forked.join(0)
            return self.forked.exitcode

    @property
    def sentinel(self) -> int | None:
        """A file descriptor that becomes ready when the process ends (None: none here)."""
        return self.forked.sentinel if self.forked is not None else self.pidfd

    def stop(self, grace_seconds: float = 0.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_seconds`` (at once if 0); returns once it ended."""
        if grace_seconds > 0 and self.wait(0) is None:
            self._signal(terminate=True)
            if self.wait(grace_seconds) is not None:
                return
        if self.wait(0) is None:
            self._signal(terminate=False)
        self.wait(None)

    def _signal(self, *, terminate: bool) -> None:
        """Signal the step's process and every process of its process group (the workers
        it forked or spawned: a ``multiprocessing`` pool's), which it leads."""
        process = self.popen if self.popen is not None else self.forked
        assert process is not None
        if self._signal_group(signal.SIGTERM if terminate else signal.SIGKILL):
            return
        try:  # not (yet) the leader of a group of its own: it is alone
            if terminate:
                process.terminate()
            else:
                process.kill()
        except ProcessLookupError:  # it ended meanwhile
            pass

    def _signal_group(self, signum: int) -> bool:
        """Send ``signum`` to the process group the step's process leads (it starts one:
        ``setsid``); False if there is no such group (the process has not made it yet, or
        it and everything it started are gone)."""
        pid = self.pid
        if pid is None or not hasattr(os, "killpg"):
            return False
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def end_leftovers(self) -> None:
        """Once the step's process ended: kill what is left of its process group (workers it
        started and did not end: killed with it, or leaked), so no step leaves processes
        behind. A group outlives its leader only while it has members, and its id is not
        given to another process meanwhile."""
        if self.pid is not None and self.wait(0) is not None:
            self._signal_group(signal.SIGKILL)

    def close(self) -> None:
        """Free the process's descriptor (once it ended)."""
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def start_step_process(
    record: StepRunRecord,
    child_env: dict[str, str],
    python: str | None = None,
    cwd: str | None = None,
) -> StepProcess:
    """Start the step's process: forked from the zygote when ``python`` is None, else a new
    ``python`` interpreter, in ``cwd`` if given (else this process's working directory).

    The zygote is a ``multiprocessing`` fork server that has already imported Wharf and
    SQLAlchemy, so a step does not pay Python's start-up and imports every time; its child
    starts with the parent's ``sys.path`` and working directory. A new interpreter
    (``<python> -m wharf.execution.entrypoint ID``) is for a component that names another
    interpreter (e.g. a different virtualenv). The zygote also preloads the REST store when the
    first step it serves reaches a workspace server; there is one fork server per process, so
    its preload list is fixed by that first step (a later step of the other kind imports what
    it misses itself)."""
    if cwd is not None and python is None:
        python = sys.executable  # a fork keeps the parent's working directory and sys.path
    fd, log_name = tempfile.mkstemp(prefix=f"wharf-step-{record.id}-", suffix=".log")
    log_path = Path(log_name)
    step = StepProcess(str(record.id), log_path)
    try:
        if python is None:
            os.close(fd)
            process = _zygote_context(rest=SERVER_URL_ENV in child_env).Process(
                target=_zygote_child,
                args=(str(record.id), step_environment(os.environ, child_env), log_name),
                name=f"wharf-step-{record.name}",
                daemon=False,
            )
            _start_without_main(process)
            step.forked = process
        else:
            with os.fdopen(fd, "wb") as log:
                step.popen = subprocess.Popen(
                    [python, "-m", ENTRYPOINT_MODULE, str(record.id)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**step_environment(os.environ, child_env), STEP_LOG_ENV: log_name},
                    start_new_session=True,  # a Ctrl-C in the parent's terminal is not the step's
                    cwd=cwd,
                )
            if hasattr(os, "pidfd_open"):
                step.pidfd = os.pidfd_open(step.popen.pid)
    except BaseException:
        log_path.unlink(missing_ok=True)
        raise
    return step


def collect_logs(
    step: StepProcess,
    store: ArtifactStore,
    logs_uri: str | None,
    name: str = "",
    through_outage: ThroughOutage = once,
) -> None:
    """Copy the process's output to the artifact store (a chunk at a time), again through an
    outage of the store as ``through_outage`` waits one out (a copy that fails for good is
    logged as step ``name``'s, never raised), and remove the temporary file."""
    try:
        if logs_uri:
            uri = logs_uri
            store_step_log(
                store,
                uri,
                lambda: copy_log(store, uri, step.log_path),
                name or step.step_run_id,
                through_outage,
            )
    finally:
        step.log_path.unlink(missing_ok=True)
