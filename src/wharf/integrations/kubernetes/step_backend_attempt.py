"""What the Kubernetes step backend keeps of one submitted attempt, and the settings it runs
with.

Owns :class:`SubmittedAttempt` (the backend's record of an attempt until its cleanup, which
stores its log through a short outage of the artifact store) and the
merges of a step's settings (:func:`for_step`: the step's entry over the component's;
:func:`allocated`: an allocation's target settings and resources over those), and how long a
cancelled attempt's pods may go unreported before their node is taken as lost
(:func:`unreported_end_margin`). Invariant: an attempt's outcome, once set, is not changed here.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wharf.artifacts.store import ArtifactStore
from wharf.config.spec import StepSpec
from wharf.execution.backends import AttemptOutcome
from wharf.execution.log_capture import ThroughOutage, once, store_step_log, write_log
from wharf.integrations.kubernetes.allocation import allocated_settings
from wharf.integrations.kubernetes.settings import (
    KubernetesOrchestratorSettings,
    KubernetesStepOperatorSettings,
)
from wharf.integrations.kubernetes.step_backend_logs import PodLogFollower
from wharf.integrations.kubernetes.step_settings import step_settings

if TYPE_CHECKING:
    from wharf.execution.backends import Allocation

StepSettings = KubernetesOrchestratorSettings | KubernetesStepOperatorSettings

logger = logging.getLogger(__name__)

UNREPORTED_END_MARGIN_SECONDS = 30.0
"""How long after its grace period a cancelled attempt's pods may take to be reported ended;
past it their node is taken as lost (it no longer reports) and the attempt as cancelled."""
UNREPORTED_END_MARGIN_ENV = "WHARF_KUBERNETES_UNREPORTED_END_MARGIN"
"""Seconds, overriding :data:`UNREPORTED_END_MARGIN_SECONDS` in the backend's process."""


def unreported_end_margin(environ: Mapping[str, str] | None = None) -> float:
    """:data:`UNREPORTED_END_MARGIN_SECONDS`, or the non-negative seconds that
    ``UNREPORTED_END_MARGIN_ENV`` gives in ``environ`` (the process's by default)."""
    value = (os.environ if environ is None else environ).get(UNREPORTED_END_MARGIN_ENV, "")
    if not value:
        return UNREPORTED_END_MARGIN_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        logger.warning(
            "%s=%r is not a number of seconds (0 or more): %g s are used.",
            UNREPORTED_END_MARGIN_ENV,
            value,
            UNREPORTED_END_MARGIN_SECONDS,
        )
        return UNREPORTED_END_MARGIN_SECONDS
    return seconds


@dataclass
class SubmittedAttempt:
    """One attempt the backend submitted as Job ``job_name``, until its cleanup."""

    job_name: str
    logs: ArtifactStore
    logs_uri: str | None
    backoff_limit: int
    waiting_reasons: tuple[str, ...]
    startup_timeout: float
    startup_deadline: float
    """When (monotonic) its pods must have started a container: its submit plus the step's
    ``pod_startup_timeout``."""
    cancelled: bool = False
    cancel_deadline: float | None = None
    """After a cancel: when (monotonic) its pods should have ended; past it they never will."""
    outcome: AttemptOutcome | None = None
    followed: dict[str, PodLogFollower] = field(default_factory=dict)
    """Logs of its pods followed since they began to be deleted or were cancelled (a deleted
    pod takes its log along)."""
    step_name: str = ""
    logs_through_outage: ThroughOutage = once
    """The run's wait through an outage of the artifact store (``StepLaunch``'s)."""

    def store_log(self, text: bytes) -> None:
        """Store its pods' log ``text`` at ``logs_uri``, through a short outage of the store;
        a log that cannot be stored is a warning (``log_capture.store_step_log``)."""
        uri = self.logs_uri
        if uri:
            save = functools.partial(write_log, self.logs, uri, text)
            store_step_log(self.logs, uri, save, self.step_name, self.logs_through_outage)


def for_step(settings: StepSettings, spec: StepSpec) -> StepSettings:
    """``settings`` with the step's ``settings`` entry for this backend's component over them."""
    if isinstance(settings, KubernetesOrchestratorSettings):
        return step_settings(settings, spec)
    return step_settings(settings, spec)


def allocated(settings: StepSettings, allocation: Allocation) -> StepSettings:
    """``settings`` with the allocation's target settings and resources applied."""
    if isinstance(settings, KubernetesOrchestratorSettings):
        return allocated_settings(settings, allocation)
    return allocated_settings(settings, allocation)


def cancel_overdue(attempt: SubmittedAttempt) -> bool:
    """Whether the attempt was cancelled and its pods' grace period (and a margin) passed."""
    deadline = attempt.cancel_deadline
    return deadline is not None and time.monotonic() >= deadline
