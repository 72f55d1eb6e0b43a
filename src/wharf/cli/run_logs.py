"""``wharf runs logs RUN [--follow]``: every step's captured output, each line prefixed with
the step's name (``[train] epoch 1``), steps in the pipeline's order as ``runs show`` lists them
(:class:`RunLogs`).

A step's output reaches the artifact store once, when the step ends (``wharf.execution.
log_capture``), so a step is printed whole when it has ended; an attempt that failed and was
retried (``retrying``, final: the next attempt is a new step run) has ended too. A step that
never started gets one note instead, worded as ``wharf steps logs`` words it: one that failed
or was stopped before it started, and, once the run has finished, a step of its pipeline that
the run never reached; so does one that started, did not succeed and stored no output (a
force-stopped step), and one whose log the artifact store cannot give (the others still print;
the command then exits 1). A run that printed nothing at all (its steps wrote no output, or it
has none yet) gets one line on stderr saying so (:func:`no_output`). While a followed run waits
to start, its orchestrator's platform is asked whether it ever will (``wharf.sdk.
unstarted_runs``): one that never will (a Kubernetes orchestrator pod whose image cannot be
pulled) is ended failed and the following ends with that reason, as an error. Invariants:
each step run is printed at most once, and not before its log is stored while its run goes on
(a Kubernetes step's log is copied a moment after the step ended); the run's status is read
before its steps, so the last poll (the run finished) sees every step's final state; Ctrl-C
ends the loop between two reads; ``--follow`` outlasts a short outage of the store (a workspace
server restarting).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.cli.run_view import in_pipeline_order
from wharf.core.enums import ExecutionStatus
from wharf.store.models import MAX_PAGE_SIZE

if TYPE_CHECKING:
    from wharf.sdk.client import Client
    from wharf.store.models import PipelineRunRecord, StepRunRecord

MIN_POLL = 0.2
MAX_POLL = 2.0
OUTAGE_LIMIT = 300.0
"""Seconds ``--follow`` waits for a store it cannot reach before it gives up."""


def _steps(client: Client, run_id: UUID) -> list[StepRunRecord]:
    steps: list[StepRunRecord] = []
    page = 1
    while True:
        found = client.list_run_steps(run_id, page=page, size=MAX_PAGE_SIZE)
        steps += found.items
        if len(steps) >= found.total or not found.items:
            return steps
        page += 1


def _ended(step: StepRunRecord) -> bool:
    """Whether the step run's output is stored: it finished, or failed and was retried."""
    return step.status.is_finished or step.status is ExecutionStatus.RETRYING


def is_cached(step: StepRunRecord) -> bool:
    """Whether the step run reuses another's outputs (that one's run may have been deleted)."""
    return step.status is ExecutionStatus.CACHED or step.original_step_run_id is not None


def cached_from(client: Client, step: StepRunRecord) -> str:
    """The name of the run a cached step run was cached from; ``(deleted)`` if it is gone."""
    from wharf.core.errors import EntityNotFoundError

    if step.original_step_run_id is None:  # its run was deleted
        return "(deleted)"
    try:
        return client.get_pipeline_run(client.get_step_run(step.original_step_run_id).run_id).name
    except EntityNotFoundError:
        return "(deleted)"


def never_started(step: StepRunRecord) -> str | None:
    """Why a step run that ended has no logs, if it never started (it failed or was stopped
    before it started), with its reason's first line (None if it started or was cached)."""
    if step.start_time is not None or not _ended(step) or is_cached(step):
        return None
    reason = (step.status_reason or "").strip().splitlines()
    why = f" Reason: {reason[0]}" if reason else ""
    return f"has no logs: it never started ({step.status.value}).{why}"


def stored_nothing(step: StepRunRecord) -> str | None:
    """Why a step run that started and did not succeed has no stored output, with its reason's
    first line: nothing tells it from a step that printed nothing (a silent step stores no log)
    or one whose output was lost with its process (a force-stopped step). None for a step that
    succeeded (it printed nothing), was cached or never started."""
    if step.start_time is None or not _ended(step) or is_cached(step):
        return None
    if step.status.is_successful:
        return None
    reason = (step.status_reason or "").strip().splitlines()
    why = f" Reason: {reason[0]}" if reason else ""
    return f"has no stored output ({step.status.value}).{why}"


