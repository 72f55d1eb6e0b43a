"""The Resource Manager's domain: pure models and rules, no I/O, no clock reads, no globals.

Modules: :mod:`.units` (descriptors, units, exact integer quantities), :mod:`.subjects`
(root-first subject chains), :mod:`.selectors` (subject and pool/class/resource selectors),
:mod:`.pools` (pools, capacity classes), :mod:`.policies` (policies, grants, Σ reserved ≤
capacity), :mod:`.requests` (requests, demands, allocations), :mod:`.lifecycle` (the status
machine, release, cancel), :mod:`.leases` (lapse, renewal, restart grace),
:mod:`.target_settings` (pool < class < policy < grant merge), :mod:`.errors` (pydantic errors
→ InputError).

Invariant: everything a service persists is a plain frozen pydantic model with an id (pools,
policies, requests, allocations) or a name (descriptors, classes).
"""

from wharf.resource_manager.domain.errors import load
from wharf.resource_manager.domain.leases import (
    ALLOCATION_WAIT_TIMED_OUT,
    LEASE_EXPIRED,
    LEASE_EXPIRED_WHILE_PENDING,
    apply_lapse,
    lapse,
    lease_lapsed,
    renew,
)
from wharf.resource_manager.domain.lifecycle import (
    ENDED_RUNTIME_STATE,
    REQUEST_TRANSITIONS,
    TERMINAL_STATUSES,
    cancel,
    check_request_transition,
    is_terminal,
    lease_at_end,
    new_request,
    release,
    transition,
)
from wharf.resource_manager.domain.policies import (
    PRIORITY_LANE_PRIORITY,
    Grant,
    GrantResource,
    MissingAction,
    Policy,
    validate_policy,
    validate_reserved_totals,
)
from wharf.resource_manager.domain.pools import (
    CapacityClass,
    Pool,
    Reclaimable,
    class_accepts,
    validate_pool,
)
from wharf.resource_manager.domain.requests import (
    HOLDING_STATUSES,
    Allocation,
    Demand,
    ResourceRequest,
)
from wharf.resource_manager.domain.selectors import (
    AttributeSelector,
    SubjectSelector,
    SubjectSet,
    parse_attribute_selector,
    parse_subject_selector,
)
from wharf.resource_manager.domain.subjects import SubjectChain, SubjectNode, SubjectType
from wharf.resource_manager.domain.target_settings import merge_target_settings
from wharf.resource_manager.domain.units import (
    CPU,
    GPU,
    MEMORY,
    STOCK_DESCRIPTORS,
    Quantity,
    ResourceDescriptor,
    Unit,
    check_custom_name,
    check_unit_names,
    descriptor_of,
    descriptors_by_name,
    format_base,
    format_human,
    parse_quantity,
    to_base,
)

__all__ = [
    "ALLOCATION_WAIT_TIMED_OUT",
    "CPU",
    "ENDED_RUNTIME_STATE",
    "GPU",
    "HOLDING_STATUSES",
    "LEASE_EXPIRED",
    "LEASE_EXPIRED_WHILE_PENDING",
    "MEMORY",
    "PRIORITY_LANE_PRIORITY",
    "REQUEST_TRANSITIONS",
    "STOCK_DESCRIPTORS",
    "TERMINAL_STATUSES",
    "Allocation",
    "AttributeSelector",
    "CapacityClass",
    "Demand",
    "Grant",
    "GrantResource",
    "MissingAction",
    "Policy",
    "Pool",
    "Quantity",
    "Reclaimable",
    "ResourceDescriptor",
    "ResourceRequest",
    "SubjectChain",
    "SubjectNode",
    "SubjectSelector",
    "SubjectSet",
    "SubjectType",
    "Unit",
    "apply_lapse",
    "cancel",
    "check_custom_name",
    "check_request_transition",
    "check_unit_names",
    "class_accepts",
    "descriptor_of",
    "descriptors_by_name",
    "format_base",
    "format_human",
    "is_terminal",
    "lapse",
    "lease_at_end",
    "lease_lapsed",
    "load",
    "merge_target_settings",
    "new_request",
    "parse_attribute_selector",
    "parse_quantity",
    "parse_subject_selector",
    "release",
    "renew",
    "to_base",
    "transition",
    "validate_policy",
    "validate_pool",
    "validate_reserved_totals",
]
