"""The node session starts every container of a kubelet, reaps each, and leaves none behind when
the kubelet stops or dies; a command that cannot start fails its container, not the node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kubernetes import client

from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.kube.kubelet_testing import (
    PYTHON_IMAGE,
    process_alive,
    python_pod,
    run_to_end,
    wait_for_output,
)
from tests.waiting import wait_until

NS = "default"
REPO = Path(__file__).parents[2]
SLEEPER = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(os.getpid(), child.pid, os.getppid(), 'started', flush=True)\n"
    "time.sleep(60)"
)


def test_a_kubelet_killed_outright_leaves_no_container_behind(emulator: Emulator, core) -> None:
    """SIGKILL gives the kubelet no time to stop its containers: the node session sees its input
    end and kills every container's process group (a container's children too), then exits."""
    command = [sys.executable, "-m", "tests.kube.kubelet", "--kubeconfig"]
    command += [str(emulator.kubeconfig_path), "--image", f"{PYTHON_IMAGE}={sys.executable}"]
    command += ["--log-dir", str(emulator.log_dir), "--namespace", NS]
    kubelet = subprocess.Popen(command, cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        core.create_namespaced_pod(NS, python_pod("survivor", SLEEPER))
        line = wait_for_output(core, "survivor", "started", timeout=30)
        main, child, node_session = (int(pid) for pid in line.split()[:3])
        assert node_session != kubelet.pid
    finally:
        kubelet.send_signal(signal.SIGKILL)
        kubelet.wait()

    assert wait_until(lambda: not any(map(process_alive, (main, child, node_session))), 10)


def test_a_command_that_cannot_start_fails_its_container_and_the_next_one_starts(
    kubelet: Kubelet, core: client.CoreV1Api
) -> None:
    missing = python_pod("missing", "")
    missing["spec"]["containers"][0]["command"] = ["/nonexistent/wharf-entrypoint"]
    pod = run_to_end(core, missing)

    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert pod["status"]["phase"] == "Failed"
    assert terminated["reason"] == "StartError"
    assert "'/nonexistent/wharf-entrypoint'" in terminated["message"]
    assert "No such file or directory" in terminated["message"]

    run_to_end(core, python_pod("after", "print('started after')"))
    assert core.read_namespaced_pod_log("after", NS) == "started after\n"


def test_stopping_the_kubelet_ends_its_node_session(emulator: Emulator, core) -> None:
    kubelet = Kubelet(
        emulator.kubeconfig_path, images={PYTHON_IMAGE: sys.executable}, log_dir=emulator.log_dir
    )
    kubelet.start()
    try:
        core.create_namespaced_pod(NS, python_pod("stopped", SLEEPER))
        line = wait_for_output(core, "stopped", "started", timeout=30)
        main, child, node_session = (int(pid) for pid in line.split()[:3])
        assert os.getsid(node_session) == node_session  # a session of its own
    finally:
        kubelet.stop()

    assert wait_until(lambda: not any(map(process_alive, (main, child, node_session))), 10)
