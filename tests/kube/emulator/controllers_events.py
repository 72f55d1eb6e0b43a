"""Events (core/v1) the emulator's controllers record, shaped as a real controller's recorder.

``EventRecorder.record(obj, rtype, type, reason, message)`` creates one ``Event`` in the object's
namespace: ``involvedObject`` names it (kind, namespace, name, uid, apiVersion,
resourceVersion), ``source.component``/``reportingComponent`` the controller, ``count`` 1,
``firstTimestamp``/``lastTimestamp`` from the clock, and the name ``<object>.<hex nanoseconds>``
as client-go's recorder builds it (made unique with a counter under a FakeClock). Only state
transitions are recorded (each happens once), so nothing is re-recorded on every tick; a failed
write (e.g. the namespace is terminating) is dropped, as a real recorder drops it.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

from tests.kube.emulator.clock import rfc3339
from tests.kube.emulator.controllers_common import log, meta, uid_of
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import EVENTS, ResourceType

if TYPE_CHECKING:
    from tests.kube.emulator.clock import Clock
    from tests.kube.emulator.store import ObjectStore

NORMAL = "Normal"
WARNING = "Warning"


class EventRecorder:
    """Creates Events for one controller component (e.g. ``job-controller``)."""

    def __init__(self, store: ObjectStore, clock: Clock, component: str) -> None:
        self._store = store
        self._clock = clock
        self._component = component
        self._sequence = itertools.count()
        self._lock = threading.Lock()

    def record(
        self, obj: dict[str, Any], rtype: ResourceType, event_type: str, reason: str, message: str
    ) -> None:
        namespace = meta(obj).get("namespace") or "default"
        now = self._clock.now()
        with self._lock:
            nanos = int(now.timestamp()) * 1_000_000_000 + next(self._sequence)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta(obj)['name']}.{nanos:x}", "namespace": namespace},
            "involvedObject": {
                "kind": rtype.kind,
                "namespace": meta(obj).get("namespace"),
                "name": meta(obj)["name"],
                "uid": uid_of(obj),
                "apiVersion": rtype.api_version,
                "resourceVersion": str(meta(obj).get("resourceVersion", "")),
            },
            "reason": reason,
            "message": message,
            "source": {"component": self._component},
            "firstTimestamp": rfc3339(now),
            "lastTimestamp": rfc3339(now),
            "count": 1,
            "type": event_type,
            "eventTime": None,
            "reportingComponent": self._component,
            "reportingInstance": "",
        }
        try:
            self._store.create(EVENTS, namespace, body, internal=True)
        except ApiError as err:
            log.debug("event %s for %s dropped: %s", reason, meta(obj).get("name"), err)
