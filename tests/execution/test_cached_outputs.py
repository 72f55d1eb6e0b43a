"""Which outputs of cache hits are still in the artifact store (a real local artifact store):
many in one directory are answered by one listing of it, the others one by one; a directory
that is gone has none of its outputs."""

from __future__ import annotations

from pathlib import Path

from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.cached_outputs import LIST_FROM, Listings, outputs_exist


def written(store: LocalArtifactStore, *parts: str) -> str:
    uri = store.new_uri(*parts)
    with store.open(uri, "wb") as file:
        file.write(b"x")
    return uri


def test_outputs_gone_from_the_store_are_told_apart_from_those_there(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    crowded = [written(store, "p", "run-a") for _ in range(LIST_FROM + 4)]  # one listing
    lonely = [written(store, "p", "run-b") for _ in range(3)]  # one check each
    directory = [store.new_uri("p", "run-c")]  # an output that is a directory of files
    written(store, directory[0].removeprefix(store.path).strip("/"), "data")
    gone_dir = [written(store, "p", "run-d") for _ in range(LIST_FROM)]
    for uri in crowded[::5] + lonely[1:2]:
        store.rmtree(uri)
    store.rmtree(store.path + "/p/run-d")
    uris = crowded + lonely + directory + gone_dir

    there = dict(zip(uris, outputs_exist(store, uris), strict=True))

    gone = set(crowded[::5] + lonely[1:2] + gone_dir)
    assert {uri for uri, found in there.items() if not found} == gone


def test_a_listing_is_reused_and_taken_again_for_names_it_lacks(tmp_path: Path) -> None:
    """A run's decisions share their listings: names listed once are not checked again; a
    name a listing lacks (written since) gets the directory listed again."""
    store = LocalArtifactStore(tmp_path / "artifacts")
    listings = Listings()
    first = [written(store, "p", "run") for _ in range(LIST_FROM)]
    assert outputs_exist(store, first, listings) == [True] * LIST_FROM
    later = [written(store, "p", "run") for _ in range(LIST_FROM)]
    store.rmtree(first[0])  # gone after the listing: taken as there for the rest of the run
    assert outputs_exist(store, first + later, listings) == [True] * (2 * LIST_FROM)
    assert outputs_exist(store, [first[0]]) == [False]  # a fresh look sees it gone
