"""Contract: user, project, component, stack and service-account names follow one rule on every
database.

Names are stored in NFC; edge whitespace and control or invisible characters are refused; two
names are the same only if they are the same code points (``dup`` and ``dup `` can never both
exist, on MariaDB whose collation pads with spaces either).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

import pytest

from wharf.core.enums import ComponentType
from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.store.models import ComponentCreate
from wharf.store.sql import SqlStore
from wharf.store.sql.server_stores import SqlAccountStore

DECOMPOSED = unicodedata.normalize("NFD", "café")  # "cafe" + U+0301
assert DECOMPOSED != "café"


def _component(store: SqlStore, name: str) -> Any:
    return store.stacks.create_component(
        ComponentCreate(name=name, type=ComponentType.ORCHESTRATOR, flavor="local")
    )


# (create(store, name) -> record, get_by_name(store, name) -> record)
KINDS: dict[str, tuple[Callable[[SqlStore, str], Any], Callable[[SqlStore, str], Any]]] = {
    "user": (lambda s, n: s.users.create(n), lambda s, n: s.users.get_by_name(n)),
    "project": (lambda s, n: s.projects.create(n), lambda s, n: s.projects.get_by_name(n)),
    "component": (
        _component,
        lambda s, n: s.stacks.get_component_by_name(ComponentType.ORCHESTRATOR, n),
    ),
    "stack": (
        lambda s, n: s.stacks.create_stack(n, {}),
        lambda s, n: s.stacks.get_stack_by_name(n),
    ),
    "service account": (
        lambda s, n: SqlAccountStore(s._db).service_accounts.create(n),
        lambda s, n: SqlAccountStore(s._db).service_accounts.get_by_name(n),
    ),
}

REFUSED = [
    "dup ",
    " dup",
    "dup\t",
    "du\np",
    "du\x00p",
    "du\x7fp",
    "du\u200bp",  # zero-width space (Cf)
    "du\u200dp",  # zero-width joiner (Cf)
    "du\u202ep",  # right-to-left override (Cf)
    "du\ufeffp",  # byte order mark (Cf)
    "du\u00a0p",  # no-break space (Zs)
    "du\u3000p",  # ideographic space (Zs)
    "du\u2028p",  # line separator (Zl)
    "du\u2029p",  # paragraph separator (Zp)
    "du\ue000p",  # private use (Co)
    "du\U000e0001p",  # language tag (Cf)
]


@pytest.mark.parametrize("kind", KINDS)
def test_names_are_stored_in_nfc_and_found_by_any_equivalent_spelling(
    backend: SqlStore, kind: str
) -> None:
    create, get = KINDS[kind]
    record = create(backend, DECOMPOSED)
    assert record.name == "café"
    assert get(backend, "café") == record
    assert get(backend, DECOMPOSED) == record
    with pytest.raises(EntityExistsError):
        create(backend, "café")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", REFUSED, ids=repr)
def test_unsafe_names_are_refused(backend: SqlStore, kind: str, name: str) -> None:
    create, get = KINDS[kind]
    with pytest.raises(InputError, match=f"{kind} name"):
        create(backend, name)
    with pytest.raises(EntityNotFoundError):
        get(backend, name)


@pytest.mark.parametrize("kind", KINDS)
def test_uniqueness_is_exact_on_every_backend(backend: SqlStore, kind: str) -> None:
    create, get = KINDS[kind]
    dup = create(backend, "dup")
    with pytest.raises(InputError):
        create(backend, "dup ")  # equal to "dup" under MariaDB's padding collation: refused
    with pytest.raises(EntityNotFoundError):
        get(backend, "dup ")  # and not found as "dup" there either
    upper = create(backend, "DUP")  # names are case-sensitive everywhere
    assert upper.id != dup.id and get(backend, "DUP") == upper and get(backend, "dup") == dup
    inner = create(backend, "d u p")  # inner plain spaces are fine
    assert get(backend, "d u p") == inner


@pytest.mark.parametrize("name", ["ünïcödé", "名前", "with space", "a.b-c_d/e", "😀"])
def test_ordinary_names_are_kept(backend: SqlStore, name: str) -> None:
    for create, get in KINDS.values():
        assert create(backend, name).name == name
        assert get(backend, name).name == name
