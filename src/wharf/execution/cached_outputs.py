"""Whether the outputs of a cache hit are still in the artifact store.

Owns :func:`gone_outputs` (and :func:`outputs_exist`, its artifact-store half): a cached step
run one of whose output files was deleted from the artifact store is no hit (its next consumer
could not load it), so the cache decisions (:mod:`wharf.execution.cache_decisions`) run the
step instead. Invariants: only existence is
checked, never contents, by the artifact store (not the metadata store): one existence check
per output, several at once, or, for many outputs in one directory (a run's outputs share one),
one listing of that directory for all of them; an output the artifact store cannot tell about
(an I/O error) counts as there: a hit is given up only for a file known to be gone. A run's
decisions share their listings (:class:`Listings`): a name listed once is taken as there for the
rest of the run (files deleted while the run decides its steps may go unseen), a name missing
from a listing has its directory listed again.
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from wharf.artifacts.store import ArtifactStore
from wharf.execution.services import RunServices
from wharf.store.answers import CachedOrCreated

logger = logging.getLogger(__name__)

CHECKS_AT_ONCE = 16
"""Most existence checks in flight together (each a request on a remote artifact store)."""
LIST_FROM = 16
"""Outputs in one directory from which one listing of it replaces their existence checks."""


class Listings:
    """The directory listings taken for one run's cache decisions (by directory URI)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, frozenset[str]] = {}

    def get(self, directory: str) -> frozenset[str] | None:
        with self._lock:
            return self._names.get(directory)

    def put(self, directory: str, names: frozenset[str]) -> None:
        with self._lock:
            self._names[directory] = names


def gone_outputs(
    services: RunServices, hits: Sequence[CachedOrCreated], listings: Listings | None = None
) -> list[str | None]:
    """For each hit, in order, the URI of an output of the cached step run that is gone from
    the artifact store, or None if every output is there. The outputs' versions are those the
    lookup sent along (the others are read, as publishing the hit would)."""
    uris_of_hits = [
        [
            version.uri
            for version in services.versions.outputs_of(
                services.store, hit.step, hit.outputs.values()
            ).values()
        ]
        for hit in hits
    ]
    wanted = list(dict.fromkeys(uri for uris in uris_of_hits for uri in uris))
    found = outputs_exist(services.artifact_store, wanted, listings)
    there = dict(zip(wanted, found, strict=True))
    return [next((uri for uri in uris if not there[uri]), None) for uris in uris_of_hits]


def outputs_exist(
    store: ArtifactStore, uris: list[str], listings: Listings | None = None
) -> list[bool]:
    """Whether each of ``uris`` (distinct) is in ``store``; ``listings``: those taken before
    (and kept for the next call)."""
    listings = Listings() if listings is None else listings
    by_directory: dict[str, list[str]] = {}
    for uri in uris:
        by_directory.setdefault(posixpath.dirname(uri), []).append(uri)
    there: dict[str, bool] = {}
    alone: list[str] = []
    for directory, inside in by_directory.items():
        listed = listings.get(directory) or frozenset()
        unknown = [uri for uri in inside if posixpath.basename(uri) not in listed]
        there.update({uri: True for uri in inside if posixpath.basename(uri) in listed})
        names = _names_in(store, directory) if len(unknown) >= LIST_FROM else None
        if names is None:
            alone.extend(unknown)
        else:
            listings.put(directory, names)
            there.update({uri: posixpath.basename(uri) in names for uri in unknown})
    if len(alone) == 1:
        there[alone[0]] = _exists(store, alone[0])
    elif alone:
        with ThreadPoolExecutor(min(CHECKS_AT_ONCE, len(alone)), "wharf-cache-check") as pool:
            there.update(zip(alone, pool.map(lambda uri: _exists(store, uri), alone), strict=True))
    return [there[uri] for uri in uris]


def _names_in(store: ArtifactStore, directory: str) -> frozenset[str] | None:
    """The names in ``directory`` (none if it is gone), or None if the store cannot list it."""
    try:
        return frozenset(store.listdir(directory))
    except FileNotFoundError:
        return frozenset()
    except Exception as exc:  # each output checked alone instead
        logger.debug("Could not list %s: %s", directory, exc)
        return None


def _exists(store: ArtifactStore, uri: str) -> bool:
    try:
        return store.exists(uri)
    except Exception as exc:  # unknown: keep the hit (a load would tell what is wrong)
        logger.debug("Could not check that cached output %s exists: %s", uri, exc)
        return True
