"""Resource Manager set-ups shared by the reclaim tests, locally (``tests/e2e``) and on the
Kubernetes bed (``tests/integrations/kubernetes``).

:func:`contended_pool` is the pool a reclaim test contends for: one licence, the pipeline named
``high_pipe`` outranking the one named ``low_pipe``. Nothing here starts or stops anything: the
caller owns the workspace and the Resource Manager client it passes.
"""

from __future__ import annotations

from wharf.resource_manager.contract.models import PolicyCreate
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.resource_manager.domain import SubjectSelector, SubjectType
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace


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
