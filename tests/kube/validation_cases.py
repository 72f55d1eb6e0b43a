"""Objects and assertions shared by the kube emulator's validation tests.

``pod()``, ``job()``, ``cronjob()`` build minimal valid objects (keyword arguments go into
``spec``); ``with_meta`` returns a copy with metadata fields set; ``causes``/``fields`` run
``validate`` expecting a 422 and return its causes (and check the object was not mutated).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import ResourceType
from tests.kube.emulator.validation import validate


def pod(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }
    return body


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"controller-uid": "u"}},
            "template": {
                "metadata": {"labels": {"controller-uid": "u", "job-name": "j"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                },
            },
            **spec,
        },
    }


def cronjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [{"name": "main", "image": "busybox:1.36"}],
                        }
                    }
                }
            },
            **spec,
        },
    }


def with_meta(obj: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].update(metadata)
    return obj


def causes(
    rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    """(reason, field, message) of every cause; asserts a 422 Invalid and never mutates obj."""
    before = copy.deepcopy(obj)
    with pytest.raises(ApiError) as info:
        validate(rtype, obj, old=old)
    assert obj == before
    error = info.value
    assert (error.code, error.reason) == (422, "Invalid"), error
    assert error.details is not None
    assert error.details["kind"] == rtype.kind
    return [(c["reason"], c["field"], c["message"]) for c in error.details["causes"]]


def fields(
    rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> set[tuple[str, str]]:
    return {(reason, field) for reason, field, _ in causes(rtype, obj, old)}
