"""Merging target settings: pool < class < policy < grant.

Owns: :func:`merge_target_settings`.

Invariant: later layers win key by key; nested mappings are merged recursively (so a grant can
add one node selector without repeating the pool's); lists and scalars are replaced whole. The
inputs are never mutated and the result shares no mutable containers with them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def merge_target_settings(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge layers lowest-precedence first: ``merge(pool, class_, policy, grant)``."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer:
            _merge_into(merged, layer)
    return merged


def _merge_into(target: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        current = target.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _merge_into(current, value)
        elif isinstance(value, Mapping):
            nested: dict[str, Any] = {}
            _merge_into(nested, value)
            target[key] = nested
        else:
            target[key] = copy.deepcopy(value)
