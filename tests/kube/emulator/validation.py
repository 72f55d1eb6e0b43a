"""Validation of written objects, as a real kube-apiserver validates them on create and update.

``validate(rtype, obj, old=None)`` runs after defaulting and raises the server's error: a 422
``Invalid`` whose ``details.causes`` list every problem (field, reason, message as apimachinery
words them), or a 400 ``BadRequest`` for a value the server could not even decode (a bad
quantity, non-base64 secret data, a field of the wrong JSON type). This module owns object
which checks run for which kind, and the simple kinds (Secret, ConfigMap); metadata lives in
``validation_meta``, pod specs in ``validation_pods`` and Jobs/CronJobs in ``validation_batch``. Pure: never mutates ``obj``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tests.kube.emulator.field_errors import FieldErrors, decode_error, expect
from tests.kube.emulator.names import config_map_key_errors
from tests.kube.emulator.resources import CONFIGMAPS, CRONJOBS, JOBS, PODS, SECRETS, ResourceType
from tests.kube.emulator.validation_batch import validate_cronjob, validate_job
from tests.kube.emulator.validation_meta import string_map, validate_object_meta
from tests.kube.emulator.validation_pods import validate_pod

MAX_SECRET_SIZE = 1024 * 1024


def validate(
    rtype: ResourceType, obj: dict[str, Any], *, old: dict[str, Any] | None = None
) -> None:
    """Raise the ``ApiError`` a real server answers for ``obj`` (``old``: the stored object)."""
    errs = FieldErrors()
    metadata = expect(rtype, obj.get("metadata"), dict, "ObjectMeta.metadata", "v1.ObjectMeta")
    metadata = metadata or {}
    old_metadata = None if old is None else (old.get("metadata") or {})
    validate_object_meta(errs, rtype, metadata, old_metadata)
    if rtype == PODS:
        validate_pod(errs, rtype, obj, old)
    elif rtype == JOBS:
        validate_job(errs, rtype, obj, old)
    elif rtype == CRONJOBS:
        validate_cronjob(errs, rtype, obj, old)
    elif rtype == SECRETS:
        _validate_secret(errs, rtype, obj, old)
    elif rtype == CONFIGMAPS:
        _validate_config_map(errs, rtype, obj, old)
    errs.raise_if_any(rtype, str(metadata.get("name") or ""))


# ------------------------------------------------------------------------ secrets, configmaps


def _base64_bytes(rtype: ResourceType, value: Any) -> int:
    """The decoded size of a base64 ``[]byte`` field; undecodable data is a 400, as on a server."""
    if not isinstance(value, str):
        raise decode_error(rtype, "illegal base64 data: not a string")
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        position = next(
            (
                i
                for i, ch in enumerate(value)
                if not (ch.isascii() and (ch.isalnum() or ch in "+/="))
            ),
            len(value) - len(value) % 4 if len(value) % 4 else max(len(value) - 1, 0),
        )
        raise decode_error(rtype, f"illegal base64 data at input byte {position}") from None


def _check_immutable_data(
    errs: FieldErrors, obj: dict[str, Any], old: dict[str, Any] | None, fields: tuple[str, ...]
) -> None:
    if old is None or old.get("immutable") is not True:
        return
    if obj.get("immutable") is not True:
        errs.forbidden("immutable", "field is immutable when `immutable` is set")
    for field in fields:
        if (obj.get(field) or {}) != (old.get(field) or {}):
            errs.forbidden(field, "field is immutable when `immutable` is set")


def _validate_secret(
    errs: FieldErrors, rtype: ResourceType, secret: dict[str, Any], old: dict[str, Any] | None
) -> None:
    data = expect(rtype, secret.get("data"), dict, "Secret.data", "map[string][]uint8") or {}
    total = 0
    for key, value in data.items():
        errs.invalid_each(f"data[{key}]", key, config_map_key_errors(key))
        total += _base64_bytes(rtype, value)
    if total > MAX_SECRET_SIZE:
        errs.too_long("data", MAX_SECRET_SIZE)
    secret_type = secret.get("type") or "Opaque"
    required_keys = {
        "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
        "kubernetes.io/dockercfg": (".dockercfg",),
        "kubernetes.io/tls": ("tls.crt", "tls.key"),
        "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    }.get(secret_type, ())
    for key in required_keys:
        if key not in data:
            errs.required(f"data[{key}]")
    if secret_type == "kubernetes.io/service-account-token":
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        if not annotations.get("kubernetes.io/service-account.name"):
            errs.required("metadata.annotations[kubernetes.io/service-account.name]")
    if old is not None:
        errs.immutable("type", secret_type, old.get("type") or "Opaque")
    _check_immutable_data(errs, secret, old, ("data",))


def _validate_config_map(
    errs: FieldErrors, rtype: ResourceType, config_map: dict[str, Any], old: dict[str, Any] | None
) -> None:
    data = string_map(rtype, config_map.get("data"), "ConfigMap.data")
    binary = expect(
        rtype, config_map.get("binaryData"), dict, "ConfigMap.binaryData", "map[string][]uint8"
    )
    binary = binary or {}
    total = 0
    for key, value in data.items():
        errs.invalid_each(f"data[{key}]", key, config_map_key_errors(key))
        if key in binary:
            errs.invalid(f"data[{key}]", key, "duplicate of key present in binaryData")
        total += len((value or "").encode())
    for key, value in binary.items():
        errs.invalid_each(f"binaryData[{key}]", key, config_map_key_errors(key))
        total += _base64_bytes(rtype, value)
    if total > MAX_SECRET_SIZE:
        errs.too_long("", MAX_SECRET_SIZE)
    _check_immutable_data(errs, config_map, old, ("data", "binaryData"))
