"""How the read-only commands read: through a :class:`~wharf.sdk.client.Client` on the
configured store, as every other caller does. :data:`Reads` names the reader commands get."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from wharf.config.global_config import WharfConfig
    from wharf.sdk.client import Client

    Reads = Client

T = TypeVar("T")


def read(query: Callable[[Client], T], config: WharfConfig | None = None) -> T:
    """``query`` answered by a ``Client`` on ``config`` (the loaded configuration if None)."""
    from wharf.config.global_config import load_config
    from wharf.sdk.client import Client

    with Client(config or load_config()) as client:
        return query(client)
