"""Checks of a built manifest: what the test bed's API emulator answers, and what the upstream
Kubernetes OpenAPI schemas say.

``server_accepts(obj)`` creates ``obj`` in a fresh emulator store (defaulting, then the
validation a kube-apiserver runs on create) and returns the stored object; a refusal raises the
server's ``ApiError`` (422 with every cause, or 400). No HTTP, no threads: fast enough for
table-driven unit tests of the pure manifest builders. The emulator validates only what it
implements, so it takes unknown or misspelt fields.

``schema_errors(obj, version)`` checks ``obj`` against kubernetes-validate's *strict* schemas of
one Kubernetes minor version (unknown fields are errors) and returns every error as
``path: message`` (empty: valid). Schemas are read from the package's files once per version
and kind, and the validators kept (the package's own ``validate`` re-reads its 1 MB of
definitions on each call and reports only one error). :data:`SCHEMA_VERSIONS` are the oldest
version Wharf supports (docs/kubernetes.md) and the newest the package ships.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate.utils import all_versions, major_minor, schema_contents
from referencing import Registry, Resource

from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.resources import NAMESPACES, resource_of_kind
from tests.kube.emulator.store import INITIAL_NAMESPACES, ObjectStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OLDEST_SUPPORTED = "1.26"
"""docs/kubernetes.md: "Use Kubernetes 1.26 or newer"."""
SCHEMA_VERSIONS = (OLDEST_SUPPORTED, major_minor(kubernetes_validate.latest_version()))


def server_accepts(obj: dict[str, Any]) -> dict[str, Any]:
    rtype = resource_of_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
    assert rtype is not None, f"not a kind the emulator serves: {obj.get('kind')}"
    store = ObjectStore(FakeClock(T0))
    namespace = (obj.get("metadata") or {}).get("namespace")
    if namespace and namespace not in INITIAL_NAMESPACES:
        store.create(NAMESPACES, None, {"metadata": {"name": namespace}})
    return store.create(rtype, namespace if rtype.namespaced else None, obj)


def schema_errors(obj: dict[str, Any], version: str) -> list[str]:
    """Every error of ``obj`` against the strict schema of its kind in Kubernetes ``version``
    (``"1.26"``), as ``path: message``, in document order; a kind without a schema fails."""
    validator = _validator(version, obj["apiVersion"], obj["kind"])
    errors = sorted(validator.iter_errors(obj), key=lambda error: list(map(str, error.path)))
    return [f"{'.'.join(map(str, error.path)) or '(top)'}: {error.message}" for error in errors]


def _schema_dir(version: str) -> str:
    shipped = [v for v in all_versions() if major_minor(v) == version]
    assert shipped, f"kubernetes-validate ships no schemas of Kubernetes {version}"
    return f"kubernetes-json-schema/v{shipped[-1]}-local-strict"


@cache
def _registry(version: str) -> Registry:
    definitions = schema_contents(f"{_schema_dir(version)}/_definitions.json", version)
    return Resource.from_contents(definitions) @ Registry()


@cache
def _validator(version: str, api_version: str, kind: str) -> jsonschema.protocols.Validator:
    # The package's file naming: rbac.authorization.k8s.io/v1 Role -> role-rbac-v1.json.
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"{_schema_dir(version)}/{kind.lower()}-{group}.json", version)
    registry = Resource.from_contents(schema) @ _registry(version)
    return jsonschema.Draft202012Validator(schema, registry=registry)
