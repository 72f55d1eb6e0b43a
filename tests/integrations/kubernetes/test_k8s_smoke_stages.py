"""``scripts/k8s-smoke``'s pipeline stages against the emulator and the process kubelet.

The whole script runs once (a subprocess with a kubeconfig, a context and ``--image``) on a
Wharf home of its own: the embedded SQLite store, a moto S3 artifact store registered first,
the image ``wharf/python:3.11`` mapped by the kubelet to this interpreter. Its overall timeout
runs on its own, without a kubelet.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.artifacts.s3_server import CREDENTIALS, MotoServer
from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import CRONJOBS, JOBS, NAMESPACES, PODS, SECRETS
from tests.kube.emulator.watchers import WatchEvent
from tests.kube.kubelet import Kubelet
from tests.kube.smoke_testing import (
    IMAGE,
    STAGE_LINE,
    STAGES,
    TIMEOUT,
    open_workspace,
    register_remote_store,
    smoke,
    wharf_env,
)
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.store.models import PageRequest, RunFilter


@dataclass
class SmokeRun:
    emulator: Emulator
    env: dict[str, str]
    result: subprocess.CompletedProcess[str]
    smoke_id: str


@pytest.fixture(scope="module")
def whole_run(
    tmp_path_factory: pytest.TempPathFactory, s3_server: MotoServer
) -> Iterator[SmokeRun]:
    """The whole script, once, against the emulator and the process kubelet."""
    tmp = tmp_path_factory.mktemp("k8s-smoke")
    env = wharf_env(tmp / "home")
    with (
        Emulator() as emulator,
        Kubelet(
            emulator.kubeconfig_path,
            images={IMAGE: sys.executable},
            log_dir=emulator.log_dir,
            extra_env={**CREDENTIALS, "WHARF_HOME": str(tmp / "pod-home")},  # the image's
        ) as kubelet,
    ):
        assert kubelet.wait_ready(10)
        register_remote_store(env, s3_server)
        result = smoke(
            "--image",
            IMAGE,
            "--artifact-store",
            "remote",
            "--timeout",
            str(TIMEOUT),
            emulator=emulator,
            env=env,
        )
        found = re.search(r"\(smoke id ([0-9a-f]+)\)", result.stdout)
        assert found, result.stdout + result.stderr
        yield SmokeRun(emulator, env, result, found.group(1))


def every_stage_passes_and_the_script_exits_0(whole_run: SmokeRun) -> None:
    result = whole_run.result
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    stage_lines = [m for m in map(STAGE_LINE.match, result.stdout.splitlines()) if m]
    assert [m.group(2) for m in stage_lines] == STAGES, output
    assert [m.group(1) for m in stage_lines] == ["PASS"] * len(STAGES), output
    failing = stage_lines[1].group(4)
    assert "code 3" in failing, failing  # the step's exit code, in the run's reason


def nothing_made_by_the_smoke_is_left_in_the_cluster(whole_run: SmokeRun) -> None:
    store = whole_run.emulator.store
    namespace = f"wharf-smoke-{whole_run.smoke_id}"
    selector = f"wharf.io/smoke={whole_run.smoke_id}"

    def nothing_left() -> bool:
        labelled = [store.list(r, None, label_selector=selector)["items"] for r in (PODS, JOBS)]
        in_namespace = [store.list(r, namespace)["items"] for r in (PODS, JOBS, CRONJOBS, SECRETS)]
        namespaces = [ns["metadata"]["name"] for ns in store.list(NAMESPACES, None)["items"]]
        return not any(labelled) and not any(in_namespace) and namespace not in namespaces

    assert wait_until(nothing_left), f"objects of smoke {whole_run.smoke_id} are left"
    assert f"cleaned up everything labelled {selector}" in whole_run.result.stdout


def no_smoke_stack_or_schedule_is_left_in_the_store(whole_run: SmokeRun) -> None:
    workspace = open_workspace(whole_run.env)
    try:
        stacks_left = workspace.store.stacks.list_stacks(PageRequest(size=100)).items
        schedules = workspace.store.schedules.list().items
    finally:
        workspace.close()
    assert schedules == []  # the schedule went with its CronJob
    assert [s.name for s in stacks_left if s.name.startswith("smoke-")] == []
    assert "left in the Wharf store" not in whole_run.result.stdout


def no_smoke_component_is_left_in_the_store(whole_run: SmokeRun) -> None:
    workspace = open_workspace(whole_run.env)
    try:
        components = workspace.store.stacks.list_components(None, PageRequest(size=100)).items
    finally:
        workspace.close()
    assert [c.name for c in components if c.name.startswith("smoke-")] == []


def test_the_whole_smoke_passes_every_stage_and_leaves_nothing_behind(whole_run: SmokeRun) -> None:
    """One test for the one run (45 s of set-up): as four, xdist's work stealing set the module's
    run up again on each worker that took one of them."""
    every_stage_passes_and_the_script_exits_0(whole_run)
    nothing_made_by_the_smoke_is_left_in_the_cluster(whole_run)
    no_smoke_stack_or_schedule_is_left_in_the_store(whole_run)
    no_smoke_component_is_left_in_the_store(whole_run)


def test_the_overall_timeout_fails_the_stage_and_still_cleans_up_a_shared_namespace(
    emulator: Emulator, tmp_path: Path, s3_server: MotoServer
) -> None:
    env = wharf_env(tmp_path / "home")
    register_remote_store(env, s3_server)
    created: list[WatchEvent] = []
    emulator.store.subscribe(lambda event: created.append(event) if event.type == "ADDED" else None)
    # No kubelet: the orchestrator pod never starts, so the first stage waits until the time
    # left for the stages (20 s less the clean-up's share, 10 s) is up.
    result = smoke(
        "--image",
        IMAGE,
        "--artifact-store",
        "remote",
        "--namespace",
        "default",
        "--timeout",
        "20",
        emulator=emulator,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == "k8s-smoke: timed out after 20 s\n"
    stage_lines = [m for m in map(STAGE_LINE.match, result.stdout.splitlines()) if m]
    assert [(m.group(1), m.group(2)) for m in stage_lines] == [("FAIL", STAGES[0])]
    assert stage_lines[0].group(4).startswith("timed out")
    smoke_id = result.stdout.split("(smoke id ")[1].split(")")[0]
    assert f"cleaned up everything labelled wharf.io/smoke={smoke_id}" in result.stdout
    # The cut-short run was stopped (its orchestrator pod never ran), so its stacks and
    # components could go too.
    assert "warning: " not in result.stdout, result.stdout
    workspace = open_workspace(env)
    try:
        runs = workspace.store.runs.list(RunFilter(), PageRequest(size=100)).items
        stacks_left = workspace.store.stacks.list_stacks(PageRequest(size=100)).items
        components = workspace.store.stacks.list_components(None, PageRequest(size=100)).items
    finally:
        workspace.close()
    assert [r.status for r in runs] == [ExecutionStatus.STOPPED]
    assert not [s.name for s in stacks_left if s.name.startswith("smoke-")]
    assert not [c.name for c in components if c.name.startswith("smoke-")]
    kept = re.search(r"the pipeline calls' output is kept in (\S+)", result.stdout)
    assert kept, result.stdout
    try:
        assert (Path(kept.group(1)) / "static_pipeline-1.out.log").exists()  # the cut-short call
    finally:
        shutil.rmtree(kept.group(1))
    made = [e.object["metadata"]["name"] for e in created if e.rtype is JOBS]
    assert len(made) == 1  # the orchestrator Job of the first run, its pod labelled

    def nothing_left() -> bool:
        store = emulator.store
        labelled = store.list(PODS, None, label_selector=f"wharf.io/smoke={smoke_id}")["items"]
        jobs = [j["metadata"]["name"] for j in store.list(JOBS, "default")["items"]]
        return not labelled and made[0] not in jobs

    assert wait_until(nothing_left), "the timed-out smoke run left objects in the namespace"
    namespaces = [ns["metadata"]["name"] for ns in emulator.store.list(NAMESPACES, None)["items"]]
    assert "default" in namespaces  # a namespace the script did not create stays
