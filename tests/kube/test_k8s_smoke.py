"""``scripts/k8s-smoke`` against the emulator: its RBAC preflight and its namespace lifecycle.

The pipeline stages need a real cluster; what runs here is everything before and after them, as
a user would run the script (a subprocess with a kubeconfig and a context).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kubernetes import client

from tests.kube.emulator import CONTEXT_NAME, Emulator

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "k8s-smoke"


def smoke(*args: str, emulator: Emulator | None = None) -> subprocess.CompletedProcess[str]:
    target = (
        ["--kubeconfig", str(emulator.kubeconfig_path), "--context", CONTEXT_NAME]
        if emulator
        else []
    )
    return subprocess.run(
        [sys.executable, str(SCRIPT), *target, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_a_context_it_skips_and_says_why() -> None:
    result = smoke()
    assert result.returncode == 0
    assert "skipped: no kube context given" in result.stdout


def test_the_preflight_passes_with_full_rights(emulator: Emulator) -> None:
    result = smoke("--preflight-only", "--namespace", "default", emulator=emulator)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "RBAC preflight (namespace default):"
    assert any(line.split() == ["batch/jobs", "watch", "yes"] for line in lines)
    assert any(line.split() == ["pods/log", "get", "yes"] for line in lines)
    assert lines[-1] == "preflight passed"


def test_a_missing_permission_is_a_no_in_the_table_and_one_error_line(emulator: Emulator) -> None:
    emulator.access.deny("create", "cronjobs")
    result = smoke("--preflight-only", "--namespace", "default", emulator=emulator)
    assert result.returncode == 1
    denied = [line for line in result.stdout.splitlines() if " NO " in f"{line} "]
    assert [line.split()[:3] for line in denied] == [["batch/cronjobs", "create", "NO"]]
    assert result.stderr == "k8s-smoke: 1 permission(s) missing: see the table above\n"


def test_it_works_in_a_namespace_of_its_own_and_removes_it(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    result = smoke(emulator=emulator)
    assert result.returncode == 0, result.stderr
    assert any("namespaces" in line and "create" in line for line in result.stdout.splitlines())
    smoke_ns = [ns.metadata.name for ns in core.list_namespace().items]
    assert not [name for name in smoke_ns if name.startswith("wharf-smoke-")]
    assert "cleaned up everything labelled wharf.io/smoke=" in result.stdout


def test_an_unknown_context_is_one_clear_line(emulator: Emulator) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--kubeconfig",
            str(emulator.kubeconfig_path),
            "--context",
            "nope",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("k8s-smoke: cannot load the kube context 'nope'")
    assert len(result.stderr.splitlines()) == 1
