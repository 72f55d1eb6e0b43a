"""``scripts/k8s-smoke``'s preflight against the emulator, as a user would run it: its RBAC
table, its refusals (no image, a local artifact store, an unknown context) and its skip. The
pipeline stages run in ``tests/integrations/kubernetes/test_k8s_smoke_stages.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import NAMESPACES
from tests.kube.smoke_testing import IMAGE, SCRIPT, open_workspace, smoke, wharf_env
from wharf.store.models import PageRequest


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
