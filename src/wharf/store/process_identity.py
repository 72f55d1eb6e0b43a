"""Which process a recorded process id names: host, pid and a start token; the only module that
inspects processes of other pids.

Invariants: :func:`is_ours` never vouches for a process this machine did not start, nor for a
reused pid; :func:`is_gone` never declares gone a process of another machine that shares the
host name (its heartbeat deadline decides); :func:`kill_if_ours` signals only processes
:func:`is_ours` vouches for.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from functools import cache

_PROC = "/proc"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@cache
def this_host() -> str:
    """This machine's host name (as the store records it)."""
    return socket.gethostname()[:255] or "localhost"


@cache
def _boot_id() -> str | None:
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def start_token(pid: int) -> str | None:
    """The start token of the live process ``pid``; None if there is none (or it is unknown).

    A pid alone names a process only on the machine that recorded it, and only until the pid is
    reused, so every pid the store keeps comes with the host name and this token: on Linux the
    boot id and the process's start time in clock ticks since boot (``/proc/<pid>/stat``, field
    22), elsewhere the start time ``ps`` reports.
    """
    if pid <= 0:
        return None
    boot = _boot_id()
    if boot is not None and os.path.isdir(_PROC):
        try:
            with open(f"{_PROC}/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return None
        # The command name (field 2) may hold spaces and parentheses: split after its last ")".
        fields = stat[stat.rfind(b")") + 2 :].split()
        if not fields or fields[0] in (b"Z", b"X"):
            return None  # a zombie has ended: only its exit status waits for its parent
        try:
            return f"{boot}:{int(fields[19])}"  # field 22 of the whole line
        except (IndexError, ValueError):
            return None
    if sys.platform == "win32":
        return None
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            check=False,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"ps:{out}" if out else None


def own_start_token() -> str | None:
    """The start token of this process."""
    return _start_token_of_own(os.getpid())


@cache
def _start_token_of_own(pid: int) -> str | None:  # keyed by pid: a forked child has its own
    return start_token(pid)


def is_ours(host: str | None, pid: int | None, token: str | None) -> bool:
    """Whether (host, pid, token) names a process alive on this machine right now: the host is
    this machine's, the token is known and the live process with that pid has that very token."""
    if host != this_host() or pid is None or token is None:
        return False
    return start_token(pid) == token


def is_gone(host: str | None, pid: int | None, token: str | None) -> bool:
    """Whether (host, pid, token) names a process of this machine that no longer lives: the host
    is this machine's, the token was taken on this boot (Linux) and no process with that pid and
    token lives."""
    if host != this_host() or pid is None or token is None:
        return False
    boot = _boot_id()
    if boot is not None and not token.startswith(f"{boot}:"):
        return False  # another boot, or another machine of the same name: not for us to say
    if boot is None and not token.startswith("ps:"):
        return False
    return start_token(pid) != token


def kill_if_ours(
    host: str | None, pid: int | None, token: str | None, signum: int = signal.SIGKILL
) -> bool:
    """Send ``signum`` (SIGKILL) to the process if :func:`is_ours` vouches for it; whether a
    signal was sent."""
    if pid is None or not is_ours(host, pid, token):
        return False
    try:
        os.kill(pid, signum)
    except ProcessLookupError:  # it ended meanwhile
        return False
    return True


def cpu_ticks(pid: int) -> int | None:
    """The CPU time the live process ``pid`` has used so far (user and system, all its
    threads), in clock ticks; None where it is unknown (not Linux, no such process, a zombie).
    A process whose count grows is running, whatever its threads can do meanwhile."""
    if pid <= 0:
        return None
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    try:
        return int(fields[11]) + int(fields[12])  # fields 14 (utime) and 15 (stime) of the line
    except (IndexError, ValueError):
        return None
