"""A container's CPU weight, as the process kubelet approximates it with a nice value.

A real kubelet puts each pod in a cgroup whose CPU weight follows its CPU request (cgroup v1
``cpu.shares`` = millicores * 1024 / 1000, at least 2; a BestEffort pod, with no request, gets 2).
Under contention the Linux scheduler then shares a node's CPUs in proportion to those weights,
and the control plane (the API server) is not among them at all. The process kubelet runs every
container as a plain process, so without a weight 50 starting BestEffort step pods would take the
node's CPU from the orchestrator pod (100m requested) as much as from each other, which no real
cluster does. It gives each container the nice value whose CFS weight (the kernel's ``sched_prio_to_weight``
table) is closest to the shares its request would get.

Each container is a process group of its own inside one session, the node's: one process
(``node_session``, a session of its own) starts them all. Where the kernel schedules sessions as
groups (``/proc/sys/kernel/sched_autogroup_enabled``), that session's group is the node: it
competes with the machine's other sessions (the test run's own, another test run, a benchmark) as
one, as a node's pods do with what runs outside them, and inside it the nice values share its CPU
between the containers by their weights. A container must be in neither the kubelet's session
(in the tests, pytest's: its nice 19 would weigh against each busy process of the test run, the
other xdist worker's among them) nor a session of its own (its group would weigh its nice
against every other session of the machine): either way a BestEffort step pod (nice 19) would
get a 68th of the share of each busy one and stall for longer than its heartbeat's liveness
timeout, which a node's load never does to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

# The kernel's weight for nice 0..19 (kernel/sched/core.c, sched_prio_to_weight).
NICE_WEIGHTS = (
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
)  # fmt: skip
MIN_SHARES = 2


def cpu_shares(cpu_request: Fraction | None) -> int:
    """The cgroup v1 ``cpu.shares`` a kubelet gives a container requesting ``cpu_request`` cores."""
    if cpu_request is None:
        return MIN_SHARES
    return max(MIN_SHARES, int(cpu_request * 1024))


def nice_for_shares(shares: int) -> int:
    """The nice value (0..19) whose CFS weight is closest to ``shares``."""
    return min(range(len(NICE_WEIGHTS)), key=lambda nice: abs(NICE_WEIGHTS[nice] - shares))


def container_nice(requests: Mapping[str, Fraction]) -> int:
    """The nice value of a container with these (parsed) resource requests."""
    return nice_for_shares(cpu_shares(requests.get("cpu")))
