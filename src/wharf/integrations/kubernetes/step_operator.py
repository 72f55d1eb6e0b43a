"""The ``kubernetes`` step operator: the steps that name it run as Kubernetes Jobs, one per attempt.

Owns :class:`KubernetesStepOperator` and its launch interface
:class:`KubernetesStepOperatorBackend`, which runs each attempt through the
:class:`KubernetesStepBackend` of its run.

Invariants: nothing touches the cluster until a step is submitted (the run loop asks every
stack's step operator for a backend); the artifact store must be one the pods reach (a local one
only with ``mounts_artifact_store``); pods get no paths of the submitting machine
(``SUBMITTER_ONLY_ENV``); a run's step Jobs carry the operator's name and the run's id as labels
and no owner.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from wharf.artifacts.store import ArtifactStore
from wharf.core.errors import InputError
from wharf.execution.backends import AttemptOutcome, StepLaunch
from wharf.integrations.kubernetes.clients import KubeClients, kube_clients
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, label_value
from wharf.integrations.kubernetes.orchestrator import is_local_path
from wharf.integrations.kubernetes.orchestrator_launch import SUBMITTER_ONLY_ENV
from wharf.integrations.kubernetes.settings import KubernetesStepOperatorSettings
from wharf.integrations.kubernetes.step_backend import (
    STARTUP_REPORT_MARGIN_SECONDS,
    KubernetesHandle,
    KubernetesStepBackend,
    job_name_for,
    job_placement,
)
from wharf.integrations.kubernetes.step_settings import layered_for_step
from wharf.step_operators.base import BaseStepOperator
from wharf.store.models import ComponentRecord, StepRunRecord

if TYPE_CHECKING:
    from wharf.config.spec import StepSpec
    from wharf.execution.backends import Allocation

FLAVOR = "kubernetes"
STEP_OPERATOR_KEY = "wharf.io/step-operator"
"""The label naming the step operator whose Job it is."""


class KubernetesStepOperator(BaseStepOperator):
    """Runs the steps that name it (``@step(step_operator="k8s")``), under any orchestrator
    and for static and dynamic pipelines alike, through :meth:`step_backend`.

    Configuration: the component's ``-c`` values, parsed by
    ``KubernetesStepOperatorSettings.from_component``, with a step's (and its pipeline's)
    ``step_operator.kubernetes`` settings layered over them for that step's Job
    (``step_settings``; they may also choose the image, namespace and cluster). A local
    artifact store fails the step with the same rule and words as the orchestrator's
    (``KubernetesOrchestrator.check_artifact_store``).
    """

    flavor = FLAVOR

    def __init__(self, component: ComponentRecord) -> None:
        super().__init__(component)
        try:
            self.settings = KubernetesStepOperatorSettings.from_component(component.configuration)
        except InputError as exc:
            raise InputError(f"Step operator '{component.name}': {exc}") from None

    @classmethod
    def check_configuration(cls, configuration: Mapping[str, Any]) -> None:
        """Refuse at registration what no step could use (as the orchestrator's: the
        kubeconfig and its context are checked when a step needs them)."""
        KubernetesStepOperatorSettings.from_component(configuration)

    @property
    def code_travels(self) -> bool:
        return True

    @property
    def labels(self) -> dict[str, str]:
        """The labels of every Job and pod of this operator."""
        return {STEP_OPERATOR_KEY: label_value(self.component.name)}

    def step_backend(self) -> KubernetesStepOperatorBackend:
        """A new backend (each run gets its own); it reaches the cluster at its first submit."""
        return KubernetesStepOperatorBackend(self)

    def check_artifact_store(
        self, artifact_store: ArtifactStore, settings: KubernetesStepOperatorSettings | None = None
    ) -> None:
        """Refuse an artifact store the pods cannot reach: a local one, unless the component
        (or the step's ``settings``) says the cluster mounts it at the same path
        (``mounts_artifact_store``)."""
        settings = settings or self.settings
        if settings.mounts_artifact_store or not is_local_path(artifact_store.path):
            return
        raise InputError(
            f"Step operator '{self.component.name}' runs steps in Kubernetes pods, which cannot "
            f"read the local artifact store at {artifact_store.path}: use a remote artifact "
            "store (e.g. 'wharf component register remote --type artifact_store --flavor "
            "fsspec -c path=s3://BUCKET/PREFIX'), or register the step operator with "
            "-c mounts_artifact_store=true if every pod mounts that path."
        )

    def image(self, settings: KubernetesStepOperatorSettings | None = None) -> str:
        """The image of step pods (the step's ``settings``' when given)."""
        image = (settings or self.settings).image
        if not image:
            raise InputError(
                f"Step operator '{self.component.name}' has no image: register it with "
                "-c image=REGISTRY/IMAGE:TAG (an image with Wharf and the pipeline's "
                "dependencies installed)."
            )
        return image

    def clients(
        self, settings: KubernetesStepOperatorSettings | None = None, *, for_steps: bool = False
    ) -> KubeClients:
        """Clients for ``settings``' cluster; ``for_steps``: those that start and clean up a
        run's steps, which ride out a short API outage."""
        settings = settings or self.settings
        return kube_clients(
            context=settings.context, kubeconfig=settings.kubeconfig, ride_out_outages=for_steps
        )


ShareKey = tuple[UUID, str | None, str | None, str]
"""A run, and where its Jobs go: (run id, context, kubeconfig, namespace)."""


@dataclass
class _RunShare:
    """What one run's attempts in one namespace of one cluster share there: clients, and a
    backend (watches, Secret)."""

    clients: KubeClients
    backend: KubernetesStepBackend
    in_flight: int = 0

    def close(self) -> None:
        try:
            self.backend.close()
        finally:
            self.clients.close()


class KubernetesStepOperatorBackend:
    """The step operator's launch interface (``wharf.execution.backends.StepBackend``): each
    attempt through the :class:`KubernetesStepBackend` of its run (and of the namespace and
    cluster its settings name: a step's ``step_operator.kubernetes`` settings may choose
    them), opened at the first such submit and closed once none of its attempts is in flight:
    the engine does not close step backends, so the watches and the Secret holding the
    step's credentials live only while one of the run's attempts is in flight (the
    submitting orchestrator is not in the cluster, so the Jobs have no owner)."""

    def __init__(self, operator: KubernetesStepOperator) -> None:
        self.operator = operator
        self.startup_timeout_seconds: float | None = operator.settings.pod_startup_timeout
        """How long a step pod may take to start (``pod_startup_timeout``; engine liveness)."""
        self._lock = threading.Lock()
        self._runs: dict[ShareKey, _RunShare] = {}
        self._handles: dict[KubernetesHandle, ShareKey] = {}

    def submit(self, attempt: StepLaunch, allocation: Allocation | None) -> KubernetesHandle:
        operator = self.operator
        settings = layered_for_step(operator.settings, attempt.spec)  # validated, step's own
        operator.check_artifact_store(attempt.logs, settings)
        image = operator.image(settings)
        environment = {
            key: value
            for key, value in attempt.environment.items()
            if key not in SUBMITTER_ONLY_ENV
        }
        launch = dataclasses.replace(attempt, environment=environment)  # its log's wait kept
        key = (attempt.record.run_id, settings.context, settings.kubeconfig, settings.namespace)
        share = self._reserve(key, image)
        try:
            handle = share.backend.submit(launch, allocation)
        except BaseException:
            self._release(key)
            raise
        with self._lock:
            self._handles[handle] = key
        return handle

    def startup_timeout_for(self, spec: StepSpec) -> float | None:
        """The step's own ``pod_startup_timeout`` (its settings layered) plus the margin in
        which its backend reports a pod that never started (``SlowStartingPerStep``)."""
        try:
            timeout = layered_for_step(self.operator.settings, spec).pod_startup_timeout
        except InputError:  # the submit refuses the settings, naming them
            timeout = self.operator.settings.pod_startup_timeout
        return timeout + STARTUP_REPORT_MARGIN_SECONDS

    def placement(self, spec: StepSpec, record: StepRunRecord) -> str:
        """Where the attempt of ``record`` runs: its Job, in the namespace the step's settings
        choose (``wharf.execution.backends.DescribesPlacement``)."""
        settings = layered_for_step(self.operator.settings, spec)
        name = job_name_for(self.operator.settings, record)  # the share's backend's settings
        return job_placement(name, settings.namespace)

    def poll(
        self, handles: Sequence[KubernetesHandle], timeout: float = 0.0
    ) -> Mapping[KubernetesHandle, AttemptOutcome]:
        by_share: dict[ShareKey, list[KubernetesHandle]] = {}
        with self._lock:
            for handle in handles:
                by_share.setdefault(self._share_of(handle), []).append(handle)
            shares = {key: self._runs[key] for key in by_share}
        if len(shares) == 1:  # one run's attempts (the engine's case): wait on its watches
            ((key, share),) = shares.items()
            return share.backend.poll(by_share[key], timeout)
        done: dict[KubernetesHandle, AttemptOutcome] = {}
        for key, share in shares.items():
            done.update(share.backend.poll(by_share[key], 0.0 if done else timeout))
        return done

    def cancel(self, handle: KubernetesHandle, grace_seconds: float = 0.0) -> None:
        with self._lock:
            key = self._handles.get(handle)
            share = None if key is None else self._runs.get(key)
        if share is not None:
            share.backend.cancel(handle, grace_seconds)

    def cleanup(self, handle: KubernetesHandle) -> None:
        with self._lock:
            key = self._share_of(handle)
            share = self._runs[key]
        try:
            share.backend.cleanup(handle)
        finally:
            with self._lock:
                del self._handles[handle]
            self._release(key)

    def stop_recorded(self, step: StepRunRecord) -> bool:
        """Delete the Jobs of ``step`` (``wharf runs stop --force`` from any process)."""
        operator = self.operator
        clients = operator.clients()
        try:
            backend = KubernetesStepBackend(
                clients, operator.settings, image=operator.settings.image or "", labels={}
            )
            return backend.stop_recorded(step)
        finally:
            clients.close()

    # -- a run's share -------------------------------------------------------------------------

    def _reserve(self, key: ShareKey, image: str) -> _RunShare:
        """The share of ``key`` (opened if none), counting one more attempt in flight. Its
        backend's settings are the component's, in the key's cluster and namespace (each
        step's own settings are layered over them at its submit)."""
        with self._lock:
            share = self._runs.get(key)
            if share is None:
                operator = self.operator
                run_id, context, kubeconfig, namespace = key
                where = {"context": context, "kubeconfig": kubeconfig, "namespace": namespace}
                settings = operator.settings.model_copy(update=where)
                clients = operator.clients(settings, for_steps=True)
                labels = {**operator.labels, RUN_ID_KEY: str(run_id)}
                backend = KubernetesStepBackend(clients, settings, image=image, labels=labels)
                share = self._runs[key] = _RunShare(clients, backend)
            share.in_flight += 1
            return share

    def _release(self, key: ShareKey) -> None:
        """One attempt of ``key`` less in flight; its share closed when none is left."""
        with self._lock:
            share = self._runs[key]
            share.in_flight -= 1
            if share.in_flight > 0:
                return
            del self._runs[key]
        share.close()  # outside the lock: it waits for the watch threads to end

    def _share_of(self, handle: KubernetesHandle) -> ShareKey:
        """Under ``_lock``: the share of a submitted, not yet cleaned up attempt."""
        key = self._handles.get(handle)
        if key is None:
            raise KeyError(f"{handle} was not submitted here or is cleaned up")
        return key
