"""What the object store's tests share: a store on a FakeClock (fixtures ``clock`` and
``store``), pod and Job bodies, and :func:`raises` for the API errors the store answers with."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.kube.emulator.clock import FakeClock
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.store import ObjectStore

START = datetime(2026, 12, 4, 16, 0, 0, tzinfo=UTC)
MERGE = "application/merge-patch+json"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def store(clock: FakeClock) -> ObjectStore:
    return ObjectStore(clock)


def pod_body(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"containers": [{"name": "main", "image": "python:3.11", "command": ["true"]}]},
    }


def job_body(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "python:3.11"}],
                }
            }
        },
    }


def raises(code: int, reason: str, call: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        call(*args, **kwargs)
    assert (info.value.code, info.value.reason) == (code, reason), info.value.message
    return info.value
