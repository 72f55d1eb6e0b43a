"""Selectors for subjects (policies, preemption groups) and for pools, classes and resources.

Owns :class:`SubjectSelector` (see it for the matching rules), :class:`AttributeSelector`,
:class:`SubjectSet` (the indexed subjects of one request), the parse helpers and
:meth:`SubjectSelector.anchors` (what the scheduler indexes policies by).

Invariants: a selector is never empty (it would silently match everything or nothing), an
``all``/``any`` list given alone is never empty (next to other criteria an empty one is ignored,
so every selector's own dump validates again), and nesting is at most :data:`MAX_DEPTH` deep.
Malformed input raises :class:`~wharf.core.errors.InputError` through
:func:`parse_subject_selector` / :func:`parse_attribute_selector`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from wharf.resource_manager.domain.errors import load
from wharf.resource_manager.domain.subjects import SubjectChain, SubjectNode, SubjectType
from wharf.resource_manager.domain.units import AttributeValue

MAX_DEPTH = 8

Anchor = tuple[str, str]
"""``("id", subject_id)``, ``("attr", "key=value")`` or ``("type", subject_type)``: a fact one
node of every matching subject set must have."""

_SELECTIVITY = {"id": 0, "attr": 1, "type": 2}


def attribute_anchor(key: str, value: AttributeValue) -> str:
    # The type is part of the anchor because True and 1 must not share one.
    return f"{key}={type(value).__name__}:{value}"


def _check_shape(
    selector: SubjectSelector | AttributeSelector, has_atom: bool, fields_set: set[str]
) -> None:
    if not (has_atom or selector.all_of or selector.any_of or selector.not_ is not None):
        # An explicit empty list next to other criteria is ignored (matching treats it as
        # absent), so a selector's own full dump, which lists ``all: []``, validates again.
        for name, label in (("all_of", "all"), ("any_of", "any")):
            if name in fields_set:
                raise ValueError(f"'{label}' needs at least one selector.")
        raise ValueError("A selector needs at least one criterion or one of all/any/not.")
    if selector.depth() > MAX_DEPTH:
        raise ValueError(f"Selectors can be nested at most {MAX_DEPTH} levels deep.")


class SubjectSelector(BaseModel):
    """Selects requests by their subjects.

    An *atom* (the plain fields) matches when **one node** satisfies all its criteria: type,
    id, every listed attribute and every listed metadata entry (exact equality). A selector is
    evaluated against **all subjects of a request** (every node of every chain), so ``all`` can
    combine facts from different chains (a project *and* a component). ``all`` (every member),
    ``any`` (at least one) and ``not`` (the member does not match) combine selectors; when atom
    fields and combinators are both present they must all hold.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    subject_type: SubjectType | None = None
    subject_id: str | None = Field(default=None, min_length=1)
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    metadata: dict[str, str] = Field(default_factory=dict)
    all_of: tuple[SubjectSelector, ...] = Field(default=(), alias="all")
    any_of: tuple[SubjectSelector, ...] = Field(default=(), alias="any")
    not_: SubjectSelector | None = Field(default=None, alias="not")

    @model_validator(mode="after")
    def _validate_shape(self) -> SubjectSelector:
        _check_shape(self, self.has_atom, set(self.model_fields_set))
        return self

    @property
    def has_atom(self) -> bool:
        return bool(
            self.subject_type is not None
            or self.subject_id is not None
            or self.attributes
            or self.metadata
        )

    def depth(self) -> int:
        children = [*self.all_of, *self.any_of, *([self.not_] if self.not_ else [])]
        return 1 + max((child.depth() for child in children), default=0)

    def atom_matches_node(self, node: SubjectNode) -> bool:
        if self.subject_type is not None and node.subject_type != self.subject_type:
            return False
        if self.subject_id is not None and node.subject_id != self.subject_id:
            return False
        attributes, metadata = node.attributes, node.metadata
        for key, value in self.attributes.items():
            # bool is an int subclass: compare types too so True never equals 1.
            found = attributes.get(key, _MISSING)
            if found != value or type(found) is not type(value):
                return False
        return all(metadata.get(key) == value for key, value in self.metadata.items())

    def matches(self, subjects: SubjectSet) -> bool:
        """Whether the subjects of one request satisfy this selector."""
        if self.has_atom and not any(
            self.atom_matches_node(node) for node in subjects.candidates(self)
        ):
            return False
        if any(not member.matches(subjects) for member in self.all_of):
            return False
        if self.any_of and not any(member.matches(subjects) for member in self.any_of):
            return False
        return not (self.not_ is not None and self.not_.matches(subjects))

    def compile(self) -> Callable[[SubjectSet], bool]:
        """A closure equivalent to :meth:`matches`, for evaluating one selector many times.

        The scheduler evaluates each policy selector against thousands of requests per cycle;
        the closure does the dict lookups of the common shapes (an id, a type, an attribute)
        without re-reading the model each time.
        """
        parts: list[Callable[[SubjectSet], bool]] = []
        if self.has_atom:
            parts.append(self._compile_atom())
        parts.extend(member.compile() for member in self.all_of)
        if self.any_of:
            alternatives = [member.compile() for member in self.any_of]
            parts.append(lambda s: any(f(s) for f in alternatives))
        if self.not_ is not None:
            negated = self.not_.compile()
            parts.append(lambda s: not negated(s))
        if len(parts) == 1:
            return parts[0]
        return lambda s: all(part(s) for part in parts)

    def _compile_atom(self) -> Callable[[SubjectSet], bool]:
        subject_type, subject_id = self.subject_type, self.subject_id
        attributes = tuple(self.attributes.items())
        metadata = tuple(self.metadata.items())

        def node_matches(node: SubjectNode) -> bool:
            if subject_type is not None and node.subject_type is not subject_type:
                return False
            found = node.attributes
            for key, value in attributes:
                got = found.get(key, _MISSING)
                if got != value or type(got) is not type(value):
                    return False
            return all(node.metadata.get(key) == value for key, value in metadata)

        if subject_id is not None:
            if not attributes and not metadata and subject_type is None:
                return lambda s: subject_id in s.by_id
            return lambda s: any(node_matches(n) for n in s.by_id.get(subject_id, ()))
        if subject_type is not None:
            if not attributes and not metadata:
                return lambda s: subject_type in s.by_type
            return lambda s: any(node_matches(n) for n in s.by_type.get(subject_type, ()))
        return lambda s: any(node_matches(n) for n in s.nodes)

    def anchors(self) -> frozenset[Anchor] | None:
        """Nodes one of which every matching subject set must contain; None if unknowable.

        The scheduler indexes policies by these, so only policies anchored on a request's
        node ids or types (plus unanchored ones) are evaluated for it.
        """
        options: list[frozenset[Anchor]] = []
        if self.subject_id is not None:
            options.append(frozenset({("id", self.subject_id)}))
        elif self.attributes:
            key = min(self.attributes)
            options.append(frozenset({("attr", attribute_anchor(key, self.attributes[key]))}))
        elif self.subject_type is not None:
            options.append(frozenset({("type", self.subject_type.value)}))
        for member in self.all_of:
            anchors = member.anchors()
            if anchors is not None:
                options.append(anchors)
        if self.any_of:
            union: set[Anchor] = set()
            for member in self.any_of:
                anchors = member.anchors()
                if anchors is None:
                    union.clear()
                    break
                union |= anchors
            if union:
                options.append(frozenset(union))
        if not options:
            return None
        # Ids are the most selective anchors, then attributes, then types; then fewer entries.
        return min(options, key=lambda o: (max(_SELECTIVITY[k] for k, _ in o), len(o), sorted(o)))


