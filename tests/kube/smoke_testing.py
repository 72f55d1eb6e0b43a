"""Running ``scripts/k8s-smoke`` from tests, as a user would: a subprocess with a kubeconfig and
a context, on a Wharf home of its own (the embedded SQLite store, ``WHARF_HOME``). The image
``IMAGE`` is the one the tests' process kubelets map to this interpreter.

Used by the preflight tests (``tests/kube/test_k8s_smoke.py``) and the pipeline stages' tests
(``tests/integrations/kubernetes/test_k8s_smoke_stages.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.artifacts.s3_server import CREDENTIALS, MotoServer
from tests.kube.emulator import CONTEXT_NAME, Emulator
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace

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
