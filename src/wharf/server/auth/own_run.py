"""What a run-scoped token may do to the run it is scoped to, besides reading it: start it
(:func:`start_update`), beat for it (``PUT /runs/{id}/heartbeat``) and end it (:func:`check_end`).

A run's orchestrating process (e.g. the orchestrator pod of a Kubernetes run) holds a token of
the run the client recorded as a placeholder, never the user's own credential; it may also
record its own run stopping (its process's Ctrl-C). Invariant: everything else about runs
stays refused to run tokens -- creating, deleting or renaming runs, issuing tokens, and any
of the above on another run (403; 404 in another project).
"""

from __future__ import annotations

from wharf.core.enums import ExecutionStatus
from wharf.server.auth.errors import PermissionDeniedError
from wharf.server.auth.principal import RunScope
from wharf.store.models import PipelineRunRecord, RunCreate, RunUpdate

END_STATUSES = frozenset(
    {ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.STOPPED}
)
"""The statuses a run token may end its own run with (what ``runs.finish`` writes)."""


STOP_STATUSES = frozenset({ExecutionStatus.STOPPING})
"""What a run token may also write of its own run: that it stops (its orchestrating process's
Ctrl-C or SIGTERM, gracefully or, with ``stop_forced``, by force), so that its steps in other
processes hear of it through the store. No more than it may do already: end it stopped."""


def check_end(update: RunUpdate) -> None:
    """Allow ``update`` of the token's own run only if it ends the run (a status of
    ``END_STATUSES``, with a reason, if any) or records it stopping (``STOP_STATUSES``,
    perhaps forced, with no reason: its end gives one); nothing else -- not its orchestrator
    run id."""
    stopping = update.status in STOP_STATUSES
    if (
        not (update.status in END_STATUSES or stopping)
        or (update.stop_forced is not None and not stopping)
        or (stopping and update.status_reason is not None)
        or update.orchestrator_run_id is not None
    ):
        raise PermissionDeniedError(
            "A run-scoped token may only end its own run (status completed, failed or "
            "stopped, with a reason) or record it stopping; changing anything else needs an "
            "account."
        )


def start_update(scope: RunScope, current: PipelineRunRecord, start: RunCreate) -> RunUpdate | None:
    """The change that starts the token's own run ``current`` as ``start`` asks; None when it
    was started already with ``start``'s orchestrator run id (a repeated start). The start moves
    *that* placeholder to running; it never creates a run and never takes another placeholder,
    even of the same snapshot.

    Raises ``PermissionDeniedError`` when ``start`` is not a start of ``current`` (another
    snapshot, pipeline or name, a placeholder or finished status, no orchestrator run id), or
    when ``current`` cannot take it (started by another orchestrator, or ended): with an
    account's credential such a call would create a new run, which a run token may not.
    """
    if current.id != scope.run_id:  # the caller passes the scope's own run; never another
        raise PermissionDeniedError("A run-scoped token may only start its own run.")
    same_run = (
        start.project_id == current.project_id
        and start.pipeline_id == current.pipeline_id
        and start.snapshot_id == current.snapshot_id == scope.snapshot_id
        and start.name == current.name
    )
    if not same_run or start.status is not ExecutionStatus.RUNNING:
        raise PermissionDeniedError(
            "A run-scoped token may only start its own run (its placeholder's project, "
            "pipeline, snapshot and name, status running), never create a run."
        )
    orchestrator_run_id = start.orchestrator_run_id
    if orchestrator_run_id is None:
        raise PermissionDeniedError(
            "A run-scoped token starts its own run with an orchestrator run id."
        )
    if current.orchestrator_run_id == orchestrator_run_id and not current.is_placeholder:
        return None
    if current.is_placeholder and current.orchestrator_run_id in (None, orchestrator_run_id):
        return RunUpdate(
            status=ExecutionStatus.RUNNING,
            status_reason=start.status_reason,
            orchestrator_run_id=orchestrator_run_id,
        )
    raise PermissionDeniedError(
        f"Run {current.id} was started by another orchestrator or has ended "
        f"({current.status.value}); a run-scoped token may not create another run."
    )