def never_reached(run: PipelineRunRecord) -> str:
    """Why a step of ``run``'s pipeline that has no step run in the run (which has finished)
    has no logs."""
    return f"has no logs: it never started (run '{run.name}' {run.status.value})."


def unreadable(exc: Exception) -> str:
    """The note for a step whose stored log cannot be read (the artifact store refused it)."""
    return f"its log cannot be read: {type(exc).__name__}: {exc}"


def ended_line(run: PipelineRunRecord) -> str:
    """How a followed run ended, with its reason's first line (said once following ends)."""
    reason = (run.status_reason or "").strip().splitlines()
    why = f": {reason[0].rstrip('.')}" if reason and not run.status.is_successful else ""
    return f"Run '{run.name}' ended {run.status.value}{why}."


def no_output(run: PipelineRunRecord, steps: int) -> str:
    """The line on stderr when ``runs logs`` printed nothing at all for ``run`` (which has
    ``steps`` step runs), so silence does not look like a hang or a failure."""
    name, status = run.name, run.status.value
    if steps == 0:
        if run.status.is_finished:
            return f"Run '{name}' ({status}) has no steps: there is no output to print."
        return f"Run '{name}' is {status}: no step has started yet (--follow waits for them)."
    if run.status.is_finished:
        return f"Run '{name}' ({status}): its steps wrote no output."
    return (
        f"Run '{name}' is {status}: its steps so far wrote no output "
        "(--follow waits for the others)."
    )


def _label(step: StepRunRecord) -> str:
    return step.name if step.attempt == 1 else f"{step.name} (attempt {step.attempt})"


