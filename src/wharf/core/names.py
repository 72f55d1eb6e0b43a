"""What a stored name may be, and how two names compare: one rule on every database.

Owns :func:`normalize_name`, :func:`lookup_form` and :data:`MAX_NAME_LENGTH`.

The rule:

- a name is kept in Unicode NFC form (canonically equivalent spellings are one name);
- it has 1 to 255 characters, and neither starts nor ends with whitespace;
- it holds no control or invisible characters: Unicode categories Cc, Cf, Cs, Co and Cn, line and
  paragraph separators (Zl, Zp), and space separators other than the plain space U+0020 (no-break
  and zero-width spaces included);
- names compare case-sensitively and code point by code point.

Why this makes uniqueness the same everywhere: SQLite and PostgreSQL compare the stored strings
exactly; MySQL/MariaDB tables use the binary collation ``utf8mb4_bin``, which compares code
points too but pads with spaces (``'dup'`` equals ``'dup '``). A name never ends with whitespace,
so that difference can never arise, and NFC makes equivalent spellings identical bytes.

Pure: no I/O; errors are :class:`~wharf.core.errors.InputError`.
"""

from __future__ import annotations

import unicodedata

from wharf.core.errors import InputError

MAX_NAME_LENGTH = 255

_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _refused(char: str) -> bool:
    category = unicodedata.category(char)
    return category in _REFUSED_CATEGORIES or (category == "Zs" and char != " ")


def normalize_name(value: str, what: str) -> str:
    """``value`` in NFC form, or InputError naming ``what`` ("user", "project"...) if the
    result breaks the rule in the module docstring."""
    name = unicodedata.normalize("NFC", value)
    if not name or len(name) > MAX_NAME_LENGTH:
        raise InputError(
            f"A {what} name must have 1 to {MAX_NAME_LENGTH} characters, got {value[:300]!r}."
        )
    if name != name.strip():
        raise InputError(f"A {what} name must not start or end with whitespace: {name!r}.")
    bad = next((char for char in name if _refused(char)), None)
    if bad is not None:
        raise InputError(
            f"A {what} name must not contain control or invisible characters "
            f"(found U+{ord(bad):04X}): {name!r}."
        )
    return name


def lookup_form(value: str) -> str | None:
    """The form ``value`` would be stored in, or None if no stored name can equal it (so a
    lookup answers "not found" alike on every database)."""
    try:
        return normalize_name(value, "")
    except InputError:
        return None
