"""Directed acyclic graphs of named nodes (pipeline steps).

Invariant: a :class:`Dag` that was constructed is acyclic and every edge names a known node.
Node order is deterministic: topological, ties broken by insertion order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from wharf.core.errors import PipelineDefinitionError


@dataclass(frozen=True)
class Dag:
    """Nodes and their upstream nodes; ``order`` is a topological order."""

    upstream: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...] = field(init=False)
    downstream: Mapping[str, tuple[str, ...]] = field(init=False)

    def __post_init__(self) -> None:
        for node, ups in self.upstream.items():
            for up in ups:
                if up not in self.upstream:
                    raise PipelineDefinitionError(f"Step '{node}' depends on unknown step '{up}'.")
        down: dict[str, list[str]] = {n: [] for n in self.upstream}
        for node, ups in self.upstream.items():
            for up in ups:
                down[up].append(node)
        object.__setattr__(self, "downstream", {n: tuple(d) for n, d in down.items()})
        object.__setattr__(self, "order", _topological_order(self.upstream, down))

    @classmethod
    def from_edges(cls, nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> Dag:
        """Build from ``(upstream, downstream)`` pairs."""
        ups: dict[str, list[str]] = {n: [] for n in nodes}
        for a, b in edges:
            if b not in ups:
                raise PipelineDefinitionError(f"Edge to unknown step '{b}'.")
            if a not in ups[b]:
                ups[b].append(a)
        return cls({n: tuple(u) for n, u in ups.items()})

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if not self.upstream[n])

    def descendants(self, node: str) -> set[str]:
        seen: set[str] = set()
        stack = list(self.downstream[node])
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(self.downstream[n])
        return seen


def _topological_order(
    upstream: Mapping[str, tuple[str, ...]], downstream: Mapping[str, list[str]]
) -> tuple[str, ...]:
    pending = {n: len(set(u)) for n, u in upstream.items()}
    ready = [n for n in upstream if pending[n] == 0]
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for d in dict.fromkeys(downstream[node]):
            pending[d] -= 1
            if pending[d] == 0:
                ready.append(d)
    if len(order) != len(upstream):
        cycle = _find_cycle(upstream, set(upstream) - set(order))
        raise PipelineDefinitionError("The pipeline has a cycle: " + " -> ".join(cycle) + ".")
    return tuple(order)


def _find_cycle(upstream: Mapping[str, tuple[str, ...]], candidates: set[str]) -> list[str]:
    """One cycle among ``candidates`` (nodes left over by Kahn's algorithm), as a path."""
    start = min(candidates)
    path = [start]
    seen = {start: 0}
    node = start
    while True:
        node = min(u for u in upstream[node] if u in candidates)
        if node in seen:
            cycle = [*path[seen[node] :], node]
            return list(reversed(cycle))
        seen[node] = len(path)
        path.append(node)
