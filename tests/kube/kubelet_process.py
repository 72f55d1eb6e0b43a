"""The process kubelet's "container runtime": images mapped to local Pythons, and child processes.

Owns two things. `ImageRuntime`: a configured image name resolved to a Python executable (or a
venv directory) and the directories put first on the container's ``PATH`` — a shim directory whose
``python``/``python3`` exec that exact interpreter, then the interpreter's own directory (a venv's
``bin``, so its console scripts resolve). `ProcessTable`: every container process the kubelet
starts, each leading a process group of its own (signalled as one "container") in the node's
session: a process of its own (``node_session``) forks them all, so that the session's scheduling
group is the node's (``kubelet_cpu_weight``); their stdout and stderr go to one log file per
container. `kill_all` SIGKILLs every group and reaps every container, after which none can be
started. Invariant: a container is in the table from its start's answer until its exit's report.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

NODE_SESSION = Path(__file__).with_name("node_session.py")


class RuntimeClosed(Exception):
    """The kubelet is stopping: no new process may start."""


@dataclass(frozen=True)
class ImageRuntime:
    """A configured image: which Python runs its commands, and what comes first on PATH."""

    image: str
    python: Path
    path_dirs: tuple[Path, ...]

    @property
    def image_id(self) -> str:
        return f"wharf-process://{self.python}"


def resolve_images(images: Mapping[str, str], shim_root: Path) -> dict[str, ImageRuntime]:
    """Resolve ``image name -> python executable or venv directory`` into runtimes (with shims)."""
    runtimes: dict[str, ImageRuntime] = {}
    for index, (image, target) in enumerate(sorted(images.items())):
        location = Path(target).expanduser().absolute()
        python = location / "bin" / "python" if location.is_dir() else location
        if not python.exists():
            raise ValueError(f"image {image!r}: no Python at {python}")
        shim_dir = shim_root / f"image-{index}-{re.sub(r'[^A-Za-z0-9_.-]', '_', image)}"
        shim_dir.mkdir(parents=True, exist_ok=True)
        for name in ("python", "python3"):
            shim = shim_dir / name
            shim.write_text(f'#!/bin/sh\nexec {shlex.quote(str(python))} "$@"\n')
            shim.chmod(0o755)
        runtimes[image] = ImageRuntime(image, python, (shim_dir, python.parent))
    return runtimes


def lookup_image(runtimes: Mapping[str, ImageRuntime], image: str) -> ImageRuntime | None:
    """The runtime for ``image``; ``name`` and ``name:latest`` are the same image."""
    if image in runtimes:
        return runtimes[image]
    alternative = image.removesuffix(":latest") if image.endswith(":latest") else f"{image}:latest"
    return runtimes.get(alternative)


def exit_code_of(returncode: int) -> int:
    """A container exit code: a death by signal N reads as 128 + N, as container runtimes report."""
    return 128 - returncode if returncode < 0 else returncode


def process_memory_bytes(pid: int) -> int:
    """The resident memory of one process (0 once it is gone)."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def group_memory_bytes(pgid: int) -> int:
    """The resident memory of every process in process group ``pgid`` (a scan of ``/proc``)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
            if int(fields[2]) != pgid:  # state, ppid, pgrp
                continue
        except (OSError, ValueError, IndexError):
            continue
        total += process_memory_bytes(int(entry.name))
    return total


def signal_group(process: ContainerProcess, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group the child leads (every process of the "container")."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


class ContainerProcess:
    """A container's main process as the node session reports it: its pid once started, its
    ``returncode`` (as `subprocess.Popen` reports it) once it has exited and been reaped."""

    def __init__(self, on_exit: Callable[[], None]) -> None:
        self.pid = 0
        self.returncode: int | None = None
        self.start_error: OSError | None = None
        self._on_exit = on_exit
        self._answered = threading.Event()
        self._exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The returncode, once the process has exited; TimeoutError after ``timeout`` seconds."""
        if not self._exited.wait(timeout):
            raise TimeoutError(f"process {self.pid} still running after {timeout} s")
        assert self.returncode is not None
        return self.returncode

    def answered(self, pid: int, error: OSError | None) -> None:
        self.pid, self.start_error = pid, error
        self._answered.set()

    def wait_answered(self) -> None:
        self._answered.wait()

    def exited(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()
        self._on_exit()


class ProcessTable:
    """Every container of one kubelet, started by its node session (``node_session``, a process
    of its own, started with the first container), so that stopping leaves none behind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one start at a time: answers come in request order
        self._node: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._starting: ContainerProcess | None = None
        self._running: dict[int, ContainerProcess] = {}
        self._closed = False

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        on_exit: Callable[[], None],
        nice: int = 0,
    ) -> ContainerProcess:
        """Start ``argv`` in a new process group of the node's session at nice value ``nice``,
        output to ``log_path``; ``on_exit()`` runs once it has exited. Raises OSError when the
        command cannot be started."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        request = {
            "argv": list(argv),
            "env": dict(env),
            "cwd": str(cwd),
            "log": str(log_path),
            "nice": nice,
        }
        process = ContainerProcess(on_exit)
        with self._lock:
            if self._closed:
                raise RuntimeClosed
            node = self._node_session()
            self._starting = process
            assert node.stdin is not None
            node.stdin.write(json.dumps(request) + "\n")
            node.stdin.flush()  # BrokenPipeError (an OSError) if the node session is gone
            process.wait_answered()
        if process.start_error is not None:
            raise process.start_error
        return process

    def _node_session(self) -> subprocess.Popen[str]:
        if self._node is None:
            self._node = subprocess.Popen(
                [sys.executable, "-I", "-S", str(NODE_SESSION)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,  # the node's scheduling group: see kubelet_cpu_weight
                close_fds=True,
            )
            self._reader = threading.Thread(
                target=self._read_answers, args=(self._node,), daemon=True, name="node-session"
            )
            self._reader.start()
        return self._node

    def _read_answers(self, node: subprocess.Popen[str]) -> None:
        assert node.stdout is not None
        for line in node.stdout:
            answer = json.loads(line)
            if "exited" in answer:
                self._running.pop(answer["exited"]).exited(answer["returncode"])
                continue
            starting, self._starting = self._starting, None
            assert starting is not None
            if "pid" in answer:
                self._running[answer["pid"]] = starting
                starting.answered(answer["pid"], None)
            else:
                starting.answered(0, OSError(answer["errno"], answer["error"]))
        self._node_ended()

    def _node_ended(self) -> None:
        """The node session ended: whatever it did not report is lost (killed by signal 9)."""
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.answered(0, OSError(errno.EPIPE, "the node session ended"))
        for pid, process in list(self._running.items()):
            signal_group(process, signal.SIGKILL)
            del self._running[pid]
            process.exited(-signal.SIGKILL)

    def kill_all(self) -> None:
        """SIGKILL every container's process group and reap every container (the node session
        ends); no spawn succeeds after."""
        with self._lock:
            self._closed = True
            node, reader = self._node, self._reader
        if node is None or reader is None:
            return
        assert node.stdin is not None
        with contextlib.suppress(OSError):
            node.stdin.close()  # the node session kills, reaps and reports every container
        reader.join(timeout=10)
        if reader.is_alive():
            node.kill()
            reader.join()
        node.wait()
