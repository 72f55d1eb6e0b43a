"""The session of one process with its metadata store: :class:`Workspace` (config, store, user,
project, stack, and the link to its steps' resource requests).

Built at entry points (a pipeline call, ``Client()``, the CLI) and passed down. Invariant:
nothing here is a module-level singleton.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from wharf.config.global_config import SERVER_URL_ENV, WharfConfig, load_config
from wharf.core.enums import ComponentType
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError, WharfError
from wharf.core.url_credentials import mask_credentials
from wharf.execution.known_versions import KnownVersions
from wharf.execution.services import RunServices, open_store, utc_now, wait_unless_woken
from wharf.store.models import (
    ComponentCreate,
    ComponentRecord,
    ProjectRecord,
    StackRecord,
    UserRecord,
)
from wharf.store.ports import Store

if TYPE_CHECKING:
    from wharf.execution.resources.embedded import EmbeddedStepResources
    from wharf.execution.resources.port import StepResources
    from wharf.resource_manager.contract.protocol import RequestsLink, ResourceManagerClient
    from wharf.store.rest import RestStore

DEFAULT_STACK = "default"


def missing_component(stack: str, type: ComponentType) -> str:
    """Why a stack without a component of ``type`` cannot run, and what to do (one line)."""
    if type is ComponentType.ARTIFACT_STORE:
        return (
            f"Stack '{stack}' has no artifact store (a workspace server started without "
            "--artifact-root gives its default stack none): register one every step can reach "
            "and a stack that uses it, e.g. 'wharf component register shared --type "
            "artifact_store --flavor local -c path=/shared/wharf-artifacts', then 'wharf stack "
            "register team -o default -a shared' and 'wharf stack set team'."
        )
    return f"Stack '{stack}' has no {type.value.replace('_', ' ')}."


_PROJECT_HINT = "choose your project with WHARF_PROJECT or `wharf login URL --project NAME`"


def _as_rest(store: Store) -> RestStore | None:
    # Look the class up only if its module is loaded: an embedded workspace never imports
    # the REST store (nor httpx) just to learn that it is not one.
    module = sys.modules.get("wharf.store.rest.store")
    rest_store = getattr(module, "RestStore", None)
    return store if rest_store is not None and isinstance(store, rest_store) else None


def _server_identity(store: RestStore, config: WharfConfig) -> tuple[UserRecord, ProjectRecord]:
    """The user and project over a workspace server: the logged-in user (a service account
    acts for the default user) and ``config.project`` (``WHARF_PROJECT``, ``wharf login
    --project``) else the default project. Nothing is created but the default project, by an
    admin; a project that does not exist or that the caller is not a member of is an
    ``InputError`` saying how to choose one (the server answers both with the same 404)."""
    from wharf.store.defaults import DEFAULT_PROJECT, ensure_default_user
    from wharf.store.rest.session import current_principal

    me = current_principal(store.http)
    if me.get("kind") == "user":
        user = store.users.get(UUID(str(me["id"])))
    else:
        try:
            user = ensure_default_user(store)
        except WharfError as exc:
            raise InputError(
                f"The server at {mask_credentials(store.url)} has no default user for service "
                f"account '{me.get('name')}' to act for, and it may not create one: {exc}"
            ) from exc
    name = config.project or DEFAULT_PROJECT
    try:
        return user, store.projects.get_by_name(name)
    except EntityNotFoundError:
        if config.project is not None or not me.get("is_admin"):
            raise InputError(
                f"Project '{name}' does not exist on the server at "
                f"{mask_credentials(store.url)}, or you ({me.get('name')}) are not a member "
                f"of it: {_PROJECT_HINT}."
            ) from None
    try:  # an admin's first use of a fresh server, as embedded
        return user, store.projects.create(name)
    except EntityExistsError:
        return user, store.projects.get_by_name(name)


def _embedded_identity(store: Store, config: WharfConfig) -> tuple[UserRecord, ProjectRecord]:
    """The default user and ``config.project`` (else the default project) on the embedded
    store, each created on first use like the default ones."""
    from wharf.store.defaults import DEFAULT_PROJECT, ensure_defaults

    user, project = ensure_defaults(store)
    name = config.project
    if name is None or name == DEFAULT_PROJECT:
        return user, project
    try:
        return user, store.projects.get_by_name(name)
    except EntityNotFoundError:
        pass
    try:
        return user, store.projects.create(name)
    except EntityExistsError:
        return user, store.projects.get_by_name(name)


@dataclass
class Workspace:
    """One process's session with its store; build with :meth:`open`.

    The link to its steps' resource requests (the store only stores): embedded, the configured
    Resource Manager's requests client; team, the workspace server's request routes. On first
    use the embedded store gets the default user, project and ``default`` stack (local
    orchestrator + local artifact store under the user data dir).
    """

    config: WharfConfig
    store: Store
    user: UserRecord
    project: ProjectRecord
    clock: Callable[[], datetime] = field(default=utc_now)
    """The engine's clock (cache expiry); tests inject a fake one."""
    sleep: Callable[[float], None] = field(default=time.sleep)
    """How the engine sleeps (backoff through store outages, polls); tests inject a fake one."""
    wait: Callable[[threading.Event, float], None] = field(default=wait_unless_woken)
    """How the engine waits a delay a stop cuts short (retry delays); tests inject a fake one."""
    versions: KnownVersions = field(default_factory=KnownVersions, repr=False)
    """Artifact versions this workspace's runs created or read (saves reading them again)."""
    _rm: EmbeddedStepResources | None = field(default=None, repr=False)
    _resources: StepResources | None = field(default=None, repr=False)
    """The step-resources port of this workspace's runs (embedded: ``_rm``; team: the server's)."""
    _requests: RequestsLink | None = field(default=None, repr=False)
    """The requests link: its steps' requests (embedded: the RM's client; team: the server's
    routes, over the store's HTTP session)."""
    _known: _KnownStacks | None = field(default=None, repr=False)

    @classmethod
    def open(cls, config: WharfConfig | None = None, store: Store | None = None) -> Workspace:
        from wharf.execution.resources.embedded import connect_configured

        config = config or load_config()
        opened = store is None
        store = store or open_store(config)
        resources: StepResources | None = None
        embedded: EmbeddedStepResources | None = None
        requests: RequestsLink | None = None
        try:
            rest = _as_rest(store)
            if rest is not None:
                from wharf.execution.resources.team import TeamStepResources, WorkspaceRequests

                user, project = _server_identity(rest, config)
                requests = WorkspaceRequests(rest.http, project.id)
                resources = TeamStepResources(requests)
            else:
                user, project = _embedded_identity(store, config)
                resources = embedded = connect_configured(store, config, user, user.name)
                requests = None if embedded is None else embedded.requests
        except BaseException:
            if opened:
                store.close()
            raise
        workspace = cls(config, store, user, project)
        workspace._rm = embedded
        workspace._resources = resources
        workspace._requests = requests
        return workspace

    @property
    def server_url(self) -> str | None:
        """The workspace server's URL when the store is reached over REST."""
        rest = _as_rest(self.store)
        return None if rest is None else rest.url

    @property
    def step_resources(self) -> StepResources | None:
        """The step-resources port its runs' steps wait for their allocation through."""
        return self._resources

    @property
    def requests(self) -> RequestsLink | None:
        """Its steps' resource requests (get, list, renew, release); None where no Resource
        Manager is configured (embedded, ``WHARF_RESOURCE_MANAGER=none``)."""
        return self._requests

    def resource_manager(self) -> ResourceManagerClient:
        """The Resource Manager this workspace's steps ask for resources (connected lazily)."""
        if self._rm is None:
            raise InputError(
                "No Resource Manager is configured for this workspace "
                "(WHARF_RESOURCE_MANAGER=none, or a server handles it)."
            )
        return self._rm.requests.resource_manager

    def close(self) -> None:
        if self._rm is not None:
            self._rm.close()
        self.store.close()

    # ------------------------------------------------------------------ stacks

    def _known_stacks(self) -> _KnownStacks:
        known = self._known
        if known is None or known.store is not self.store:  # another store: forget the old one
            known = self._known = _KnownStacks(self.store)
        return known

    def active_stack(self) -> StackRecord:
        """The stack ``config.active_stack`` names (default: ``default``, created on first
        use). Read once per workspace, store and name (see :class:`_KnownStacks`)."""
        name = self.config.active_stack or DEFAULT_STACK
        known = self._known_stacks()
        stack = known.stacks.get(name)
        if stack is not None:
            return stack
        try:
            stack = self.store.stacks.get_stack_by_name(name)
        except EntityNotFoundError:
            if name != DEFAULT_STACK:
                raise EntityNotFoundError(
                    f"The active stack '{name}' does not exist (it may have been deleted): "
                    "choose one with `wharf stack set NAME` (`wharf stack list` lists them), "
                    "or set WHARF_ACTIVE_STACK."
                ) from None
            stack = self.create_default_stack()
        known.stacks[name] = stack
        return stack

    def _component(self, create: ComponentCreate) -> ComponentRecord:
        try:
            return self.store.stacks.create_component(create)
        except EntityExistsError:
            return self.store.stacks.get_component_by_name(create.type, create.name)

    def create_default_stack(self) -> StackRecord:
        """The ``default`` stack: the local orchestrator and an artifact store at this
        machine's artifact root. Over a workspace server the stack is shared, and the server
        makes it from its own settings; one that lacks it gets no artifact store from here
        (never a path of this machine's)."""
        orchestrator = self._component(
            ComponentCreate(name="default", type=ComponentType.ORCHESTRATOR, flavor="local")
        )
        components = {ComponentType.ORCHESTRATOR: orchestrator.id}
        if self.server_url is None:
            artifacts = self._component(
                ComponentCreate(
                    name="default",
                    type=ComponentType.ARTIFACT_STORE,
                    flavor="local",
                    configuration={"path": str(self.config.artifact_root)},
                )
            )
            components[ComponentType.ARTIFACT_STORE] = artifacts.id
        try:
            return self.store.stacks.create_stack(DEFAULT_STACK, components)
        except EntityExistsError:
            return self.store.stacks.get_stack_by_name(DEFAULT_STACK)

    def _warn_of_an_unused_artifact_root(self, artifact_store: Any) -> None:
        """The default stack's artifact store keeps the path it was made with (its artifacts'
        URIs lie under it); an artifact root configured since is not used: say so at each run
        rather than write elsewhere in silence."""
        from wharf.artifacts.store import LocalArtifactStore

        config = self.config
        if (
            self.server_url is not None
            or (config.active_stack or DEFAULT_STACK) != DEFAULT_STACK
            or not isinstance(artifact_store, LocalArtifactStore)
            or os.path.abspath(artifact_store.path) == os.path.abspath(config.artifact_root)
        ):
            return
        wanted = config.artifact_root
        logging.getLogger(__name__).warning(
            "The artifact root %s (WHARF_ARTIFACT_ROOT) is not used: the default stack keeps its "
            "artifacts where it was made, %s. To keep them at %s, register an artifact store "
            "there (wharf component register NAME --type artifact_store --flavor local -c "
            "path=%s) and a stack that uses it.",
            wanted,
            artifact_store.path,
            wanted,
            wanted,
        )

    def run_services(self, artifact_store: Any) -> RunServices:
        """What the engine needs to run steps against this workspace's store; its run's
        progress goes to the ``wharf.progress`` logger (to stderr unless the application
        configured logging, see ``wharf.execution.progress_logging``)."""
        from wharf.artifacts.materializers.registry import default_registry
        from wharf.execution.progress import LogListener, ProgressReporter
        from wharf.execution.progress_logging import configure_logging

        config = self.config
        configure_logging(config.logging_verbosity, config.logging_format)
        self._warn_of_an_unused_artifact_root(artifact_store)
        server_url = self.server_url
        # Over a server the orchestrator adds a run-scoped token (``services.for_run``); the
        # caller's own credential never reaches a step process.
        where = (
            {SERVER_URL_ENV: server_url} if server_url else {"WHARF_STORE_URL": config.store_url}
        )
        return RunServices(
            store=self.store,
            artifact_store=artifact_store,
            materializers=default_registry(),
            project_id=self.project.id,
            user_id=self.user.id,
            clock=self.clock,
            sleep=self.sleep,
            wait=self.wait,
            heartbeat_interval=config.heartbeat_interval,
            child_env={
                "WHARF_HOME": str(config.home),
                **where,
                "WHARF_ARTIFACT_ROOT": str(config.artifact_root),
                "WHARF_HEARTBEAT_INTERVAL": str(config.heartbeat_interval),
                "WHARF_RESOURCE_MANAGER": config.resource_manager,
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and Path(p).is_dir()),
                **({"WHARF_ACTIVE_STACK": config.active_stack} if config.active_stack else {}),
                **({"WHARF_PROJECT": config.project} if config.project else {}),
                **(
                    {"WHARF_LOCAL_STEP_SLOTS": str(config.local_step_slots)}
                    if config.local_step_slots is not None
                    else {}
                ),
            },
            versions=self.versions,
            progress=ProgressReporter([LogListener()]),
            resources=self._resources,
        )

    def component_instance(self, stack: StackRecord, type: ComponentType) -> Any:
        from wharf.execution.components import instantiate_component

        component_id = stack.components.get(type)
        if component_id is None:
            raise InputError(missing_component(stack.name, type))
        known = self._known_stacks()
        record = known.components.get(component_id)
        if record is None:
            record = known.components[component_id] = self.store.stacks.get_component(component_id)
        # A new object per call: components may keep state, and runs must not share it.
        return instantiate_component(record)


@dataclass
class _KnownStacks:
    """Stacks (by name) and components (by id) as this workspace read them from ``store``.

    Safe to keep for the workspace's life because no store changes or deletes a stack or a
    component once created (their repositories have no such call; a stack's name is unique).
    What can change is which stack is active (``config.active_stack``, looked up by name on
    every call) and the store itself (a different store object starts afresh).
    """

    store: Store
    stacks: dict[str, StackRecord] = field(default_factory=dict)
    components: dict[UUID, ComponentRecord] = field(default_factory=dict)
