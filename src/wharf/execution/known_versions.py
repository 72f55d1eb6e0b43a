"""The artifact versions this process knows, so a cached step's outputs are not fetched again.

:class:`KnownVersions` remembers artifact versions this process created, read or was sent (a
cache hit answers the found step's output versions where the store reads them in the same
call: ``steps.find_cached_or_create`` of ``wharf.store.ports``). Only their immutable fields
matter to the engine (id, URI, type, materializer, content hash); ``producer_step_run_id`` of a
remembered record can lag behind a later run deletion.
"""

from __future__ import annotations

import builtins
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable
from uuid import UUID

from wharf.store.models import (
    MAX_PAGE_SIZE,
    ArtifactVersionFilter,
    ArtifactVersionRecord,
    PageRequest,
    StepRunRecord,
)
from wharf.store.ports import Store

KNOWN_VERSIONS_LIMIT = 10_000
"""Most versions one process remembers (least recently used ones are forgotten first)."""


class KnownVersions:
    """Artifact versions by id, as this process created or read them (thread-safe, bounded)."""

    def __init__(self, limit: int = KNOWN_VERSIONS_LIMIT) -> None:
        self._limit = limit
        self._records: OrderedDict[UUID, ArtifactVersionRecord] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def remember(self, records: Iterable[ArtifactVersionRecord]) -> None:
        with self._lock:
            for record in records:
                self._records[record.id] = record
                self._records.move_to_end(record.id)
            while len(self._records) > self._limit:
                self._records.popitem(last=False)

    def _known(self, ids: Iterable[UUID]) -> dict[UUID, ArtifactVersionRecord]:
        with self._lock:
            found = {}
            for version_id in ids:
                record = self._records.get(version_id)
                if record is not None:
                    self._records.move_to_end(version_id)
                    found[version_id] = record
            return found

    def outputs_of(
        self,
        store: Store,
        step: StepRunRecord,
        sent: Collection[ArtifactVersionRecord] = (),
    ) -> dict[str, ArtifactVersionRecord]:
        """The output versions of ``step``: those ``sent`` along with it (by the cache lookup)
        and remembered ones as they are, the others read from the store (all of them in one
        list call when several are missing: a completed step's outputs are the versions it
        produced)."""
        self.remember(sent)
        known = self._known(step.outputs.values())
        known.update({v.id: v for v in sent if v.id in step.outputs.values()})
        missing = {name: v for name, v in step.outputs.items() if v not in known}
        if len(missing) > 1:
            page = store.artifacts.list_versions(
                ArtifactVersionFilter(producer_step_run_id=step.id),
                PageRequest(size=min(MAX_PAGE_SIZE, max(len(missing), PageRequest().size))),
            )
            produced = {v.id: v for v in page.items if v.id in missing.values()}
            known.update(produced)
        fetched: builtins.list[ArtifactVersionRecord] = []
        for version_id in missing.values():
            if version_id not in known:
                known[version_id] = store.artifacts.get_version(version_id)
            fetched.append(known[version_id])
        self.remember(fetched)
        return {name: known[v] for name, v in step.outputs.items()}
