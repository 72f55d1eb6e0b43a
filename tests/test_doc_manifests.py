"""The Kubernetes objects the docs print (docs/kubernetes.md's RBAC Roles and bindings, and any
other), checked against the upstream OpenAPI schemas as Wharf's own manifests are.

Every fenced ``yaml`` block of ``README.md`` and ``docs/*.md`` is read; each of its documents
that has an ``apiVersion`` and a ``kind`` must be valid for kubernetes-validate's strict schema
(unknown fields are errors) of the oldest Kubernetes Wharf supports and the newest the package
ships. Other YAML (a pool file) is left alone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integrations.kubernetes.manifest_checks import SCHEMA_VERSIONS, schema_errors

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_YAML_BLOCK = re.compile(r"^[ \t]*```ya?ml[ \t]*\n(?P<body>.*?)\n[ \t]*```", re.S | re.M)


def doc_objects() -> dict[str, dict[str, Any]]:
    """Each Kubernetes object of the docs' YAML blocks, by ``file:line kind/name``."""
    objects: dict[str, dict[str, Any]] = {}
    for doc in DOCS:
        text = doc.read_text()
        for match in _YAML_BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            for obj in yaml.safe_load_all(match["body"]):
                if isinstance(obj, dict) and "apiVersion" in obj and "kind" in obj:
                    name = (obj.get("metadata") or {}).get("name")
                    objects[f"{doc.relative_to(ROOT)}:{line} {obj['kind']}/{name}"] = obj
    return objects


OBJECTS = doc_objects()


def test_the_docs_rbac_objects_are_found() -> None:
    kinds = sorted(obj["kind"] for key, obj in OBJECTS.items() if key.startswith("docs/kubernetes"))
    assert kinds == ["Role", "Role", "RoleBinding", "RoleBinding"]


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_every_kubernetes_object_in_the_docs_is_valid(name: str, version: str) -> None:
    assert schema_errors(OBJECTS[name], version) == []
