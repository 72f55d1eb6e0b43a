"""What a real API server answers to a built manifest, through the test bed's emulator store.

``server_accepts(obj)`` creates ``obj`` in a fresh emulator store (defaulting, then the
validation a kube-apiserver runs on create) and returns the stored object; a refusal raises the
server's ``ApiError`` (422 with every cause, or 400). No HTTP, no threads: fast enough for
table-driven unit tests of the pure manifest builders.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.resources import NAMESPACES, resource_of_kind
from tests.kube.emulator.store import INITIAL_NAMESPACES, ObjectStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def server_accepts(obj: dict[str, Any]) -> dict[str, Any]:
    rtype = resource_of_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
    assert rtype is not None, f"not a kind the emulator serves: {obj.get('kind')}"
    store = ObjectStore(FakeClock(T0))
    namespace = (obj.get("metadata") or {}).get("namespace")
    if namespace and namespace not in INITIAL_NAMESPACES:
        store.create(NAMESPACES, None, {"metadata": {"name": namespace}})
    return store.create(rtype, namespace if rtype.namespaced else None, obj)
