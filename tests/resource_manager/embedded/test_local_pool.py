"""The embedded ``local`` pool and machine detection."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.contract.models import PoolUpdate, ResourceRequestCreate
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.embedded.local_pool import ensure_local_pool, gpu_class_name
from wharf.resource_manager.embedded.machine import (
    detect_machine,
    memory_bytes,
    nvidia_gpus,
    parse_nvidia_smi,
)

GIB = 1024**3
GPUS = [
    {"index": 0, "model": "NVIDIA A100-SXM4-40GB", "memory_bytes": 40 * GIB},
    {"index": 1, "model": "NVIDIA A100-SXM4-40GB", "memory_bytes": 40 * GIB},
    {"index": 2, "model": "Tesla T4", "memory_bytes": 16 * GIB},
]


def _request(user: str, demands: list[dict[str, object]]) -> ResourceRequestCreate:
    return ResourceRequestCreate.model_validate(
        {
            "subjects": [
                {
                    "nodes": [
                        {"subject_type": "project", "subject_id": "default"},
                        {"subject_type": "step_run", "subject_id": "s"},
                    ]
                },
                {"nodes": [{"subject_type": "account", "subject_id": user}]},
            ],
            "demands": demands,
            "lease_seconds": 60,
        }
    )


def test_ensure_local_pool_describes_the_machine(client: InProcessResourceManager) -> None:
    pool = ensure_local_pool(
        client,
        cpus=8,
        memory_bytes=32 * GIB,
        gpus=GPUS,
        isolated_step_slots=4,
        account_subject="local-user",
    )
    assert pool.name == "local" and pool.concurrency_limit == 4
    classes = {c.name: c for c in pool.classes}
    assert classes["default"].capacity == {"CPU": 8000, "memory": 32 * GIB}
    assert classes["gpu-nvidia-a100-sxm4-40gb"].capacity == {"GPU": 2}
    assert classes["gpu-tesla-t4"].attributes == {"model": "Tesla T4", "memory_bytes": 16 * GIB}
    policy = client.policies.get("local-default")
    assert policy.pool_id == pool.id

    step = client.requests.create(
        _request(
            "local-user",
            [
                {"resource": "GPU", "quantity": 2},
                {"kind": "cpu", "quantity": 4, "unit": "CPU"},
                {"kind": "memory", "quantity": 8, "unit": "GiB"},
            ],
        )
    )
    assert step.status is S.ALLOCATED
    stranger = client.requests.create(
        _request("someone-else", [{"resource": "GPU", "quantity": 1}])
    )
    assert stranger.status is S.REJECTED


def test_ensure_local_pool_is_idempotent_and_follows_the_machine(
    client: InProcessResourceManager,
) -> None:
    first = ensure_local_pool(
        client, cpus=4, memory_bytes=8 * GIB, gpus=[], isolated_step_slots=2, account_subject="u"
    )
    again = ensure_local_pool(
        client, cpus=4, memory_bytes=8 * GIB, gpus=[], isolated_step_slots=2, account_subject="u"
    )
    assert again == first
    grown = ensure_local_pool(
        client,
        cpus=16,
        memory_bytes=8 * GIB,
        gpus=GPUS[:1],
        isolated_step_slots=2,
        account_subject="v",
    )
    assert grown.id == first.id
    assert grown.classes[0].capacity["CPU"] == 16000
    assert [c.name for c in grown.classes] == ["default", "gpu-nvidia-a100-sxm4-40gb"]
    assert client.policies.get("local-default").subject_selector.subject_id == "v"
    assert len(client.policies.list()) == 1


def test_gpu_class_names() -> None:
    assert gpu_class_name("NVIDIA GeForce RTX 4090") == "gpu-nvidia-geforce-rtx-4090"
    assert gpu_class_name("???") == "gpu-unknown"


def test_parse_nvidia_smi() -> None:
    output = "0, NVIDIA A100-SXM4-40GB, 40960\n1, Tesla T4, [N/A]\ngarbage\n"
    gpus = parse_nvidia_smi(output)
    assert [(g.index, g.model, g.memory_bytes) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-40GB", 40960 * 1024 * 1024),
        (1, "Tesla T4", None),
    ]


def test_detection_never_fails(tmp_path: Path) -> None:
    def broken(_command: Sequence[str]) -> str:
        raise OSError("no driver")

    assert nvidia_gpus(broken) == []
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384 kB\nMemFree: 1 kB\n")
    assert memory_bytes(meminfo) == 16384 * 1024
    assert memory_bytes(tmp_path / "missing") > 0  # falls back to sysconf
    machine = detect_machine(run=lambda _c: "0, Tesla T4, 15360\n", meminfo=meminfo)
    assert machine.cpus >= 1 and machine.memory_bytes == 16384 * 1024
    assert [g.as_dict()["model"] for g in machine.gpus] == ["Tesla T4"]


def test_an_administrators_edit_stays_until_the_machine_changes(
    client: InProcessResourceManager,
) -> None:
    figures: dict[str, Any] = {
        "cpus": 4,
        "memory_bytes": 8 * GIB,
        "gpus": [],
        "isolated_step_slots": 2,
        "account_subject": "u",
    }
    ensure_local_pool(client, **figures)
    edited = client.pools.update(
        "local", PoolUpdate(concurrency_limit=6, attributes={"local": True, "team": "ml"})
    )
    assert edited.attributes.get("machine") is None  # the edit replaced the attributes
    again = ensure_local_pool(client, **figures)  # figures unchanged, but no digest: remade
    assert again.concurrency_limit == 2 and again.attributes["team"] == "ml"
    edited = client.pools.update("local", PoolUpdate(concurrency_limit=6))
    assert ensure_local_pool(client, **figures) == edited  # the edit stays
    grown = ensure_local_pool(client, **{**figures, "cpus": 8})
    assert grown.concurrency_limit == 2 and grown.classes[0].capacity["CPU"] == 8000