_MISSING = object()


class AttributeSelector(BaseModel):
    """Selects pools, capacity classes or resource descriptors by name, kind and attributes.

    ``kind`` only applies to resource descriptors; pools and classes have no kind, so a selector
    that sets it never matches them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str | None = Field(default=None, min_length=1)
    kind: str | None = Field(default=None, min_length=1)
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    all_of: tuple[AttributeSelector, ...] = Field(default=(), alias="all")
    any_of: tuple[AttributeSelector, ...] = Field(default=(), alias="any")
    not_: AttributeSelector | None = Field(default=None, alias="not")

    @model_validator(mode="after")
    def _validate_shape(self) -> AttributeSelector:
        _check_shape(self, self.has_atom, set(self.model_fields_set))
        return self

    @property
    def has_atom(self) -> bool:
        return bool(self.name is not None or self.kind is not None or self.attributes)

    def depth(self) -> int:
        children = [*self.all_of, *self.any_of, *([self.not_] if self.not_ else [])]
        return 1 + max((child.depth() for child in children), default=0)

    def matches(
        self, name: str, attributes: Mapping[str, AttributeValue], kind: str | None = None
    ) -> bool:
        if self.name is not None and self.name != name:
            return False
        if self.kind is not None and self.kind != kind:
            return False
        for key, value in self.attributes.items():
            found = attributes.get(key, _MISSING)
            if found != value or type(found) is not type(value):
                return False
        if any(not member.matches(name, attributes, kind) for member in self.all_of):
            return False
        if self.any_of and not any(m.matches(name, attributes, kind) for m in self.any_of):
            return False
        return not (self.not_ is not None and self.not_.matches(name, attributes, kind))


@dataclass(frozen=True, slots=True)
class SubjectSet:
    """The subjects of one request, indexed for selector evaluation (built once per request)."""

    nodes: tuple[SubjectNode, ...]
    by_id: Mapping[str, list[SubjectNode]] = field(default_factory=dict)
    by_type: Mapping[str, list[SubjectNode]] = field(default_factory=dict)

    @classmethod
    def of(cls, chains: Iterable[SubjectChain]) -> SubjectSet:
        nodes = tuple(node for chain in chains for node in chain.nodes)
        by_id: dict[str, list[SubjectNode]] = {}
        by_type: dict[str, list[SubjectNode]] = {}
        for node in nodes:
            # SubjectType is a StrEnum: the member itself is a valid str key.
            by_id.setdefault(node.subject_id, []).append(node)
            by_type.setdefault(node.subject_type, []).append(node)
        return cls(nodes=nodes, by_id=by_id, by_type=by_type)

    def candidates(self, atom: SubjectSelector) -> Sequence[SubjectNode]:
        """The only nodes that can satisfy ``atom``: a dict lookup instead of a scan."""
        if atom.subject_id is not None:
            return self.by_id.get(atom.subject_id, ())
        if atom.subject_type is not None:
            return self.by_type.get(atom.subject_type, ())
        return self.nodes

    def anchors(self) -> Iterable[Anchor]:
        for subject_id in self.by_id:
            yield ("id", subject_id)
        for subject_type in self.by_type:
            yield ("type", str(subject_type))
        for node in self.nodes:
            for key, value in node.attributes.items():
                yield ("attr", attribute_anchor(key, value))


def parse_subject_selector(data: Any) -> SubjectSelector:
    """Validate a subject selector (dict or model); InputError with the offending path."""
    if isinstance(data, SubjectSelector):
        return data
    return load(SubjectSelector, data)


def parse_attribute_selector(data: Any) -> AttributeSelector:
    """Validate a pool, class or resource selector; InputError with the offending path."""
    if isinstance(data, AttributeSelector):
        return data
    return load(AttributeSelector, data)
