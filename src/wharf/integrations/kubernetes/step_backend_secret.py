"""The Secret through which a step backend's Jobs get credentials (never in a Job's manifest).

Owns :class:`StepEnvSecret` and :data:`SECRET_ENV` (the variables whose values are credentials).

Invariants: a value is stored once, under a key that says nothing of it (``WHARF_API_KEY.1``);
Job manifests only ever reference keys.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiException, CoreV1Api

from wharf.config.global_config import API_KEY_ENV

STORE_URL_ENV = "WHARF_STORE_URL"
SECRET_ENV = frozenset({API_KEY_ENV, STORE_URL_ENV})
"""The environment variables whose values are credentials (of step and orchestrator pods)."""
NOT_FOUND = 404
CONFLICT = 409


class StepEnvSecret:
    """One Kubernetes Secret per step backend holding the credentials of its steps'
    environments (``RunServices.child_env``: the run-scoped API token ``WHARF_API_KEY``, a
    store URL with a password ``WHARF_STORE_URL``), giving back the ``secretKeyRef`` for each
    variable. Created on the first submit that needs it, labelled (and owned by the
    orchestrator Job when there is one), extended when a new value appears, deleted by
    :meth:`delete`."""

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
