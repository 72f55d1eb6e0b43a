"""Copies and wire models built without validation equal the validated ones."""

from __future__ import annotations

from tests.resource_manager.builders import at, holding, klass, policy, pool
from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.resource_manager.contract.models import ResourceRequestInfo
from wharf.resource_manager.service.codec import neutral, updated
from wharf.resource_manager.service.convert import info_of, info_with

P = pool("p", klass("c", GPU=4))
TEAM = policy("team", P)
HELD = holding("h", P, TEAM, {("c", "GPU"): 2}, lease=30)


def test_updated_equals_model_copy() -> None:
    changes = {
        "status": ResourceRequestStatus.RELEASED,
        "status_reason": "Released by the holder.",
        "released_at": at(5),
        "runtime_state": ResourceRequestRuntimeState.RUNNING,
    }
    copied = updated(HELD, changes)
    reference = HELD.model_copy(update=changes)
    assert copied == reference
    assert copied.model_fields_set == reference.model_fields_set
    assert copied.model_dump(mode="json") == reference.model_dump(mode="json")
    assert HELD.status is ResourceRequestStatus.ALLOCATED  # the original is untouched


def test_neutral_drops_the_lease_fields_only() -> None:
    stripped = neutral(HELD)
    assert stripped.lease_expires_at is None and stripped.allocation_deadline is None
    assert stripped == HELD.model_copy(update={"lease_expires_at": None})


def test_info_validates_back_to_itself() -> None:
    info = info_of(HELD, "alice")
    assert isinstance(info, ResourceRequestInfo)
    assert info.requester == "alice"
    dumped = info.model_dump(mode="json", by_alias=True)
    assert ResourceRequestInfo.model_validate(dumped) == info


def test_info_with_changes() -> None:
    info = info_with(HELD, "alice", {"renewed_at": at(7)})
    reference = ResourceRequestInfo.model_validate(
        {**HELD.model_dump(), "renewed_at": at(7), "requester": "alice"}
    )
    assert info == reference
    assert HELD.renewed_at is None
