"""The one launch interface: where an isolated step's attempt runs.

Owns :class:`StepBackend` (submit, poll, cancel, cleanup, stop_recorded), provided by each
orchestrator and step operator that isolates steps (``step_backend()``, free of any run's
context) and driven by ``wharf.execution.isolated_attempts``, :class:`SlowStarting` and
:class:`DescribesPlacement`. Invariants:
- a handle is a frozen, hashable value the backend defines: it names the attempt and holds no
  live object, so it may be logged, compared and used as a key;
- :meth:`~StepBackend.poll` answers only the attempts that finished; the step's own process
  records the step's result in the store, the outcome only says how its execution ended;
- :meth:`~StepBackend.cleanup` is called exactly once per submitted attempt, after it finished.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from wharf.artifacts.store import ArtifactStore
from wharf.config.spec import StepSpec
from wharf.execution.log_capture import ThroughOutage, once
from wharf.store.models import StepRunRecord

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo

    Allocation: TypeAlias = ResourceRequestInfo
    """What the Resource Manager granted a step (the engine passes it on, never edits it)."""


@dataclass(frozen=True)
class StepLaunch:
    """One attempt to start: its step run (recorded running), the step's spec, the Wharf
    settings its process needs (``RunServices.child_env``) and where its logs go (the artifact
    store, at ``record.logs_uri``), stored through a short outage of that store as
    ``logs_through_outage`` waits one out (``log_capture.store_step_log``)."""

    record: StepRunRecord
    spec: StepSpec
    environment: Mapping[str, str]
    logs: ArtifactStore
    logs_through_outage: ThroughOutage = once
    """The run's wait through an outage of the artifact store, ended by the step's stop
    (``artifact_outages.through_artifact_outage``); default: one try."""


class Ended(Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """The attempt's execution ended in error (e.g. a non-zero exit code)."""
    CANCELLED = "cancelled"
    """Ended by :meth:`StepBackend.cancel`."""
    LOST = "lost"
    """Ended by something else (killed from outside, its machine gone)."""


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt's execution ended, as its backend saw it."""

    ended: Ended
    detail: str
    """What happened, as a phrase: "exited with code 1", "was killed by SIGKILL"; one that
    begins with :data:`NOT_STARTED` says the attempt's code never ran."""


NOT_STARTED = "could not start"
"""How an :class:`AttemptOutcome`'s detail begins when its process never started (an image that
cannot be pulled: ``could not start: ErrImagePull for image "…"``)."""


HandleT = TypeVar("HandleT", bound=Hashable)


class StepBackend(Protocol[HandleT]):
    """Runs isolated attempts somewhere: starts one (with the step's resource allocation
    when it has one), tells which of many have finished, ends one and collects what it left
    (logs)."""

    def submit(self, attempt: StepLaunch, allocation: Allocation | None) -> HandleT:
        """Start the attempt (honouring ``allocation`` where the backend can); its handle."""
        ...

    def poll(
        self, handles: Sequence[HandleT], timeout: float = 0.0
    ) -> Mapping[HandleT, AttemptOutcome]:
        """The outcomes of those of ``handles`` that finished, waiting up to ``timeout``
        seconds for at least one to finish."""
        ...

    def cancel(self, handle: HandleT, grace_seconds: float = 0.0) -> None:
        """End the attempt: ask it to stop, and after ``grace_seconds`` end it by force."""
        ...

    def cleanup(self, handle: HandleT) -> None:
        """Collect the attempt's logs and free what it used (once, after it finished)."""
        ...

    def stop_recorded(self, step: StepRunRecord) -> bool:
        """Force-stop the attempt of ``step``, started by a backend of this kind in any
        process, from what the store recorded of it (for local processes: host, pid and start
        token), so a process that did not start it (``wharf runs stop --force``) can stop it;
        whether one was stopped."""
        ...


@runtime_checkable
class SlowStarting(Protocol):
    """A step backend whose attempts may take long to start (an image pull, a node scaling
    up): until an attempt's first heartbeat the engine's liveness check allows it
    ``startup_timeout_seconds`` instead of the usual liveness timeout (read through
    :func:`startup_timeout_of`; a backend without it, or None, gets the usual one)."""

    startup_timeout_seconds: float | None
    """How long an attempt may take from its submit to its first heartbeat; None: no longer
    than the usual liveness timeout."""


@runtime_checkable
class SlowStartingPerStep(Protocol):
    """A step backend whose startup timeout depends on the step (a step's own settings may
    set it): :func:`startup_timeout_of` asks it for the step at hand."""

    def startup_timeout_for(self, spec: StepSpec) -> float | None:
        """How long an attempt of ``spec`` may take from its submit to its first heartbeat;
        None: no longer than the usual liveness timeout."""
        ...


def startup_timeout_of(backend: object, spec: StepSpec | None = None) -> float | None:
    """``backend``'s startup timeout in seconds for an attempt of ``spec``, if it declares one
    (:class:`SlowStartingPerStep` when a step is given, else :class:`SlowStarting`)."""
    if spec is not None and isinstance(backend, SlowStartingPerStep):
        seconds = backend.startup_timeout_for(spec)
    elif isinstance(backend, SlowStarting):
        seconds = backend.startup_timeout_seconds
    else:
        return None
    return None if seconds is None else float(seconds)


@runtime_checkable
class TellsWork(Protocol):
    """A step backend that can tell whether an attempt's process is working (using the CPU):
    the engine beats for an attempt that works but cannot beat itself (its code holds the GIL;
    ``isolated_attempts.IsolatedExecutor``)."""

    def working(self, handle: Any) -> bool:
        """Whether the process of ``handle`` used CPU time since the last time this was asked
        (False the first time, or when it cannot tell)."""
        ...


@runtime_checkable
class HearsStopsAtOnce(Protocol):
    """A step backend that can make an attempt's process ask the store at once whether it
    should stop (beat now), instead of at its next heartbeat: the run's graceful stop reaches
    a running step within a second (``run_stop.RunStopper.stop``)."""

    def beat_now(self, handle: Any) -> None:
        """Make the process of ``handle`` beat at once, if it is still the one started; must
        not raise for one that ended."""
        ...


@runtime_checkable
class DescribesPlacement(Protocol):
    """A step backend that says where its attempts run, for the progress line of an attempt's
    start (read through :func:`placement_of`; without it, or with None, the line says the
    step runs "in its own process")."""

    def placement(self, spec: StepSpec, record: StepRunRecord) -> str | None:
        """Where the attempt of ``record`` (a step run of ``spec``) runs, as a phrase that
        follows "started" (e.g. ``as Kubernetes Job JOB (namespace NS)``), known before its
        submit; None: not said."""
        ...


def placement_of(backend: object, spec: StepSpec, record: StepRunRecord) -> str | None:
    """Where ``backend`` runs the attempt of ``record``, if it says
    (:class:`DescribesPlacement`)."""
    if not isinstance(backend, DescribesPlacement):
        return None
    return backend.placement(spec, record)
