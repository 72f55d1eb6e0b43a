"""Why a step Job has no pod: the ``FailedCreate`` Warnings the Job controller records on it.

Owns :class:`CreateRefusals`: one watch of the namespace's ``FailedCreate`` Events about Jobs
(a field selector: Events carry no labels), grouped by the Job's name. A pod the API refuses (a
service account that does not exist, a pod spec an admission webhook or policy refuses, a
LimitRange) never exists, so neither the pod watch nor the Job's status ever tells; the Job
controller only says it in these Events, and retries for good.

Invariants: an Event counts only for the Job of its uid (not an earlier Job of the same name);
a refusal for exceeded quota is not one (it passes once quota frees up, and the step's startup
timeout bounds the wait); a watch the API refuses (no ``list``/``watch`` on events) is no
error: it stops, saying so once, and an attempt whose pod is refused waits for its startup
timeout as it did without it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from kubernetes.client import CoreV1Api

from wharf.integrations.kubernetes.pod_watch import ObjectWatch

logger = logging.getLogger(__name__)

FAILED_CREATE = "FailedCreate"
FIELD_SELECTOR = f"reason={FAILED_CREATE},involvedObject.kind=Job"
TRANSIENT = ("exceeded quota",)
"""Words of a refusal that passes by itself (a ResourceQuota's)."""


def involved_job(event: Mapping[str, Any]) -> str | None:
    """The name of the Job an Event is about."""
    name = (event.get("involvedObject") or {}).get("name")
    return None if name is None else str(name)


class CreateRefusals:
    """The ``FailedCreate`` Events of the Jobs in ``namespace``, as one watch (its changes wake
    ``condition`` and tell ``on_change`` the Job's name, as the pod and Job watches do)."""

    def __init__(
        self,
        core: CoreV1Api,
        namespace: str,
        *,
        condition: threading.Condition,
        on_change: Callable[[str | None], None],
    ) -> None:
        list_events = partial(core.list_namespaced_event, field_selector=FIELD_SELECTOR)
        self._on_change = on_change
        self.watch = ObjectWatch(
            list_events,
            namespace,
            "",
            involved_job,
            condition=condition,
            on_change=self._changed,
            what="FailedCreate events",
        )

    def _changed(self, job_name: str | None) -> None:
        """Under the condition: pass the change on; a refused watch stops (it will not heal
        by itself, and retrying it would only repeat the refusal in the log)."""
        refused = self.watch.refused
        if refused is not None and not self.watch.closed:
            logger.warning(
                "Not watching the FailedCreate events of step Jobs in namespace %s (%s): a "
                "step whose pod the API refuses waits for its startup timeout. Grant list and "
                "watch on events to fail it at once.",
                self.watch.namespace,
                refused,
            )
            self.watch.close()
        self._on_change(job_name)

    def refusal(self, job: Mapping[str, Any] | None) -> str | None:
        """Why the API refuses ``job``'s pod (the latest Event's message), if it does and will
        not stop by itself; None otherwise."""
        if job is None:
            return None
        metadata = job.get("metadata") or {}
        uid = metadata.get("uid")
        for event in reversed(self.watch.objects(str(metadata.get("name")))):
            if (event.get("involvedObject") or {}).get("uid") != uid:
                continue
            message = str(event.get("message") or FAILED_CREATE)
            if not any(word in message for word in TRANSIENT):
                return message
        return None
