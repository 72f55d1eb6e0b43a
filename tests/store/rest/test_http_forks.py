"""A forked child of a process whose REST store is open (a multiprocessing pool forked by an
inline step) sends its requests on connections of its own, never on the parent's keep-alive
sockets (:mod:`wharf.store.rest.http`).

Real forks (``tests.sql.forking``) of the test process, a real uvicorn server over TCP.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.live import LiveServer, admin_key, open_state
from tests.sql.forking import exit_code_in_fork
from wharf.store.rest import RestStore

READS = 300
"""Reads by the child while its parent reads too: on a shared socket some got the other's
answer."""


@pytest.fixture
def key_and_store(
    live_server: LiveServer, tmp_path: Path, _sqlite_template: Path
) -> Iterator[tuple[str, RestStore]]:
    path = tmp_path / "server.db"
    shutil.copyfile(_sqlite_template, path)
    state, stores = open_state(f"sqlite:///{path}")
    live_server.use(state)
    key = admin_key(state)
    store = RestStore(live_server.url, key)
    try:
        yield key, store
    finally:
        store.close()
        stores.close()


def test_a_forked_child_and_its_parent_read_at_once_each_on_its_own_connections(
    key_and_store: tuple[str, RestStore],
) -> None:
    """On one socket the two processes read each other's responses: the parent got the
    child's project for its own, or "illegal status line", "Server disconnected without
    sending a response", and the child timed out. A copy with another credential made before
    the fork (a run's token) shares the session's connections, in the child its new ones."""
    key, store = key_and_store
    store.projects.create("parents")
    store.projects.create("childs")
    as_run = store.with_credential(key)
    stop = threading.Event()
    failures: list[BaseException] = []
    # The parent reads only once the child runs: at the fork its one connection sits idle in
    # the pool (where both processes would take it), and no thread holds the pool's lock.
    child_started, started = os.pipe()

    def parent_reads() -> None:
        try:
            os.read(child_started, 1)
            while not stop.is_set():
                assert store.projects.get_by_name("parents").name == "parents"
        except BaseException as exc:
            failures.append(exc)

    def in_child() -> None:
        os.write(started, b"!")
        for each in (store, as_run):
            for _ in range(READS // 2):
                assert each.projects.get_by_name("childs").name == "childs"
        as_run.close()  # leaves the connections to the store that owns them
        assert store.projects.get_by_name("childs").name == "childs"

    reader = threading.Thread(target=parent_reads)
    reader.start()
    try:
        child = exit_code_in_fork(in_child)
    finally:
        stop.set()
        os.close(started)  # the reader's read returns if the child never wrote
        reader.join()
        os.close(child_started)
    assert (child, failures) == (0, [])
    assert as_run.projects.get_by_name("parents").name == "parents"
