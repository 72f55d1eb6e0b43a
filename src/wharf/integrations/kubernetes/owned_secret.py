"""A Secret of credentials owned by the Job that reads it (garbage-collected with the Job).

Owns :func:`own_secret_or_undo` (the run's Secret of an orchestrator Job, a step operator Job's
Secret of its own), :func:`own_secret` (the same reference set without an undo: the orchestrator
pod's own Job taking its run's Secret over), :func:`delete_job` and :func:`delete_secret`,
shared by the orchestrator's submission, its pod and the step backend.

Invariants: a Secret its Job cannot be made to own takes the Job away with it (a Job must not
run whose Secret would outlive it); every API failure is a one-line :class:`WharfError`
(:func:`cluster_call`); a failed clean-up after a failure never hides that failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from kubernetes.client import ApiException

from wharf.core.errors import WharfError
from wharf.integrations.kubernetes.clients import KubeClients, cluster_call
from wharf.integrations.kubernetes.manifests import owner_reference

NOT_FOUND = 404


def own_secret_or_undo(
    clients: KubeClients,
    namespace: str,
    secret: str,
    job: Mapping[str, Any],
    *,
    what: str = "its Secret",
    block_owner_deletion: bool = True,
) -> None:
    """Let ``job`` (as the API returned it at its create, with its uid) own the Secret
    ``secret``; when that fails, delete the Job and the Secret and raise the
    :class:`WharfError` (``what`` names the Secret in it). Without ``block_owner_deletion``
    a foreground delete of the Job does not wait for the Secret, and setting the reference
    needs no ``update`` on ``jobs/finalizers`` (``OwnerReferencesPermissionEnforcement``)."""
    try:
        own_secret(
            clients, namespace, secret, job, what=what, block_owner_deletion=block_owner_deletion
        )
    except WharfError:  # its Job must not run: nothing would collect the Secret
        with suppress(WharfError):
            delete_job(clients, namespace, job["metadata"]["name"])
        delete_secret_quietly(clients, namespace, secret, what=what)
        raise


def own_secret(
    clients: KubeClients,
    namespace: str,
    secret: str,
    job: Mapping[str, Any],
    *,
    what: str = "its Secret",
    block_owner_deletion: bool = True,
) -> None:
    """Make ``job`` (with its uid) the one owner of the Secret ``secret`` (a merge patch: one
    the Job owns already is left as it is); a failure is a one-line :class:`WharfError`."""
    reference = {**owner_reference(job), "blockOwnerDeletion": block_owner_deletion}
    owned = {"metadata": {"ownerReferences": [reference]}}
    with cluster_call(f"let the Job own {what} {namespace}/{secret}"):
        clients.core.patch_namespaced_secret(secret, namespace, owned)


def delete_job(clients: KubeClients, namespace: str, name: str) -> bool:
    """Delete a Job and its pods (background propagation); whether it existed."""
    with cluster_call(f"delete the Job {namespace}/{name}"):
        try:
            clients.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
        except ApiException as exc:
            if exc.status == NOT_FOUND:
                return False
            raise
    return True


def delete_secret(
    clients: KubeClients, namespace: str, name: str, *, what: str = "the Secret"
) -> bool:
    """Delete a Secret; whether it existed."""
    with cluster_call(f"delete {what} {namespace}/{name}"):
        try:
            clients.core.delete_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == NOT_FOUND:
                return False
            raise
    return True


def delete_secret_quietly(
    clients: KubeClients, namespace: str, name: str, *, what: str = "the Secret"
) -> None:
    """Delete a Secret after its Job could not be created or made to own it; a failure here
    (the API just went away) must not hide that error, which is the one the user should see."""
    with suppress(WharfError):
        delete_secret(clients, namespace, name, what=what)
