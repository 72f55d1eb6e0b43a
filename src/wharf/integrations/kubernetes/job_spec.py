"""What a Job Wharf creates is built from, as one value: :class:`JobSpec`.

Owns: :class:`JobSpec` (the step Job and the orchestrator Job take one each) and
:data:`SecretEnv`. Pure data: frozen, no I/O.

Invariants: a spec says everything its Job's manifest holds — nothing is read from settings by
the builders — so two equal specs build equal manifests; a credential is never a plain ``env``
value of a spec: it is named in ``secret_env`` (``secretKeyRef``), its value lives in a Secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wharf.integrations.kubernetes.settings import KubernetesPodSettings

SecretEnv = Mapping[str, tuple[str, str]]
"""Env var name -> (Secret name, key in the Secret)."""


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One Job: its identity, its pod's one container ``main``, its pod settings and how the
    Job retries, ends and is collected."""

    name: str
    namespace: str
    image: str
    command: Sequence[str]
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Plain environment values (Wharf's own win over the pod settings' entries)."""
    secret_env: SecretEnv = field(default_factory=dict)
    """Environment values read from Secrets."""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    pod_settings: KubernetesPodSettings | None = None
    service_account_name: str | None = None
    """Used unless the pod settings name one (they are the more specific setting)."""
    image_pull_policy: str | None = None
    privileged: bool = False
    grace_period_seconds: int
    backoff_limit: int
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    pod_failure_policy: Mapping[str, Any] | None = None
    """None: the default policy, with ``fail_job_exit_codes``."""
    fail_job_exit_codes: Sequence[int] = ()
    """Exit codes of ``main`` that fail the Job at once (with the default policy only)."""
    owners: Sequence[Mapping[str, Any]] = ()
    """Objects (as created, or references) that garbage-collect the Job."""
