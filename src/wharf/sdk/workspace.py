"""The session of one process with its metadata store: config, store, user, project, stack.

Built at entry points (a pipeline call, ``Client()``, the CLI) and passed down; nothing here is
a module-level singleton. On first use the embedded default creates the default user, project
and ``default`` stack (local orchestrator + local artifact store under the user data dir).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wharf.config.global_config import WharfConfig, load_config
from wharf.core.enums import ComponentType
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.execution.services import RunServices, utc_now
from wharf.store.models import (
    ComponentCreate,
    ComponentRecord,
    ProjectRecord,
    StackRecord,
    UserRecord,
)
from wharf.store.ports import Store

if TYPE_CHECKING:
    from wharf.resource_manager.client.protocol import ResourceManagerClient
    from wharf.store.resource_aware import ResourceManagerHandle

DEFAULT_STACK = "default"


def open_store(config: WharfConfig) -> Store:
    """The workspace server's store over REST when a server URL is configured (``wharf login``
    or ``WHARF_SERVER_URL``), else the embedded SQL store at ``config.store_url``."""
    if config.server_url:
        from wharf.store.rest import RestStore

        return RestStore(config.server_url, config.api_key)
    from wharf.store.sql.store import SqlStore

    return SqlStore.open(config.store_url)


@dataclass
class Workspace:
    config: WharfConfig
    store: Store
    user: UserRecord
    project: ProjectRecord
    clock: Callable[[], datetime] = field(default=utc_now)
    """The engine's clock (cache expiry); tests inject a fake one."""
    sleep: Callable[[float], None] = field(default=time.sleep)
    """How the engine waits (retry delays); tests inject a fake one."""
    _rm: ResourceManagerHandle | None = field(default=None, repr=False)

    @classmethod
    def open(cls, config: WharfConfig | None = None, store: Store | None = None) -> Workspace:
        from wharf.store.defaults import ensure_defaults
        from wharf.store.resource_aware import pair_with_configured_resource_manager

        config = config or load_config()
        store = store or open_store(config)
        user, project = ensure_defaults(store)
        handle = pair_with_configured_resource_manager(store, config, user, user.name)
        workspace = cls(config, store, user, project)
        workspace._rm = handle
        return workspace

    def resource_manager(self) -> ResourceManagerClient:
        """The Resource Manager this workspace's steps ask for resources (connected lazily)."""
        if self._rm is None:
            raise InputError(
                "No Resource Manager is configured for this workspace "
                "(WHARF_RESOURCE_MANAGER=none, or a server handles it)."
            )
        return self._rm.client

    def close(self) -> None:
        if self._rm is not None:
            self._rm.close()
        self.store.close()

    # ------------------------------------------------------------------ stacks

    def active_stack(self) -> StackRecord:
        name = self.config.active_stack or DEFAULT_STACK
        try:
            return self.store.stacks.get_stack_by_name(name)
        except EntityNotFoundError:
            if name != DEFAULT_STACK:
                raise
        return self.create_default_stack()

    def _component(self, create: ComponentCreate) -> ComponentRecord:
        try:
            return self.store.stacks.create_component(create)
        except EntityExistsError:
            return self.store.stacks.get_component_by_name(create.type, create.name)

    def create_default_stack(self) -> StackRecord:
        orchestrator = self._component(
            ComponentCreate(name="default", type=ComponentType.ORCHESTRATOR, flavor="local")
        )
        artifacts = self._component(
            ComponentCreate(
                name="default",
                type=ComponentType.ARTIFACT_STORE,
                flavor="local",
                configuration={"path": str(self.config.artifact_root)},
            )
        )
        try:
            return self.store.stacks.create_stack(
                DEFAULT_STACK,
                {
                    ComponentType.ORCHESTRATOR: orchestrator.id,
                    ComponentType.ARTIFACT_STORE: artifacts.id,
                },
            )
        except EntityExistsError:
            return self.store.stacks.get_stack_by_name(DEFAULT_STACK)

    def run_services(self, artifact_store: Any) -> RunServices:
        """What the engine needs to run steps against this workspace's store."""
        from wharf.artifacts.materializers.registry import default_registry

        config = self.config
        return RunServices(
            store=self.store,
            artifact_store=artifact_store,
            materializers=default_registry(),
            project_id=self.project.id,
            user_id=self.user.id,
            clock=self.clock,
            sleep=self.sleep,
            heartbeat_interval=config.heartbeat_interval,
            child_env={
                "WHARF_HOME": str(config.home),
                "WHARF_STORE_URL": config.store_url,
                "WHARF_ARTIFACT_ROOT": str(config.artifact_root),
                "WHARF_HEARTBEAT_INTERVAL": str(config.heartbeat_interval),
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and Path(p).is_dir()),
                **({"WHARF_ACTIVE_STACK": config.active_stack} if config.active_stack else {}),
            },
        )

    def component_instance(self, stack: StackRecord, type: ComponentType) -> Any:
        from wharf.execution.components import instantiate_component

        return instantiate_component(self.store.stacks.get_component(stack.components[type]))
