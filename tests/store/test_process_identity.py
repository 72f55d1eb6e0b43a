"""Which process a recorded pid names: real processes, no mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from wharf.store.process_identity import (
    is_gone,
    is_ours,
    kill_if_ours,
    own_start_token,
    start_token,
    this_host,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_a_live_process_is_ours_and_not_gone() -> None:
    child = _sleeper()
    try:
        token = start_token(child.pid)
        assert token is not None and token != own_start_token()
        assert start_token(child.pid) == token  # stable
        assert is_ours(this_host(), child.pid, token)
        assert not is_gone(this_host(), child.pid, token)
    finally:
        child.kill()
        child.wait()


def test_a_dead_process_is_gone_and_never_signalled() -> None:
    child = _sleeper()
    token = start_token(child.pid)
    child.kill()
    child.wait()
    assert start_token(child.pid) is None
    assert is_gone(this_host(), child.pid, token)
    assert not is_ours(this_host(), child.pid, token)
    assert not kill_if_ours(this_host(), child.pid, token)


def test_another_host_or_another_start_is_never_ours() -> None:
    child = _sleeper()
    try:
        token = start_token(child.pid)
        assert token is not None
        other_start = token + "0"
        assert not kill_if_ours("another-host", child.pid, token)
        assert not kill_if_ours(this_host(), child.pid, other_start)  # the pid was reused
        assert not kill_if_ours(this_host(), child.pid, None)  # start unknown
        assert child.poll() is None  # still alive
        # Another machine of the same name is not ours to declare gone; a reused pid is.
        assert not is_gone("another-host", child.pid, token)
        assert is_gone(this_host(), child.pid, other_start)
        assert kill_if_ours(this_host(), child.pid, token)
        assert child.wait(timeout=30) == -9
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_token_of_another_boot_is_not_declared_gone() -> None:
    token = own_start_token()
    assert token is not None
    ticks = token.split(":", 1)[1]
    assert not is_gone(this_host(), os.getpid(), f"another-boot:{ticks}")
    assert not is_gone(this_host(), 999_999_999, f"another-boot:{ticks}")


def test_a_zombie_is_gone() -> None:
    child = _sleeper()
    token = start_token(child.pid)
    os.kill(child.pid, 9)
    # Not reaped yet: a zombie until we wait for it, and already gone.
    deadline = time.monotonic() + 30
    while start_token(child.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert is_gone(this_host(), child.pid, token)
        assert os.path.exists(f"/proc/{child.pid}")  # still there, as a zombie
    finally:
        child.wait()
