"""Validation of object metadata, as a real kube-apiserver validates it on every write.

Names per kind (DNS-1123 subdomain by default, a DNS-1123 label for namespaces), ``generateName``
prefixes, namespaces, label keys and values, annotation keys and their total size (256 KiB),
finalizer names, ``ownerReferences``; on update, the immutable name/namespace/uid/creationTimestamp
and no new finalizers once the object is being deleted. Also the label and annotation checks the
pod templates of jobs and cronjobs reuse. Problems are added to a ``FieldErrors``; wrong JSON
types raise a decode 400 at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.kube.emulator.field_errors import FieldErrors, expect
from tests.kube.emulator.names import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)
from tests.kube.emulator.resources import NAMESPACES, ResourceType

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})

_NAME_RULES: dict[ResourceType, Callable[[str], list[str]]] = {NAMESPACES: dns1123_label_errors}


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in "-": validate it as the name it will become."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def validate_object_meta(
    errs: FieldErrors,
    rtype: ResourceType,
    metadata: dict[str, Any],
    old_metadata: dict[str, Any] | None,
) -> None:
    name_rule = _NAME_RULES.get(rtype, dns1123_subdomain_errors)
    name = metadata.get("name") or ""
    generate_name = metadata.get("generateName") or ""
    expect(rtype, name, str, "ObjectMeta.metadata.name", "string")
    expect(rtype, generate_name, str, "ObjectMeta.metadata.generateName", "string")
    if generate_name:
        errs.invalid_each(
            "metadata.generateName", generate_name, name_rule(_mask_trailing_dash(generate_name))
        )
    if not name:
        errs.required("metadata.name", "name or generateName is required")
    else:
        errs.invalid_each("metadata.name", name, name_rule(name))
    namespace = metadata.get("namespace") or ""
    if rtype.namespaced:
        if not namespace:
            errs.required("metadata.namespace")
        else:
            errs.invalid_each("metadata.namespace", namespace, dns1123_label_errors(namespace))
    elif namespace:
        errs.forbidden("metadata.namespace", "not allowed on this type")
    validate_labels(errs, rtype, metadata.get("labels"), "metadata.labels")
    validate_annotations(errs, rtype, metadata.get("annotations"), "metadata.annotations")
    _validate_owner_references(errs, rtype, metadata.get("ownerReferences"))
    _validate_finalizers(errs, rtype, metadata.get("finalizers"))
    if old_metadata is not None:
        for field in ("name", "namespace", "uid", "creationTimestamp"):
            errs.immutable(f"metadata.{field}", metadata.get(field), old_metadata.get(field))
        if old_metadata.get("deletionTimestamp"):
            added = sorted(
                set(metadata.get("finalizers") or []) - set(old_metadata.get("finalizers") or [])
            )
            if added:
                shown = ", ".join(f'"{f}"' for f in added)
                errs.forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted, found new "
                    f"finalizers []string{{{shown}}}",
                )


def string_map(rtype: ResourceType, value: Any, path: str) -> dict[str, str]:
    mapping = expect(rtype, value, dict, path, "map[string]string") or {}
    for item in mapping.values():
        expect(rtype, item, str, path, "string")
    return mapping


def validate_labels(errs: FieldErrors, rtype: ResourceType, labels: Any, path: str) -> None:
    for key, value in string_map(rtype, labels, path).items():
        errs.invalid_each(path, key, qualified_name_errors(key))
        errs.invalid_each(path, value or "", label_value_errors(value or ""))


def validate_annotations(
    errs: FieldErrors, rtype: ResourceType, annotations: Any, path: str
) -> None:
    mapping = string_map(rtype, annotations, path)
    for key in mapping:
        errs.invalid_each(path, key, qualified_name_errors(key.lower()))
    size = sum(len(k) + len(v or "") for k, v in mapping.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT)


def _validate_owner_references(errs: FieldErrors, rtype: ResourceType, refs: Any) -> None:
    path = "metadata.ownerReferences"
    controllers: list[str] = []
    for item in expect(rtype, refs, list, f"ObjectMeta.{path}", "[]v1.OwnerReference") or []:
        ref = expect(rtype, item, dict, f"ObjectMeta.{path}", "v1.OwnerReference") or {}
        api_version = str(ref.get("apiVersion") or "")
        if not api_version.rsplit("/", 1)[-1]:
            errs.invalid(f"{path}.apiVersion", api_version, "version must not be empty")
        if not ref.get("kind"):
            errs.invalid(f"{path}.kind", ref.get("kind") or "", "kind must not be empty")
        if not ref.get("name"):
            errs.invalid(f"{path}.name", ref.get("name") or "", "name must not be empty")
        if not ref.get("uid"):
            errs.invalid(f"{path}.uid", ref.get("uid") or "", "uid must not be empty")
        if ref.get("controller") is True:
            controllers.append(str(ref.get("name") or ""))
    if len(controllers) > 1:
        errs.invalid(
            path,
            refs,
            'Only one reference can have Controller set to true. Found "true" in references for '
            + " and ".join(controllers),
        )


def _validate_finalizers(errs: FieldErrors, rtype: ResourceType, finalizers: Any) -> None:
    path = "metadata.finalizers"
    for i, finalizer in enumerate(expect(rtype, finalizers, list, path, "[]string") or []):
        expect(rtype, finalizer, str, path, "string")
        errs.invalid_each(path, finalizer, qualified_name_errors(finalizer))
        if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
            errs.invalid(
                f"{path}[{i}]",
                finalizer,
                "name is neither a standard finalizer name nor is it fully qualified",
            )
