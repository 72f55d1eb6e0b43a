"""The process kubelet gives each container the CPU weight its request would get on a node,
against the node's other processes only (the kubelet's session), not the machine's."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import pytest
from kubernetes import client

from tests.kube.kubelet import Kubelet
from tests.kube.kubelet_cpu_weight import NICE_WEIGHTS, container_nice, cpu_shares, nice_for_shares
from tests.kube.kubelet_testing import python_pod, run_to_end

NS = "default"
PRINT_NICE = "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"
PRINT_GROUPS = (
    "import os, pathlib\n"
    "group = pathlib.Path('/proc/self/autogroup')\n"
    "print(os.getpgid(0) == os.getpid(), os.getsid(0))\n"
    "print(group.read_text().strip() if group.exists() else '-')"
)


def own_scheduling_group() -> str:
    """This process's session group as ``/proc/self/autogroup`` says it ('-': none)."""
    group = Path("/proc/self/autogroup")
    return group.read_text().strip() if group.exists() else "-"


def test_shares_follow_the_cpu_request_as_a_kubelet_sets_them() -> None:
    assert cpu_shares(None) == 2  # BestEffort
    assert cpu_shares(Fraction(1, 1000)) == 2
    assert cpu_shares(Fraction(1, 10)) == 102
    assert cpu_shares(Fraction(1)) == 1024
    assert cpu_shares(Fraction(4)) == 4096


def test_the_nice_value_is_the_one_of_closest_weight() -> None:
    assert nice_for_shares(1024) == 0
    assert nice_for_shares(4096) == 0  # no weight above nice 0 for a process we start
    assert nice_for_shares(102) == 10  # 100m, the orchestrator pod's default request
    assert nice_for_shares(2) == 19  # BestEffort
    assert NICE_WEIGHTS[container_nice({"cpu": Fraction(1, 2)})] == 526


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (None, 19),
        ({"requests": {"cpu": "100m"}}, 10),
        ({"limits": {"cpu": "1"}}, 0),  # the request defaults to the limit
        ({"requests": {"memory": "64Mi"}}, 19),
    ],
)
def test_a_container_runs_at_the_nice_value_of_its_request(
    kubelet: Kubelet, core: client.CoreV1Api, resources: dict | None, expected: int
) -> None:
    extra = {"resources": resources} if resources else {}
    run_to_end(core, python_pod("weighted", PRINT_NICE, **extra))

    assert int(core.read_namespaced_pod_log("weighted", NS)) == expected


def test_a_container_is_a_group_of_its_own_in_the_kubelets_session_and_scheduling_group(
    kubelet: Kubelet, core: client.CoreV1Api
) -> None:
    """Its nice weighs against the node's processes (the kubelet, here with the emulator, is
    this process): were it a session of its own, the group the kernel schedules it in
    (``sched_autogroup``) would weigh a BestEffort pod's nice 19 against every busy session of
    the machine, and a loaded machine would starve it past its heartbeat's liveness timeout."""
    run_to_end(core, python_pod("grouped", PRINT_GROUPS))

    leads, group = core.read_namespaced_pod_log("grouped", NS).splitlines()
    assert leads == f"True {os.getsid(0)}"  # signalled as one, in the kubelet's session
    assert group == own_scheduling_group()
