"""The ``local`` orchestrator: every step runs in a thread of this process."""

from __future__ import annotations

from wharf.orchestrators.base import BaseOrchestrator


class LocalOrchestrator(BaseOrchestrator):
    flavor = "local"
