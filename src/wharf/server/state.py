"""Everything a request handler needs (:class:`ServerState`), built once per app by the factory or
its lifespan, held on ``app.state.wharf`` and reached through ``wharf.server.deps``.

Invariants: it owns no global state (two apps in one process have two of these); the step routes
write step runs through ``step_runs`` (the step-resource service,
:mod:`wharf.server.step_resources`), so they are resource-aware whenever a state serves
requests, while ``store`` itself only stores.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from wharf.core.login_throttle import LoginThrottle
from wharf.server.auth.cache import AuthCache
from wharf.server.auth.passwords import Passwords
from wharf.server.scopes import Scopes
from wharf.server.settings import ServerSettings
from wharf.store.account_ports import AccountStore
from wharf.store.lost_runs import ReleaseEnded
from wharf.store.ports import StepRunRepository, Store

if TYPE_CHECKING:
    from wharf.server.resource_manager import ServerRequests
    from wharf.server.step_resources import StepResourceService


@dataclass
class ServerState:
    settings: ServerSettings
    store: Store
    accounts: AccountStore
    passwords: Passwords = field(default_factory=Passwords)
    clock: Callable[[], float] = time.time
    """Seconds since the epoch: the clock of token issue and expiry (tests inject a fake)."""
    scopes: Scopes = field(init=False)
    auth_cache: AuthCache = field(init=False)
    login_throttle: LoginThrottle = field(init=False)
    """Failed password logins of this process, per account and per address."""
    key_touches: dict[UUID, float] = field(default_factory=dict)
    """API key id -> when this process last wrote its ``last_used`` (monotonic seconds)."""
    resource_requests: ServerRequests | None = None
    """The server's link to the Resource Manager (or its absence); set by
    ``wharf.server.resource_manager.pair`` (``build_state`` always pairs)."""
    step_runs: StepRunRepository | StepResourceService = field(init=False)
    """The step runs as the step routes write them (``store.steps`` until paired)."""
    release_ended: ReleaseEnded | None = None
    """Told of the steps a lost-run sweep ended: releases their requests (set when paired)."""

    def __post_init__(self) -> None:
        self.scopes = Scopes(self.store)
        self.step_runs = self.store.steps
        self.auth_cache = AuthCache(self.settings.auth_cache_seconds)
        self.login_throttle = LoginThrottle(self.settings.login_limits)

    @property
    def secret(self) -> bytes:
        return self.settings.secret_key.get_secret_value().encode()
