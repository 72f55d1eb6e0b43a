"""Wharf: ML pipelines on shared, scarce compute.

Public names are imported lazily so that ``import wharf`` (and ``wharf --help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "step": "wharf.sdk.step",
    "pipeline": "wharf.sdk.pipeline",
    "Client": "wharf.sdk.client",
    "get_step_context": "wharf.execution.context",
    "ResourceSettings": "wharf.config.settings",
    "PoolResourceDemand": "wharf.config.settings",
    "CachePolicy": "wharf.config.settings",
    "RetryConfig": "wharf.config.settings",
    "RunFailedError": "wharf.sdk.run_failure",
    "Schedule": "wharf.config.settings",
    "ExecutionMode": "wharf.core.enums",
    "ExecutionStatus": "wharf.core.enums",
    "StepRuntime": "wharf.core.enums",
    "unmapped": "wharf.execution.dynamic_futures",
}

__all__ = [
    "CachePolicy",
    "Client",
    "ExecutionMode",
    "ExecutionStatus",
    "PoolResourceDemand",
    "ResourceSettings",
    "RetryConfig",
    "RunFailedError",
    "Schedule",
    "StepRuntime",
    "get_step_context",
    "pipeline",
    "step",
    "unmapped",
]

if TYPE_CHECKING:
    from wharf.config.settings import (
        CachePolicy,
        PoolResourceDemand,
        ResourceSettings,
        RetryConfig,
        Schedule,
    )
    from wharf.core.enums import ExecutionMode, ExecutionStatus, StepRuntime
    from wharf.execution.context import get_step_context
    from wharf.execution.dynamic_futures import unmapped
    from wharf.sdk.client import Client
    from wharf.sdk.pipeline import pipeline
    from wharf.sdk.run_failure import RunFailedError
    from wharf.sdk.step import step


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'wharf' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
