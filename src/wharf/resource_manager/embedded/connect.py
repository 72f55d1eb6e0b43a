"""The embedded Resource Manager: in-process, in the workspace's own SQLite (or SQL) database.

``connect_embedded(store_url, account, step_slots)`` opens the RM tables next to the store's
(their migration histories are separate), acts as the local user (an admin of their own
machine), and makes sure the ``local`` pool describes this machine. It is found by import
string (``wharf.config.flavors.RESOURCE_MANAGERS``) so the engine never imports the service.
"""

from __future__ import annotations

from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.embedded.local_pool import ensure_local_pool
from wharf.resource_manager.embedded.machine import detect_machine
from wharf.resource_manager.service.principal import Principal


def connect_embedded(
    store_url: str, account: str, step_slots: int | None = None
) -> InProcessResourceManager:
    client = InProcessResourceManager.open(store_url, Principal(name=account, admin=True))
    machine = detect_machine()
    ensure_local_pool(
        client,
        cpus=machine.cpus,
        memory_bytes=machine.memory_bytes,
        gpus=[gpu.as_dict() for gpu in machine.gpus],
        isolated_step_slots=step_slots or machine.cpus,
        account_subject=account,
    )
    return client