class RunLogs:
    """Prints a run's step logs through ``echo``; :meth:`poll` once, :meth:`follow` to the end."""

    def __init__(self, client: Client, run: str, echo: Callable[[str], None]) -> None:
        self._client = client
        self._given_echo = echo
        self.printed_any = False
        """Whether anything was printed (else the command says the run wrote nothing)."""
        self.steps_seen = 0
        """How many step runs the last poll found."""
        self.run = client.get_pipeline_run(run)
        self._spec = client.get_snapshot(self.run.snapshot_id).spec
        self._printed: set[UUID] = set()
        self._noted: set[UUID] = set()
        self._noted_start = False
        self._ask_platform = True
        self.latest = self.run
        """The run as the last poll read it."""
        self.unreadable: list[str] = []
        """The steps whose log could not be read (each said where it would have printed)."""

    def _echo(self, line: str) -> None:
        self.printed_any = True
        self._given_echo(line)

    def poll(self, *, following: bool) -> tuple[bool, bool]:
        """Print what is new; (whether the run has finished, whether anything was printed).

        A step still running gets a note that its output appears when it ends; a run no
        orchestrating process has taken over yet (a Kubernetes run whose orchestrator pod has
        not started) gets one note saying so, so a follower does not wait in silence; a cached
        step gets a note naming the run it ran in instead of repeating its output; a step
        that never started gets a note saying so (:func:`never_started`, :func:`never_reached`).
        ``following`` a run waiting to start: raises :class:`WharfError` with the reason if its
        orchestrator's platform says it never will (it has been ended failed).
        """
        current = self._client.get_pipeline_run(self.run.id)
        self.latest = current
        if following and current.is_placeholder and self._ask_platform:
            self._never_starting(current)
        finished = current.status.is_finished
        printed = False
        if current.is_placeholder and not self._noted_start:
            self._noted_start = True
            later = " (--follow waits for it)" if not following else ""
            self._echo(
                f"Run '{current.name}' is {current.status.value}: its orchestrator has not "
                f"started it yet{later}; `wharf runs stop {current.name} --force` ends it."
            )
            printed = True
        steps = _steps(self._client, self.run.id)
        self.steps_seen = len(steps)
        for step in in_pipeline_order(steps, self._spec):
            if step.id in self._printed:
                continue
            if _ended(step):
                # before it counts as printed: an outage may interrupt it
                if not self._print(step, run_finished=finished):
                    continue  # its log is not stored yet
                self._printed.add(step.id)
                printed = True
            elif step.id not in self._noted:
                self._noted.add(step.id)
                later = "" if following else " (--follow waits for it)"
                when = "its output appears when it ends"
                self._echo(f"[{_label(step)}] {step.status.value}: {when}{later}.")
                printed = True
        if finished:  # the steps of its pipeline that it never reached
            reached = {step.name for step in steps}
            for name in self._spec.steps:
                if name not in reached:
                    self._echo(f"[{name}] {never_reached(current)}")
                    printed = True
        return finished, printed

    def follow(
        self,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Poll until the run has finished, printing each step as it ends: every
        :data:`MIN_POLL` s, slowing to :data:`MAX_POLL` s while nothing changes. A store that
        cannot be reached (a workspace server restarting) is waited for, with one note, for up
        to :data:`OUTAGE_LIMIT` s, as the run itself waits it out."""
        from wharf.core.errors import StoreUnavailableError

        interval = MIN_POLL
        lost_since: float | None = None
        while True:
            try:
                finished, printed = self.poll(following=True)
            except StoreUnavailableError as exc:
                now = clock()
                if lost_since is None:
                    lost_since = now
                    self._echo(f"Lost the store ({exc}); still following for {OUTAGE_LIMIT:.0f} s.")
                elif now - lost_since > OUTAGE_LIMIT:
                    raise
                sleep(MAX_POLL)
                continue
            if lost_since is not None:
                lost_since = None
                self._echo("Reached the store again; following.")
            if finished:
                return
            interval = MIN_POLL if printed else min(MAX_POLL, interval * 1.5)
            sleep(interval)

    def _never_starting(self, run: PipelineRunRecord) -> None:
        """Raise :class:`WharfError` with the reason if the run, waiting to start, never will
        (it has then been ended failed); a platform that cannot be asked is said once and not
        asked again (the run is still followed through the store)."""
        from wharf.core.errors import StoreUnavailableError, WharfError
        from wharf.sdk.unstarted_runs import fail_if_never_starting

        try:
            ended = fail_if_never_starting(self._client.workspace, run)
        except StoreUnavailableError:
            raise  # the store's outage, which :meth:`follow` waits out
        except WharfError as exc:
            self._ask_platform = False
            self._echo(f"Cannot tell whether run '{run.name}' will ever start: {exc}; following.")
            return
        if ended is None:
            return
        if ended.left is not None:
            self._echo(ended.left)
        raise WharfError(f"Run '{run.name}' failed: {ended.run.status_reason}")

    def _print(self, step: StepRunRecord, *, run_finished: bool) -> bool:
        """Print an ended step; False (nothing printed) if its run goes on and its log is not
        stored yet: it may be stored a moment after the step's end (a Kubernetes step pod's log
        is copied when its Job is cleaned up). A silent step stores none: it is printed (as
        nothing) once the run has finished."""
        label = _label(step)
        never = never_started(step)
        if never is not None:
            self._echo(f"[{label}] {never}")
            return True
        if is_cached(step):
            self._echo(f"[{label}] cached from run {cached_from(self._client, step)}.")
            return True
        try:
            text = self._client.step_logs(step)
        except Exception as exc:
            from wharf.core.errors import StoreUnavailableError

            if isinstance(exc, StoreUnavailableError):
                raise  # the metadata store's outage, which :meth:`follow` waits out
            # e.g. an artifact store this machine cannot read: the other steps still print
            self._echo(f"[{label}] {unreadable(exc)}")
            self.unreadable.append(label)
            return True
        if not text and step.logs_uri is not None and not run_finished:
            return False
        for line in text.splitlines():
            self._echo(f"[{label}] {line}")
        nothing = None if text else stored_nothing(step)
        if nothing is not None:  # else a stopped step would not show at all
            self._echo(f"[{label}] {nothing}")
        return True
