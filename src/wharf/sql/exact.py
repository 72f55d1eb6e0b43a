"""Exact text comparison and ordering on every backend: :func:`equals`, :func:`equals_any` and
:func:`in_code_point_order`.

Invariant: ``equals(column, value)`` is true only when the stored text is ``value`` code point for
code point. SQLite and PostgreSQL compare text that way already; MySQL/MariaDB's ``utf8mb4_bin``
pads with spaces (``'train' = 'train '``), so there the comparison also requires equal lengths in
characters. The plain ``column = value`` comes first, so an index on the column still serves it.
Text sorts by code point everywhere: SQLite's ``BINARY`` and ``utf8mb4_bin`` do, while PostgreSQL
sorts by its database's collation (``'alpha'`` before ``'Zeta'`` under ``en_US``), so there the
sort names the ``"C"`` collation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import BindParameter, Boolean, ColumnElement, and_, false, func, literal, or_
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class _Equals(FunctionElement[bool]):
    """``column = value``, exact on every backend (compiled per dialect below)."""

    type = Boolean()
    name = "wharf_exact_equals"
    _is_implicitly_boolean = True  # a comparison: no "= 1" where booleans are not native
    inherit_cache = True


@compiles(_Equals)
def _compile_plain(element: _Equals, compiler: SQLCompiler, **kw: Any) -> str:
    column, value = element.clauses
    return compiler.process(column == value, **kw)


@compiles(_Equals, "mysql")
@compiles(_Equals, "mariadb")
def _compile_padded(element: _Equals, compiler: SQLCompiler, **kw: Any) -> str:
    column, value = element.clauses
    same_length = func.char_length(column) == func.char_length(value)
    return compiler.process(and_(column == value, same_length).self_group(), **kw)


def equals(column: ColumnElement[Any], value: str | BindParameter[Any]) -> ColumnElement[bool]:
    """Rows whose ``column`` holds exactly ``value``, a string or a named bind parameter
    (trailing spaces count on every backend)."""
    bound = value if isinstance(value, BindParameter) else literal(value, column.type)
    return _Equals(column, bound)


def equals_any(column: ColumnElement[Any], values: Iterable[str]) -> ColumnElement[bool]:
    """Rows whose ``column`` holds exactly one of ``values`` (none: no row)."""
    conditions = [equals(column, value) for value in dict.fromkeys(values)]
    return or_(*conditions) if conditions else false()


class _CodePointOrder(FunctionElement[Any]):
    """``column`` as a sort key in code point order (compiled per dialect below)."""

    name = "wharf_code_point_order"
    inherit_cache = True


@compiles(_CodePointOrder)
def _compile_sort_key(element: _CodePointOrder, compiler: SQLCompiler, **kw: Any) -> str:
    (column,) = element.clauses
    return compiler.process(column, **kw)


@compiles(_CodePointOrder, "postgresql")
def _compile_sort_key_c(element: _CodePointOrder, compiler: SQLCompiler, **kw: Any) -> str:
    (column,) = element.clauses
    return compiler.process(column.collate("C"), **kw)


def in_code_point_order(column: ColumnElement[str]) -> ColumnElement[Any]:
    """``column`` for ``ORDER BY``: sorted by code point on every backend (``'Zeta'`` before
    ``'alpha'``), whatever a PostgreSQL database's collation."""
    return _CodePointOrder(column)
