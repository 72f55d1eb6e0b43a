"""The test bed end to end: a pod-per-step driver on the emulator and the process kubelet.

A 3-pod chain, a failing pod and a deleted pod, with assertions on phases, exit codes and the
logs served on ``/log``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.kube.driver import PodPerStepDriver, PodStep
from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.kube.kubelet_testing import PYTHON_IMAGE, wait_for_output, wait_for_pod


@pytest.fixture
def driver(emulator: Emulator, core: client.CoreV1Api) -> Iterator[PodPerStepDriver]:
    images = {PYTHON_IMAGE: sys.executable}
    with Kubelet(emulator.kubeconfig_path, images=images, log_dir=emulator.log_dir):
        yield PodPerStepDriver(core, "default", PYTHON_IMAGE)


def appender(path: Path, letter: str) -> str:
    return (
        f"p = {str(path)!r}\n"
        f"open(p, 'a').write({letter!r})\n"
        f"print('step {letter} saw', open(p).read())\n"
    )


def test_a_three_pod_chain_runs_in_order(
    driver: PodPerStepDriver, core: client.CoreV1Api, tmp_path: Path
) -> None:
    trail = tmp_path / "trail"
    steps = [
        PodStep("load", appender(trail, "a")),
        PodStep("train", appender(trail, "b"), after=("load",)),
        PodStep("evaluate", appender(trail, "c"), after=("train",)),
    ]

    outcomes = driver.run(steps)

    assert {name: (o.phase, o.exit_code) for name, o in outcomes.items()} == {
        "load": ("Succeeded", 0),
        "train": ("Succeeded", 0),
        "evaluate": ("Succeeded", 0),
    }
    assert trail.read_text() == "abc"
    logs = {name: core.read_namespaced_pod_log(o.pod, "default") for name, o in outcomes.items()}
    assert logs == {
        "load": "step a saw a\n",
        "train": "step b saw ab\n",
        "evaluate": "step c saw abc\n",
    }


def test_a_failing_pod_stops_its_downstream(
    driver: PodPerStepDriver, core: client.CoreV1Api
) -> None:
    steps = [
        PodStep("fails", "import sys; print('about to fail'); sys.exit(3)"),
        PodStep("after_failure", "print('never')", after=("fails",)),
        PodStep("independent", "print('fine')"),
    ]

    outcomes = driver.run(steps)

    assert (outcomes["fails"].phase, outcomes["fails"].exit_code) == ("Failed", 3)
    assert outcomes["after_failure"].phase == "Skipped"
    assert outcomes["after_failure"].pod is None
    assert (outcomes["independent"].phase, outcomes["independent"].exit_code) == ("Succeeded", 0)
    assert core.read_namespaced_pod_log(outcomes["fails"].pod, "default") == "about to fail\n"
    pods = core.list_namespaced_pod("default").items
    assert sorted(p.metadata.labels["wharf-driver/step"] for p in pods) == ["fails", "independent"]


def test_a_deleted_pod_ends_with_sigterm_and_skips_its_downstream(
    driver: PodPerStepDriver, core: client.CoreV1Api, tmp_path: Path
) -> None:
    marker = tmp_path / "terminated"
    code = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        f"    open({str(marker)!r}, 'w').write('got SIGTERM')\n"
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('working', flush=True)\n"
        "time.sleep(60)\n"
    )
    steps = [PodStep("long", code), PodStep("after_delete", "print('never')", after=("long",))]

    def delete_when_running(step: str, pod: str) -> None:
        wait_for_output(core, pod, "working")  # the handler is installed
        core.delete_namespaced_pod(pod, "default", grace_period_seconds=5)

    outcomes = driver.run(steps, on_running=delete_when_running)

    assert (outcomes["long"].phase, outcomes["long"].exit_code) == ("Deleted", 143)
    assert marker.read_text() == "got SIGTERM"
    assert outcomes["after_delete"].phase == "Skipped"
    assert wait_for_pod(core, outcomes["long"].pod, lambda pod: pod is None) is None
    assert core.list_namespaced_pod("default").items == []
