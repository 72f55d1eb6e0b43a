"""Whether a step Job that exists already may be adopted rather than created.

Owns :func:`check_adoptable`: the step backend's create of an attempt's Job met a Job of the
same name (409), and only a Job of this very step run (started by an earlier process of the run,
e.g. a restarted orchestrator pod) is taken over.

Invariants: a Job is adopted only when its step run id label is the attempt's; any other Job of
that name is never touched, and the attempt fails with a one-line :class:`InputError` saying how
to get past it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from kubernetes.client import BatchV1Api

from wharf.core.errors import InputError
from wharf.integrations.kubernetes.labels import STEP_RUN_ID_KEY
from wharf.store.models import StepRunRecord

logger = logging.getLogger(__name__)


def check_adoptable(
    batch: BatchV1Api, namespace: str, name: str, record: StepRunRecord
) -> dict[str, Any]:
    """The Job ``name`` exists already in ``namespace``: adopted (given back, as the API has
    it) when it runs this very step run ``record``; InputError when it runs another."""
    read: Any = batch.read_namespaced_job
    response: Any = read(name, namespace, _preload_content=False)
    job: dict[str, Any] = json.loads(response.data)
    labels = job["metadata"].get("labels") or {}
    if labels.get(STEP_RUN_ID_KEY) != str(record.id):
        raise InputError(
            f"A Job named {name} already exists in namespace {namespace} for another "
            f"step run ({labels.get(STEP_RUN_ID_KEY)}); delete it or set job_name_prefix."
        )
    logger.info("Step run %s already has its Job %s: adopting it", record.id, name)
    return job
