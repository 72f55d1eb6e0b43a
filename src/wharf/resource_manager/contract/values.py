"""The Resource Manager's domain value types that the other sides name as they are: subjects and
selectors (what a request is made for), pools and policies (what ``Client`` and ``wharf pool``
show), reclaimability, and the descriptor of a core resource kind.

Re-exported from the pure domain so that the engine (``sdk``, ``execution``, orchestrators, step
operators) and the CLI reach them through the contract, never the domain itself (import-linter).
The domain stays their one definition.
"""

from wharf.resource_manager.domain import (
    Policy,
    Pool,
    Reclaimable,
    ResourceDescriptor,
    SubjectChain,
    SubjectNode,
    SubjectSelector,
    SubjectType,
    descriptor_of,
)

__all__ = [
    "Policy",
    "Pool",
    "Reclaimable",
    "ResourceDescriptor",
    "SubjectChain",
    "SubjectNode",
    "SubjectSelector",
    "SubjectType",
    "descriptor_of",
]
