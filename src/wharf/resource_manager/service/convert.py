"""Domain and scheduler results -> wire models (:mod:`wharf.resource_manager.contract.models`).

Owns the conversions only. Invariant: nothing is re-validated that was validated when it was
built or loaded (the fields are adopted as they are, with ``model_construct``), so responses
are cheap to build: one per operation of every batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wharf.resource_manager.contract.models import (
    ExplanationInfo,
    QueuePositionInfo,
    ResourceRequestInfo,
)
from wharf.resource_manager.domain import ResourceRequest
from wharf.resource_manager.scheduler import Explanation

if TYPE_CHECKING:
    from wharf.resource_manager.service.request_store import Loaded


def request_info(loaded: Loaded) -> ResourceRequestInfo:
    return info_of(loaded.request, loaded.requester)


def info_of(request: ResourceRequest, requester: str) -> ResourceRequestInfo:
    return info_with(request, requester, None)


def info_with(
    request: ResourceRequest, requester: str, changes: Mapping[str, Any] | None
) -> ResourceRequestInfo:
    """``request`` with ``changes`` (valid values of its fields) as the wire model."""
    values = dict(request.__dict__)  # exactly its fields: every constructor fills in defaults
    if changes:
        values.update(changes)
    values["requester"] = requester
    return ResourceRequestInfo.model_construct(**values)


def explanation_info(explanation: Explanation) -> ExplanationInfo:
    return ExplanationInfo(
        request_id=explanation.request_id,
        status=explanation.status,
        outcome=explanation.outcome,
        reason=explanation.reason,
        positions=tuple(
            QueuePositionInfo(
                pool_id=p.pool_id,
                pool_name=p.pool_name,
                position=p.position,
                queue_length=p.queue_length,
                reason=p.reason,
            )
            for p in explanation.positions
        ),
        blocker=explanation.blocker,
        blocking_policy_id=explanation.blocking_policy_id,
        blocking_pool_id=explanation.blocking_pool_id,
        blocking_class=explanation.blocking_class,
        blocking_resource=explanation.blocking_resource,
        would_have_to_end=explanation.would_have_to_end,
        preemptible=explanation.preemptible,
    )
