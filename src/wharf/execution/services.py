"""What the engine needs from the outside world, passed explicitly (no globals).

``clock`` and ``sleep`` are injected so that retries, cache expiry and stop handling are tested
with a fake clock and no real sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:  # kept out of import time: the CLI imports this module
    from wharf.artifacts.materializers.registry import MaterializerRegistry
    from wharf.artifacts.store import ArtifactStore
    from wharf.store.ports import Store


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RunServices:
    store: Store
    artifact_store: ArtifactStore
    materializers: MaterializerRegistry
    project_id: UUID
    user_id: UUID | None = None
    clock: Callable[[], datetime] = utc_now
    sleep: Callable[[float], None] = time.sleep
    source_root: Path = field(default_factory=Path.cwd)
    """Where ``CachePolicy.file_dependencies`` are resolved."""
    heartbeat_interval: float = 15.0
    child_env: dict[str, str] = field(default_factory=dict)
    """Environment that a step's own process needs to reach the same store."""
