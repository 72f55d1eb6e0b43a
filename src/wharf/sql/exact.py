"""Exact text comparison on every backend: :func:`equals` and :func:`equals_any`.

Invariant: ``equals(column, value)`` is true only when the stored text is ``value`` code point for
code point. SQLite and PostgreSQL compare text that way already; MySQL/MariaDB's ``utf8mb4_bin``
pads with spaces (``'train' = 'train '``), so there the comparison also requires equal lengths in
characters. The plain ``column = value`` comes first, so an index on the column still serves it.
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
