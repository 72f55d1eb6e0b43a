"""A materializer that only a step's code imports (tests/execution/test_step_runner.py): its
import path names a module not yet imported when the step starts."""

from __future__ import annotations

from typing import Any

from wharf.artifacts.materializers.base import Materializer


class Marked:
    """A value only :class:`MarkedMaterializer` saves."""


class MarkedMaterializer(Materializer):
    ASSOCIATED_TYPES = (Marked,)

    def save(self, data: Any) -> None:
        self.write_bytes("marked", b"1")

    def load(self, data_type: type[Any]) -> Any:
        return Marked()
