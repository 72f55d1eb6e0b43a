"""What the engine needs of a step object: its function and its parsed interface.

``wharf.sdk.Step`` satisfies this; the engine never imports the SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from wharf.core.step_interface import StepInterface, split_outputs


@runtime_checkable
class StepLike(Protocol):
    func: Callable[..., Any]
    interface: StepInterface


def split_step_outputs(step: StepLike, step_name: str, value: Any) -> dict[str, Any]:
    return split_outputs(step_name, step.interface, value)
