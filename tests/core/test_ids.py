"""Ids (:mod:`wharf.core.ids`): random version 4 UUIDs, parsed back; short id prefixes."""

from __future__ import annotations

import uuid

from wharf.core.ids import id_prefix_bounds, new_id, parse_id_prefix, parse_uuid


def test_new_ids_are_version_4_uuids_and_never_repeat() -> None:
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    assert parse_uuid(str(ids[0])) == ids[0] and parse_uuid("training") is None


def test_an_id_lies_between_the_bounds_of_its_prefix() -> None:
    some = new_id()
    prefix = parse_id_prefix(str(some)[:9])  # the hyphen is ignored
    assert prefix == some.hex[:8]
    low, high = id_prefix_bounds(prefix)
    assert low <= some <= high
    assert parse_id_prefix("abc") is None and parse_id_prefix("wxyz1") is None
