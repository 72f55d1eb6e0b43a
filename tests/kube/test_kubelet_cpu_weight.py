"""The process kubelet gives each container the CPU weight its request would get on a node,
against the node's other processes only (the node's session), not the machine's."""

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


def test_containers_are_groups_of_their_own_in_one_node_session_apart_from_the_kubelets(
    kubelet: Kubelet, core: client.CoreV1Api
) -> None:
    """Their nice values weigh against the node's processes only. In the kubelet's session (here
    pytest's) a BestEffort pod's nice 19 would weigh against each busy process of the test run;
    in a session of its own, against every busy session of the machine (``sched_autogroup``):
    either way a loaded machine starves it past its heartbeat's liveness timeout."""
    run_to_end(core, python_pod("first", PRINT_GROUPS))
    run_to_end(core, python_pod("second", PRINT_GROUPS))

    first_line, first_group = core.read_namespaced_pod_log("first", NS).splitlines()
    second_line, second_group = core.read_namespaced_pod_log("second", NS).splitlines()
    assert first_line == second_line  # each leads a process group (signalled as one), one session
    leads, session = first_line.split()
    assert leads == "True"
    assert int(session) != os.getsid(0)  # not the kubelet's (this process's)
    assert first_group == second_group  # one scheduling group, the node's
    if own_scheduling_group() != "-":
        assert first_group != own_scheduling_group()
