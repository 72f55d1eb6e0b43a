"""The process kubelet's node session: the one process that starts (and reaps) every container.

`kubelet_process.ProcessTable` runs this file as a session of its own (``python -I -S`` with
``start_new_session``), so that every container of the node is a process group in one session
whose scheduling group (``sched_autogroup``) stands for the node against the machine's other
sessions, the test run's own among them (see ``kubelet_cpu_weight``). Standard library only.

Protocol, one JSON object per line. On stdin, a start: ``{"argv", "env", "cwd", "log", "nice"}``;
it is answered on stdout, in order, with ``{"pid": N}`` or ``{"errno": E, "error": "text"}``.
When a container's main process exits, its group is SIGKILLed (what it left behind) and
``{"exited": N, "returncode": R}`` is written (R as `subprocess.Popen` reports it). At the end of
stdin (the kubelet stopping, or gone) every container's group is SIGKILLed and reaped, each exit
is reported, and the process ends. Invariant: every container started is reaped and reported.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any


class NodeSession:
    """The containers started so far, and the one writer of the answers."""

    def __init__(self) -> None:
        self._write_lock = threading.Lock()
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._children_lock = threading.Lock()
        self._waiters: list[threading.Thread] = []

    def say(self, message: dict[str, Any]) -> None:
        with self._write_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def start(self, request: dict[str, Any]) -> None:
        try:
            with open(request["log"], "ab", buffering=0) as log:
                process = subprocess.Popen(
                    request["argv"],
                    env=request["env"],
                    cwd=request["cwd"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    process_group=0,  # signalled as one "container"
                    close_fds=True,
                )
        except (OSError, ValueError) as error:  # ValueError: e.g. a NUL byte in an argument
            code = getattr(error, "errno", None) or errno.EINVAL
            self.say({"errno": code, "error": getattr(error, "strerror", None) or str(error)})
            return
        if request["nice"]:  # before the child has done more than start its interpreter
            with contextlib.suppress(ProcessLookupError):
                os.setpriority(os.PRIO_PROCESS, process.pid, request["nice"])
        with self._children_lock:
            self._children[process.pid] = process
        self.say({"pid": process.pid})  # before its exit can be reported
        waiter = threading.Thread(
            target=self._wait_for, args=(process,), name=f"wait-{process.pid}"
        )
        waiter.start()
        self._waiters.append(waiter)

    def _wait_for(self, process: subprocess.Popen[bytes]) -> None:
        process.wait()
        kill_group(process.pid)  # whatever the container's main process left behind
        with self._children_lock:
            del self._children[process.pid]
        self.say({"exited": process.pid, "returncode": process.returncode})

    def end(self) -> None:
        """SIGKILL every container's group and wait until each exit is reported."""
        with self._children_lock:
            pids = list(self._children)
        for pid in pids:
            kill_group(pid)
        for waiter in self._waiters:
            waiter.join()


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def main() -> None:
    node = NodeSession()
    try:
        for line in sys.stdin:
            node.start(json.loads(line))
    finally:
        node.end()


if __name__ == "__main__":
    main()
