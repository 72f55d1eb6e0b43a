"""The ``local`` orchestrator: every step runs in a thread of this process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wharf.core.errors import InputError
from wharf.execution.local_process import OPTIONS as LOCAL_PROCESS_OPTIONS
from wharf.orchestrators.base import BaseOrchestrator


class LocalOrchestrator(BaseOrchestrator):
    """Configuration: none."""

    flavor = "local"

    @classmethod
    def check_configuration(cls, configuration: Mapping[str, Any]) -> None:
        """Refuse any key when the component is registered (a typo would be ignored), as the
        ``local_process`` flavor refuses keys it does not know."""
        for key in configuration:
            hint = (
                " (an option of the local_process flavor)" if key in LOCAL_PROCESS_OPTIONS else ""
            )
            raise InputError(f"Unknown local option '{key}'{hint}; known: none.")
