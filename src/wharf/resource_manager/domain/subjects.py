"""Subjects: who a request is made on behalf of, as root-first chains.

Owns :class:`SubjectType`, :class:`SubjectNode`, :class:`SubjectChain`. A chain lists the path
from the root to the leaf (``organization → workspace → project → pipeline_run → step_run``);
selecting a node selects every chain through it, so a policy on a project covers its step runs.

Invariants (checked on construction): a chain is non-empty and each subject type appears at most
once; the hierarchical types appear in root-first order (gaps allowed: a step-run chain may skip
``pipeline``); ``account`` and ``component`` are leaves: they can only be the last node.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from wharf.resource_manager.domain.units import AttributeValue


class SubjectType(StrEnum):
    ORGANIZATION = "organization"
    WORKSPACE = "workspace"
    PROJECT = "project"
    PIPELINE = "pipeline"
    PIPELINE_RUN = "pipeline_run"
    STEP_RUN = "step_run"
    ACCOUNT = "account"
    COMPONENT = "component"


HIERARCHY: tuple[SubjectType, ...] = (
    SubjectType.ORGANIZATION,
    SubjectType.WORKSPACE,
    SubjectType.PROJECT,
    SubjectType.PIPELINE,
    SubjectType.PIPELINE_RUN,
    SubjectType.STEP_RUN,
)
LEAF_ONLY: frozenset[SubjectType] = frozenset({SubjectType.ACCOUNT, SubjectType.COMPONENT})


class SubjectNode(BaseModel):
    """One subject: an id unique within its type, plus attributes and metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject_type: SubjectType
    subject_id: str = Field(min_length=1, max_length=255)
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    """Facts a selector may match on (``name``, ``component_type``, ``is_superuser`` ...)."""
    metadata: dict[str, str] = Field(default_factory=dict)


class SubjectChain(BaseModel):
    """A root-first chain of subjects; the last node is the leaf."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: tuple[SubjectNode, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_order(self) -> SubjectChain:
        seen: set[SubjectType] = set()
        last_depth = -1
        for position, node in enumerate(self.nodes):
            if node.subject_type in seen:
                raise ValueError(f"Subject type '{node.subject_type}' appears twice in a chain.")
            seen.add(node.subject_type)
            if node.subject_type in LEAF_ONLY:
                if position != len(self.nodes) - 1:
                    raise ValueError(
                        f"A '{node.subject_type}' subject can only be the leaf of a chain."
                    )
                continue
            depth = HIERARCHY.index(node.subject_type)
            if depth <= last_depth:
                raise ValueError(
                    "Subject chains are root-first: "
                    f"'{node.subject_type}' cannot follow '{HIERARCHY[last_depth]}'."
                )
            last_depth = depth
        return self

    @property
    def leaf(self) -> SubjectNode:
        return self.nodes[-1]

    def find(self, subject_id: str) -> SubjectNode | None:
        return next((node for node in self.nodes if node.subject_id == subject_id), None)

    @classmethod
    def of(cls, *nodes: tuple[SubjectType | str, str] | SubjectNode) -> SubjectChain:
        """Shorthand: ``SubjectChain.of(("organization", "o1"), ("project", "p1"))``."""
        built = tuple(
            node
            if isinstance(node, SubjectNode)
            else SubjectNode(subject_type=SubjectType(node[0]), subject_id=node[1])
            for node in nodes
        )
        return cls(nodes=built)
