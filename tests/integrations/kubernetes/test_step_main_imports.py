"""What a step pod's process imports to start: not the Kubernetes client (about 0.7 s of CPU
for every step pod), which only keeping its log on SIGTERM needs (``step_main.FinalLog``)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys

import wharf.integrations.kubernetes.step_main

print(sorted(name for name in sys.modules if name.split(".")[0] == "kubernetes"))
"""


def test_a_step_pods_entry_point_starts_without_the_kubernetes_client() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
