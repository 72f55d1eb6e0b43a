"""Resource Manager set-ups shared by the reclaim tests, locally (``tests/e2e``) and on the
Kubernetes bed (``tests/integrations/kubernetes``).

:func:`contended_pool` is the pool a reclaim test contends for: one licence, the pipeline named
``high_pipe`` outranking the one named ``low_pipe``. :func:`assert_cut_off_then_retried` and
:func:`assert_handed_over_after_grace` check what became of a reclaimed step that ignored the
stop (:mod:`tests.stop_ignoring`) and how its licence went to the preemptor.
Nothing here starts or stops anything: the caller owns the workspace and the Resource Manager
client it passes. (No assertion rewriting here: every assert carries its own message.)
"""

from __future__ import annotations

from pathlib import Path

from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.resource_manager.contract.models import PolicyCreate
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.resource_manager.domain import SubjectSelector, SubjectType
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import StepRunRecord


def contended_pool(
    workspace: Workspace,
    reclaimable: str = "coordinated",
    rm: ResourceManagerClient | None = None,
) -> None:
    """The pool ``shared`` of one licence (``reclaimable`` as given), admitted through two
    pipeline policies only (the workspace user's account policy is removed): ``high_pipe``'s
    (priority 10) outranks ``low_pipe``'s (0). ``rm`` is the Resource Manager to set it up in
    (default: the workspace's embedded one)."""
    rm = workspace.resource_manager() if rm is None else rm
    account = workspace.user.name
    ensure_pool(rm, "shared", {"license": 1}, account=account, reclaimable=reclaimable)
    rm.policies.delete(f"shared-{account}")  # ensure_pool's own policy
    for name, priority in (("low", 0), ("high", 10)):
        rm.policies.create(
            PolicyCreate(
                name=f"shared-{name}",
                pool="shared",
                priority=priority,
                subject_selector=SubjectSelector(
                    subject_type=SubjectType.PIPELINE, attributes={"name": f"{name}_pipe"}
                ),
            )
        )


def assert_cut_off_then_retried(
    reclaimed: StepRunRecord, retried: StepRunRecord, marker: Path
) -> None:
    """The ``reclaimed`` attempt of a step that ignored the stop was cancelled (a retry
    followed, which completed); ``marker`` (:func:`tests.stop_ignoring.ignore_the_stop`'s)
    shows the interrupt reached the code, which ignored it, and that the reclaimed attempt's
    process was ended (its ``finally`` never ran): only the retry left normally."""
    statuses = (reclaimed.status, retried.status)
    assert statuses == (ExecutionStatus.RETRYING, ExecutionStatus.COMPLETED), (
        statuses,
        reclaimed.status_reason,
    )
    reason = reclaimed.status_reason or ""
    assert reason.startswith("Cancelling: "), reason
    lines = marker.read_text().splitlines()
    assert "interrupted" in lines, lines
    assert lines.count("left") == 1 and lines[-1] == "left", lines


def assert_handed_over_after_grace(
    workspace: Workspace,
    reclaimed: StepRunRecord,
    preemptor_step: StepRunRecord,
    grace: float,
    slack: float,
) -> None:
    """The ``reclaimed`` step's request was preempted and released no sooner than ``grace`` s
    (and at most ``slack`` s later) after the preemptor's request was made, and the licence went
    to the preemptor (``preemptor_step``'s request) only then."""
    rm = workspace.resource_manager()
    victim_id, preemptor_id = reclaimed.resource_request_id, preemptor_step.resource_request_id
    assert victim_id and preemptor_id, f"requests: reclaimed {victim_id}, preemptor {preemptor_id}"
    victim = rm.requests.get(victim_id)
    preemptor = rm.requests.get(preemptor_id)
    assert victim.status is ResourceRequestStatus.PREEMPTED, (victim.status, victim.status_reason)
    assert victim.released_at is not None and preemptor.allocated_at is not None, (
        f"victim released at {victim.released_at}, preemptor allocated at {preemptor.allocated_at}"
    )
    held_on = (victim.released_at - preemptor.created_at).total_seconds()
    assert grace <= held_on <= grace + slack, (
        f"released {held_on:.1f} s after the preemptor asked (grace {grace} s, slack {slack} s)"
    )
    assert preemptor.allocated_at >= victim.released_at, (
        f"preemptor allocated at {preemptor.allocated_at}, before the victim's release at "
        f"{victim.released_at}"
    )
