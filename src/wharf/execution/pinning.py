"""Pinning an isolated step's process to the CPUs and GPUs its allocation grants.

Owns :func:`claim` and :func:`pin_to_allocation` (CPU affinity where the OS has it,
``CUDA_VISIBLE_DEVICES`` for GPUs). The Resource Manager decides how many devices a step gets,
not which: step processes on one machine claim free devices with a non-blocking ``flock`` on
one lock file per device (in a per-user directory). Invariants: the OS drops a process's locks
when it exits, so a killed step never leaks a device; when too few devices are free (processes
outside Wharf hold some), the step runs unpinned and says so.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wharf.core.resource_kinds import CPU, GPU

if TYPE_CHECKING:  # imported where an allocation is read: a step without one never needs it
    from wharf.resource_manager.contract.models import ResourceRequestInfo

logger = logging.getLogger(__name__)

ALLOCATION_ENV = "WHARF_STEP_ALLOCATION"
_held: list[int] = []  # lock file descriptors this process keeps for its lifetime


def allocation_env(child_env: dict[str, str], allocation: ResourceRequestInfo) -> dict[str, str]:
    # Defaults left out: selectors refuse explicitly empty combinators on the way back in.
    return {
        **child_env,
        ALLOCATION_ENV: allocation.model_dump_json(by_alias=True, exclude_defaults=True),
    }


def allocation_from_env(environ: dict[str, str]) -> ResourceRequestInfo | None:
    raw = environ.get(ALLOCATION_ENV)
    if raw is None:
        return None
    from wharf.resource_manager.contract.models import ResourceRequestInfo

    return ResourceRequestInfo.model_validate_json(raw)


def allocated_amounts(allocation: ResourceRequestInfo) -> tuple[int, int]:
    """(whole CPUs, GPUs) granted: CPUs rounded up from their base unit (mCPU)."""
    base = {CPU.name: 0, GPU.name: 0}
    for item in allocation.allocations:
        if item.resource_kind in base:
            base[item.resource_kind] += item.base_quantity
    per_cpu, per_gpu = CPU.multiplier(CPU.default_unit), GPU.multiplier(GPU.default_unit)
    return math.ceil(base[CPU.name] / per_cpu), math.ceil(base[GPU.name] / per_gpu)


def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"wharf-devices-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def claim(
    kind: str, wanted: int, candidates: Sequence[int], lock_dir: Path | None = None
) -> list[int]:
    """Claim ``wanted`` of ``candidates`` for this process; [] (nothing held) if too few free."""
    directory = lock_dir or _lock_dir()
    claimed: list[tuple[int, int]] = []
    for device in candidates:
        if len(claimed) == wanted:
            break
        fd = os.open(directory / f"{kind}-{device}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        claimed.append((device, fd))
    if len(claimed) < wanted:
        for _, fd in claimed:
            os.close(fd)  # closing drops the lock
        return []
    _held.extend(fd for _, fd in claimed)
    return [device for device, _ in claimed]


def pin_to_allocation(allocation: ResourceRequestInfo, gpu_indices: Sequence[int]) -> None:
    """Bind this process to the devices its allocation grants (best effort, logged)."""
    cpus, gpus = allocated_amounts(allocation)
    if cpus and hasattr(os, "sched_setaffinity"):
        available = sorted(os.sched_getaffinity(0))
        if cpus < len(available):
            chosen = claim(CPU.name, cpus, available)
            if chosen:
                os.sched_setaffinity(0, chosen)
            else:
                logger.warning("No %d free CPUs to pin to; running unpinned.", cpus)
    if gpus:
        chosen = claim(GPU.name, gpus, gpu_indices)
        if chosen:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in chosen)
        else:
            logger.warning("No %d free GPUs to pin to; CUDA_VISIBLE_DEVICES is not set.", gpus)
