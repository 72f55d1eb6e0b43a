"""The Secrets through which a step backend's Jobs get credentials (never in a Job's manifest).

Owns :class:`StepEnvSecret` (one Secret shared by the Jobs of a backend with an owner: the
Kubernetes orchestrator's, all owned by its Job), the per-Job Secrets of a backend without one
(the step operator's: :func:`job_secret_env`, :func:`create_with_own_secret`) and
:data:`SECRET_ENV` (the variables whose values are credentials).

Invariants: a value is stored once per Secret, under a key that says nothing of it
(``WHARF_API_KEY.1``, or the variable's name in a Job's own Secret); Job manifests only ever
reference keys; a Job's own Secret is named after it and created after it, owned by it from its
create on (garbage-collected with it: by a cleanup, a TTL or ``kubectl delete``; no moment when
a process that dies leaves it owned by nothing), its pod waiting for it meanwhile (as a kubelet
waits for a missing Secret: ``CreateContainerConfigError``, retried, for good); a Secret that
cannot be created takes its Job away. Until its Secret is there, such a Job has an active
deadline of its ``pod_startup_timeout`` (:func:`secret_wait_deadline`), given back to the
Job's own once the Secret is made: a Job whose submitting process died between the two creates
ends (``DeadlineExceeded``) rather than wait for good.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from kubernetes.client import ApiException, CoreV1Api

from wharf.config.global_config import API_KEY_ENV
from wharf.core.errors import InputError, WharfError
from wharf.integrations.kubernetes.clients import KubeClients, cluster_call
from wharf.integrations.kubernetes.labels import STEP_RUN_ID_KEY
from wharf.integrations.kubernetes.manifests import credentials_secret, owner_reference
from wharf.integrations.kubernetes.owned_secret import delete_job

STORE_URL_ENV = "WHARF_STORE_URL"
SECRET_ENV = frozenset({API_KEY_ENV, STORE_URL_ENV})
"""The environment variables whose values are credentials (of step and orchestrator pods)."""
NOT_FOUND = 404
CONFLICT = 409
JOB_SECRET = "the step's Secret"


class StepEnvSecret:
    """One Kubernetes Secret per step backend with an owner holding the credentials of its
    steps' environments (``RunServices.child_env``: the run-scoped API token ``WHARF_API_KEY``,
    a store URL with a password ``WHARF_STORE_URL``), giving back the ``secretKeyRef`` for each
    variable. Created on the first submit that needs it, labelled and owned by the backend's
    owner (the orchestrator Job), extended when a new value appears, deleted by
    :meth:`delete` (or with its owner)."""

    def __init__(
        self,
        core: CoreV1Api,
        namespace: str,
        name: str,
        *,
        labels: Mapping[str, str],
        owner_references: list[dict[str, Any]] | None = None,
    ) -> None:
        self._core = core
        self.namespace = namespace
        self.name = name
        self._labels = dict(labels)
        self._owners = owner_references
        self._lock = threading.Lock()
        self._keys: dict[tuple[str, str], str] = {}  # (variable, value) -> key
        self._created = False

    def split(
        self, environment: Mapping[str, str]
    ) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
        """``environment`` as (plain variables, credential variable -> (secret, key)), the
        Secret holding every credential once this returns."""
        plain = {k: v for k, v in environment.items() if k not in SECRET_ENV}
        wanted = {k: v for k, v in environment.items() if k in SECRET_ENV}
        if not wanted:
            return plain, {}
        with self._lock:
            new: dict[tuple[str, str], str] = {}
            for var, value in wanted.items():
                if (var, value) not in self._keys:
                    new[(var, value)] = f"{var}.{len(self._keys) + len(new) + 1}"
            if new:
                self._store({key: value for (_, value), key in new.items()})
                self._keys.update(new)
            refs = {var: (self.name, self._keys[(var, value)]) for var, value in wanted.items()}
        return plain, refs

    def delete(self) -> None:
        """Delete the Secret (if it was created)."""
        with self._lock:
            if not self._created:
                return
            try:
                self._core.delete_namespaced_secret(self.name, self.namespace)
            except ApiException as exc:
                if exc.status != NOT_FOUND:
                    raise
            self._created = False
            self._keys.clear()

    def _store(self, values: Mapping[str, str]) -> None:
        data = {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}
        if self._created:
            self._core.patch_namespaced_secret(self.name, self.namespace, {"data": data})
            return
        metadata: dict[str, Any] = {"name": self.name, "labels": self._labels}
        if self._owners:
            metadata["ownerReferences"] = self._owners
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": metadata,
            "data": data,
        }
        create: Any = self._core.create_namespaced_secret  # a plain dict as the body
        try:
            create(self.namespace, body)
        except ApiException as exc:
            if exc.status != CONFLICT:
                raise
            self._core.patch_namespaced_secret(self.name, self.namespace, {"data": data})
        self._created = True


def job_secret_env(
    job_name: str, environment: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, tuple[str, str]], dict[str, str]]:
    """``environment`` of a Job with a Secret of its own (named ``job_name``, as the Job): its
    plain variables, credential variable -> (secret, key) and the Secret's key -> value (each
    variable under its own name; empty: the Job needs no Secret)."""
    plain = {k: v for k, v in environment.items() if k not in SECRET_ENV}
    values = {k: v for k, v in environment.items() if k in SECRET_ENV}
    return plain, {var: (job_name, var) for var in values}, values


def secret_wait_deadline(startup_timeout: float, own_deadline: int | None) -> int | None:
    """The ``activeDeadlineSeconds`` a Job with a Secret of its own is created with, so that it
    ends should its Secret never come (its submitting process died between the two creates):
    ``startup_timeout`` (``pod_startup_timeout``, whole seconds, at least one), within which a
    pod without its credential could never report anyway. None: the Job's own deadline
    (``own_deadline``) is as short, it bounds the wait already."""
    bound = max(1, math.ceil(startup_timeout))
    return None if own_deadline is not None and own_deadline <= bound else bound


def create_with_own_secret(
    clients: KubeClients,
    namespace: str,
    name: str,
    values: Mapping[str, str],
    labels: Mapping[str, str],
    create_job: Callable[[], Mapping[str, Any]],
    *,
    awaiting_deadline: bool = False,
    own_deadline: int | None = None,
) -> None:
    """Create the Job (``create_job``: creates or adopts it, and gives it back as the API has
    it, uid included), then the Secret ``name`` holding ``values``, owned by the Job from its
    create on (one there already gets them and the Job as its owner if it is of an earlier
    submit of the same step run, by its label; else an :class:`InputError`). The Job's pod
    waits for its Secret meanwhile; ``awaiting_deadline``: the Job was made with a deadline
    bounding that wait (:func:`secret_wait_deadline`), replaced by ``own_deadline`` (None:
    none) once the Secret is there. A Secret that cannot be created or given to the Job, or a
    deadline that cannot be given back, takes the Job away (a :class:`WharfError`)."""
    job = create_job()
    # Not blocking the Job's deletion: no jobs/finalizers right needed (the step operator's).
    reference = {**owner_reference(job), "blockOwnerDeletion": False}
    body = credentials_secret(
        name=name, namespace=namespace, data=values, labels=labels, base64_data=True
    )
    body["metadata"]["ownerReferences"] = [reference]
    create: Any = clients.core.create_namespaced_secret  # a plain dict as the body
    try:
        with cluster_call(f"create {JOB_SECRET} {namespace}/{name}"):
            try:
                create(namespace, body)
            except ApiException as exc:
                if exc.status != CONFLICT:
                    raise
                _check_same_step_run(clients, namespace, name, labels)
                update = {"metadata": {"ownerReferences": [reference]}, "data": body["data"]}
                clients.core.patch_namespaced_secret(name, namespace, update)
        if awaiting_deadline:
            own = {"spec": {"activeDeadlineSeconds": own_deadline}}  # None: removed
            with cluster_call(f"give the Job {namespace}/{name} its own active deadline back"):
                clients.batch.patch_namespaced_job(name, namespace, own)
    except BaseException:  # its pod would wait for it, or be cut short at the wait's deadline
        with suppress(WharfError):
            delete_job(clients, namespace, str(job["metadata"]["name"]))
        raise


def _check_same_step_run(
    clients: KubeClients, namespace: str, name: str, labels: Mapping[str, str]
) -> None:
    """The Secret ``name`` exists already: refused unless it is of the same step run (an
    earlier submit of it), whose Job's Secret it is."""
    read: Any = clients.core.read_namespaced_secret
    existing = json.loads(read(name, namespace, _preload_content=False).data)
    theirs = (existing["metadata"].get("labels") or {}).get(STEP_RUN_ID_KEY)
    if theirs != labels.get(STEP_RUN_ID_KEY):
        raise InputError(
            f"A Secret named {name} already exists in namespace {namespace} for another step "
            f"run ({theirs}); delete it or set job_name_prefix."
        )
