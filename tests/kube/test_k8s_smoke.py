"""``scripts/k8s-smoke`` against the emulator and the process kubelet, as a user would run it.

The whole script runs once (a subprocess with a kubeconfig, a context and ``--image``) on a
Wharf home of its own: the embedded SQLite store, a moto S3 artifact store registered first,
the image ``wharf/python:3.11`` mapped by the kubelet to this interpreter. Its RBAC preflight,
its refusals and its skip run on their own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import CREDENTIALS, MotoServer
from tests.kube.emulator import CONTEXT_NAME, Emulator
from tests.kube.emulator.resources import CRONJOBS, JOBS, NAMESPACES, PODS, SECRETS
from tests.kube.emulator.watchers import WatchEvent
from tests.kube.kubelet import Kubelet
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest

s3_server = s3.s3_server

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "k8s-smoke"
IMAGE = "wharf/python:3.11"
STAGES = ["static pipeline + cached re-run", "failing step", "step operator", "CronJob round trip"]
STAGE_LINE = re.compile(r"^(PASS|FAIL|SKIP)  (.+?) +(\d+\.\d) s  (.*)$")
TIMEOUT = 240  # the script's own --timeout (about 30 s unloaded); the subprocess gets more


def smoke(
    *args: str, emulator: Emulator | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    target = (
        ["--kubeconfig", str(emulator.kubeconfig_path), "--context", CONTEXT_NAME]
        if emulator
        else []
    )
    return subprocess.run(
        [sys.executable, str(SCRIPT), *target, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT + 30,
        check=False,
        env=env,
    )


def wharf_env(home: Path) -> dict[str, str]:
    """This process's environment with a Wharf home of its own (the embedded store)."""
    env = {**os.environ, **CREDENTIALS, "WHARF_HOME": str(home)}
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV, "WHARF_ACTIVE_STACK"):
        env.pop(name, None)
    env.pop("PYTHONPATH", None)
    return env


def open_workspace(env: dict[str, str]) -> Workspace:
    with pytest.MonkeyPatch.context() as patch:
        for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV):
            patch.delenv(name, raising=False)
        patch.setenv("WHARF_HOME", env["WHARF_HOME"])
        return Workspace.open(load_config())


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> bool:
    """Whether ``condition`` became true before ``timeout`` seconds (checked every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # polling a condition, with a deadline
    return True


def register_remote_store(env: dict[str, str], s3_server: MotoServer) -> None:
    """Register the artifact store ``remote`` (a new bucket on moto) in ``env``'s Wharf home."""
    workspace = open_workspace(env)
    try:
        stacks.register_component(
            workspace,
            "remote",
            ComponentType.ARTIFACT_STORE,
            "fsspec",
            {"path": f"s3://{s3_server.new_bucket()}/wharf", "endpoint_url": s3_server.endpoint},
        )
    finally:
        workspace.close()


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


def test_every_stage_passes_and_the_script_exits_0(whole_run: SmokeRun) -> None:
    result = whole_run.result
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    stage_lines = [m for m in map(STAGE_LINE.match, result.stdout.splitlines()) if m]
    assert [m.group(2) for m in stage_lines] == STAGES, output
    assert [m.group(1) for m in stage_lines] == ["PASS"] * len(STAGES), output
    failing = stage_lines[1].group(4)
    assert "code 3" in failing, failing  # the step's exit code, in the run's reason


def test_nothing_made_by_the_smoke_is_left_in_the_cluster(whole_run: SmokeRun) -> None:
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


def test_no_smoke_stack_or_schedule_is_left_in_the_store(whole_run: SmokeRun) -> None:
    workspace = open_workspace(whole_run.env)
    try:
        stacks_left = workspace.store.stacks.list_stacks(PageRequest(size=100)).items
        schedules = workspace.store.schedules.list().items
    finally:
        workspace.close()
    assert schedules == []  # the schedule went with its CronJob
    assert [s.name for s in stacks_left if s.name.startswith("smoke-")] == []
    assert "left in the Wharf store" not in whole_run.result.stdout


def test_no_smoke_component_is_left_in_the_store(whole_run: SmokeRun) -> None:
    workspace = open_workspace(whole_run.env)
    try:
        components = workspace.store.stacks.list_components(None, PageRequest(size=100)).items
    finally:
        workspace.close()
    assert [c.name for c in components if c.name.startswith("smoke-")] == []


def test_without_a_context_it_skips_and_says_why() -> None:
    result = smoke()
    assert result.returncode == 0
    assert "skipped: no kube context given" in result.stdout


def test_the_stages_need_an_image(emulator: Emulator) -> None:
    result = smoke(emulator=emulator)
    assert result.returncode == 2
    assert "--image is needed for the pipeline stages" in result.stderr


def test_the_preflight_passes_with_full_rights(emulator: Emulator) -> None:
    result = smoke("--preflight-only", "--namespace", "default", emulator=emulator)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "RBAC preflight (namespace default):"
    assert any(line.split() == ["batch/jobs", "watch", "yes"] for line in lines)
    assert any(line.split() == ["pods/log", "get", "yes"] for line in lines)
    assert any(line.split() == ["batch/jobs/finalizers", "update", "yes"] for line in lines)
    assert lines[-1] == "preflight passed"


def test_a_missing_permission_is_a_no_in_the_table_and_one_error_line(emulator: Emulator) -> None:
    emulator.access.deny("create", "cronjobs")
    result = smoke("--preflight-only", "--namespace", "default", emulator=emulator)
    assert result.returncode == 1
    denied = [line for line in result.stdout.splitlines() if " NO " in f"{line} "]
    assert [line.split()[:3] for line in denied] == [["batch/cronjobs", "create", "NO"]]
    assert result.stderr == "k8s-smoke: 1 permission(s) missing: see the table above\n"


def test_a_local_artifact_store_is_refused_in_one_line_and_nothing_is_left(
    emulator: Emulator, tmp_path: Path
) -> None:
    env = wharf_env(tmp_path / "home")  # the default stack: a local artifact store
    result = smoke("--image", IMAGE, emulator=emulator, env=env)
    assert result.returncode == 1
    assert result.stderr.startswith("k8s-smoke: artifact store 'default' is local (")
    assert len(result.stderr.splitlines()) == 1
    assert "--artifact-store NAME" in result.stderr
    namespaces = emulator.store.list(NAMESPACES, None)["items"]
    assert not [ns for ns in namespaces if ns["metadata"]["name"].startswith("wharf-smoke-")]
    workspace = open_workspace(env)
    try:
        components = workspace.store.stacks.list_components(None, PageRequest(size=100)).items
    finally:
        workspace.close()
    assert not [c.name for c in components if c.name.startswith("smoke-")]


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
    # The cut-short run is unfinished in the store: its stack (and so its orchestrator) stays,
    # and a warning says why.
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning: ")]
    assert [w.split(" (")[0] for w in warnings] == [
        f"warning: left in the Wharf store: stack smoke-{smoke_id}-k8s",
        f"warning: left in the Wharf store: orchestrator smoke-{smoke_id}-orchestrator",
    ], result.stdout
    assert "has unfinished run(s)" in warnings[0]
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


def test_an_unknown_context_is_one_clear_line(emulator: Emulator) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--kubeconfig",
            str(emulator.kubeconfig_path),
            "--context",
            "nope",
            "--preflight-only",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("k8s-smoke: cannot load the kube context 'nope'")
    assert len(result.stderr.splitlines()) == 1
