"""The process kubelet's "container runtime": images mapped to local Pythons, and child processes.

Owns two things. `ImageRuntime`: a configured image name resolved to a Python executable (or a
venv directory) and the directories put first on the container's ``PATH`` — a shim directory whose
``python``/``python3`` exec that exact interpreter, then the interpreter's own directory (a venv's
``bin``, so its console scripts resolve). `ProcessTable`: every child process the kubelet starts,
each leading a process group of its own (signalled as one "container") in the kubelet's session
(whose scheduling group is the node's: ``kubelet_cpu_weight``), its stdout and stderr written to
one log file; `kill_all` SIGKILLs every group and reaps every child, after which
no new child can be started. Invariant: a child is in the table from the moment it exists until it
has been reaped.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


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


def set_cpu_weight(pid: int, nice: int) -> None:
    """Give the child the CPU weight of ``nice`` (its nice value) against the other processes of
    the kubelet's session, the node's (never its session's group's: that one is the kubelet's,
    weighed against the machine's other sessions)."""
    with contextlib.suppress(ProcessLookupError):
        os.setpriority(os.PRIO_PROCESS, pid, nice)


def signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Send ``sig`` to the process group the child leads (every process of the "container")."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


class ProcessTable:
    """Every child process of one kubelet, so that stopping the kubelet leaves none behind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen[bytes]] = set()
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
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in a new process group at nice value ``nice``, output to ``log_path``;
        ``on_exit()`` runs once it has exited (on a waiter thread). Raises OSError when the
        command cannot be started."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            if self._closed:
                raise RuntimeClosed
            with log_path.open("ab", buffering=0) as log:
                process = subprocess.Popen(
                    list(argv),
                    env=dict(env),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    process_group=0,  # the kubelet's session: its scheduling group is the node's
                    close_fds=True,
                )
            self._children.add(process)
            if nice:  # before the child has done more than start its interpreter
                set_cpu_weight(process.pid, nice)
        threading.Thread(
            target=self._wait_for, args=(process, on_exit), daemon=True, name=f"wait-{process.pid}"
        ).start()
        return process

    def _wait_for(self, process: subprocess.Popen[bytes], on_exit: Callable[[], None]) -> None:
        process.wait()
        signal_group(process, signal.SIGKILL)  # whatever the container's main process left behind
        with self._lock:
            self._children.discard(process)
        on_exit()

    def kill_all(self) -> None:
        """SIGKILL every child's process group and reap every child; no spawn succeeds after."""
        with self._lock:
            self._closed = True
            children = list(self._children)
        for process in children:
            signal_group(process, signal.SIGKILL)
        for process in children:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
