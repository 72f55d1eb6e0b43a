"""What this machine offers: CPUs, memory and NVIDIA GPUs, for the embedded ``local`` pool.

Owns: :func:`detect_machine` and its parts. Reads ``os.sched_getaffinity`` / ``os.cpu_count``,
``/proc/meminfo`` (else ``sysconf``) and, when ``nvidia-smi`` is on the PATH, its CSV query.

Invariants: detection never raises for a missing or failing source: no ``nvidia-smi`` (or an
error from it) means no GPUs, an unreadable ``/proc/meminfo`` falls back to ``sysconf``; every
figure is an exact integer (CPUs, bytes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NVIDIA_SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,name,memory.total",
    "--format=csv,noheader,nounits",
)
Runner = Callable[[Sequence[str]], str]
"""Runs a command and returns its stdout (raises on failure)."""


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    model: str
    memory_bytes: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "model": self.model, "memory_bytes": self.memory_bytes}


@dataclass(frozen=True, slots=True)
class Machine:
    cpus: int
    memory_bytes: int
    gpus: tuple[Gpu, ...]


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                value, _, unit = line.split(":", 1)[1].strip().partition(" ")
                return int(value) * (1024 if unit.strip().lower() == "kb" else 1)
    except (OSError, ValueError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def _run(command: Sequence[str]) -> str:
    return subprocess.run(
        list(command), capture_output=True, text=True, check=True, timeout=10
    ).stdout


def parse_nvidia_smi(output: str) -> list[Gpu]:
    """Parse ``index, name, memory.total [MiB]`` lines; malformed lines are skipped."""
    gpus: list[Gpu] = []
    for line in output.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1]:
            continue
        memory = int(parts[2]) * 1024 * 1024 if parts[2].isdigit() else None
        gpus.append(Gpu(index=int(parts[0]), model=parts[1], memory_bytes=memory))
    return gpus


def nvidia_gpus(run: Runner | None = None) -> list[Gpu]:
    if run is None:
        if shutil.which(NVIDIA_SMI_QUERY[0]) is None:
            return []
        run = _run
    try:
        return parse_nvidia_smi(run(NVIDIA_SMI_QUERY))
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


def detect_machine(*, run: Runner | None = None, meminfo: Path | None = None) -> Machine:
    return Machine(
        cpus=cpu_count(),
        memory_bytes=memory_bytes(meminfo) if meminfo else memory_bytes(),
        gpus=tuple(nvidia_gpus(run)),
    )
