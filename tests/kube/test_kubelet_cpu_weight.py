"""The process kubelet gives each container the CPU weight its request would get on a node."""

from __future__ import annotations

from fractions import Fraction

import pytest
from kubernetes import client

from tests.kube.kubelet import Kubelet
from tests.kube.kubelet_cpu_weight import NICE_WEIGHTS, container_nice, cpu_shares, nice_for_shares
from tests.kube.kubelet_testing import python_pod, run_to_end

NS = "default"
PRINT_NICE = (
    "import os, pathlib\n"
    "group = pathlib.Path('/proc/self/autogroup')\n"
    "weights = [os.getpriority(os.PRIO_PROCESS, 0)]\n"
    "if group.exists():  # sessions scheduled as groups: the group's nice is the one that counts\n"
    "    weights.append(int(group.read_text().split()[-1]))\n"
    "print(*weights)"
)


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

    weights = [int(w) for w in core.read_namespaced_pod_log("weighted", NS).split()]
    assert weights and set(weights) == {expected}
