"""What the engine needs from the outside world, passed explicitly (no globals).

Owns :class:`RunServices`, :func:`open_store`, :func:`run_scoped` and :func:`for_run`.
Invariants: ``clock``, ``sleep`` and ``wait`` are injected, so retries, cache expiry and stop
handling are tested with a fake clock and no real sleeps (the engine never tells a real
``sleep`` from a fake one); for a run on a workspace server, a step's own process never sees
the user's credential, and the run's own calls once it started use a token scoped to the run
too (:func:`run_scoped`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.config.global_config import API_KEY_ENV, SERVER_URL_ENV, WharfConfig
from wharf.execution.known_versions import KnownVersions
from wharf.execution.progress import ProgressReporter

if TYPE_CHECKING:  # kept out of import time: the CLI imports this module
    from wharf.artifacts.materializers.registry import MaterializerRegistry
    from wharf.artifacts.store import ArtifactStore
    from wharf.execution.resources.port import StepResources
    from wharf.store.ports import Store


def utc_now() -> datetime:
    return datetime.now(UTC)


def wait_unless_woken(woken: threading.Event, seconds: float) -> None:
    """Wait ``seconds``, or less once ``woken`` is set (the real ``RunServices.wait``)."""
    woken.wait(seconds)


def open_store(config: WharfConfig) -> Store:
    """The workspace server's store over REST when a server URL is configured (``wharf login``
    or ``WHARF_SERVER_URL``, with ``WHARF_API_KEY`` as credential), else the embedded SQL store
    at ``config.store_url``."""
    if config.server_url:
        from wharf.store.rest import RestStore

        return RestStore(config.server_url, config.api_key)
    from wharf.store.sql.store import SqlStore

    return SqlStore.open(config.store_url)


@dataclass(frozen=True)
class RunServices:
    """The engine's outside world for a run; ``child_env``: what a step's own process needs
    to reach the same stores."""

    store: Store
    artifact_store: ArtifactStore
    materializers: MaterializerRegistry
    project_id: UUID
    user_id: UUID | None = None
    clock: Callable[[], datetime] = utc_now
    sleep: Callable[[float], None] = time.sleep
    wait: Callable[[threading.Event, float], None] = wait_unless_woken
    """Waits a delay that an event cuts short (a graceful stop during the wait before a
    retry); a fake one moves a fake clock instead."""
    source_root: Path = field(default_factory=Path.cwd)
    """Where ``CachePolicy.file_dependencies`` are resolved."""
    heartbeat_interval: float = 15.0
    child_env: dict[str, str] = field(default_factory=dict)
    """Environment that a step's own process needs to reach the same store."""
    versions: KnownVersions = field(default_factory=KnownVersions)
    """Artifact versions this process already knows (shared by the runs of a workspace)."""
    progress: ProgressReporter = field(default_factory=ProgressReporter)
    """Told of each step's start, cache hit, wait, retry and end, and of the run's start and
    end (``wharf.execution.progress``); the default reports nothing."""
    resources: StepResources | None = None
    """The port through which steps that ask for resources wait for their allocation
    (``wharf.execution.resources``); None: no Resource Manager, steps run without requests."""


def run_token_scope(credential: str) -> UUID | None:
    """The run a workspace server's run token is scoped to (its ``run`` claim, read without
    checking the signature: only the server can, and it does on every request); None for any
    other credential (an API key, a login's access token, anything malformed)."""
    parts = credential.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        if not isinstance(claims, dict) or claims.get("typ") != "run":
            return None
        return UUID(str(claims["run"]))
    except (binascii.Error, ValueError, KeyError):
        return None


def run_scoped(services: RunServices, run_id: UUID) -> tuple[RunServices, Store | None]:
    """``services`` for orchestrating run ``run_id``: on a workspace server the orchestrating
    process, like its steps' processes (:func:`for_run`), reaches the store with a token scoped
    to the run, through a store of its own (returned too, for the caller to close once the run
    ended), so a run outlives the credential that started it (a password login's access token
    expires within hours; a run token lasts days). Elsewhere, or in a process that holds the
    run's token already (an orchestrator pod), :func:`for_run`'s answer and None."""
    scoped = for_run(services, run_id)
    token = scoped.child_env.get(API_KEY_ENV)
    if scoped is services or token is None:
        return scoped, None
    from wharf.store.rest import RestStore

    current = services.store
    if isinstance(current, RestStore):  # over the same connections
        store: Store = current.with_credential(token)
    else:
        store = RestStore(current.url, token)
    return dataclasses.replace(scoped, store=store), store


def for_run(services: RunServices, run_id: UUID) -> RunServices:
    """``services`` whose step processes authenticate with a token scoped to ``run_id``, when
    the store issues such tokens (a workspace server): its URL and the token replace any
    credential in ``child_env``. A ``child_env`` whose credential is a token of ``run_id``
    already is kept as it is (an orchestrator pod started with one: a run token may not ask
    for another, so it never outlives the one it was handed). Otherwise ``services``
    unchanged."""
    if holds_run_token(services, run_id):
        return services
    token = services.store.runs.issue_token(run_id)
    if token is None:
        return services
    env = {**services.child_env, SERVER_URL_ENV: services.store.url, API_KEY_ENV: token}
    return dataclasses.replace(services, child_env=env)


def holds_run_token(services: RunServices, run_id: UUID) -> bool:
    """Whether ``services`` reach the store with a token scoped to run ``run_id`` (as
    :func:`run_scoped` makes them on a workspace server), which may not sweep lost runs: the
    server sweeps itself."""
    held = services.child_env.get(API_KEY_ENV)
    return held is not None and run_token_scope(held) == run_id
