"""Ids and random bytes (:mod:`wharf.core.ids`): fresh at every call, no system call per call,
and a forked child never repeats its parent's stream."""

from __future__ import annotations

import os
import uuid

import pytest

from tests.sql.forking import exit_code_in_fork
from wharf.core.ids import new_id, parse_uuid, random_bytes


def test_new_ids_are_version_4_uuids_and_never_repeat() -> None:
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    assert parse_uuid(str(ids[0])) == ids[0] and parse_uuid("training") is None


def test_random_bytes_sizes() -> None:
    assert [len(random_bytes(n)) for n in (1, 10, 16, 64)] == [1, 10, 16, 64]
    assert random_bytes(16) != random_bytes(16)
    for wrong in (0, 65):
        with pytest.raises(ValueError, match="1 to 64 bytes"):
            random_bytes(wrong)


def test_no_system_call_per_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.urandom`` releases the GIL at every call; ids must not need it."""

    def refuse(size: int) -> bytes:
        raise AssertionError("os.urandom called")

    monkeypatch.setattr(os, "urandom", refuse)
    assert new_id() != new_id()


def test_a_forked_child_draws_from_a_stream_of_its_own() -> None:
    read, write = os.pipe()

    def in_child() -> None:
        os.write(write, b"".join(new_id().bytes for _ in range(100)))

    assert exit_code_in_fork(in_child) == 0
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    child = {data[i : i + 16] for i in range(0, len(data), 16)}
    parent = {new_id().bytes for _ in range(100)}
    assert len(child) == 100 and not child & parent
