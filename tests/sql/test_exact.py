"""sql.exact: the comparison renders as a plain ``=`` on SQLite and PostgreSQL (so their plans
and indexes are those of ``column = value``) and adds a length check, grouped, on MySQL/MariaDB."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from wharf.sql import exact

_T = sa.Table("t", sa.MetaData(), sa.Column("name", sa.String(255)), sa.Column("n", sa.Integer))


def _where(condition: sa.ColumnElement[bool], dialect: sa.Dialect) -> str:
    stmt = sa.select(_T.c.n).where(_T.c.n == 1, condition)
    return str(stmt.compile(dialect=dialect)).split("WHERE ", 1)[1]


def test_plain_equality_where_text_compares_exactly() -> None:
    assert _where(exact.equals(_T.c.name, "a"), sqlite.dialect()) == "t.n = ? AND t.name = ?"
    assert _where(exact.equals(_T.c.name, "a"), postgresql.dialect()) == (
        "t.n = %(n_1)s::INTEGER AND t.name = %(param_1)s::VARCHAR"
    )


def test_length_checked_and_grouped_on_mysql() -> None:
    assert _where(~exact.equals(_T.c.name, "a"), mysql.dialect()) == (
        "t.n = %s AND NOT (t.name = %s AND char_length(t.name) = char_length(%s))"
    )
    assert _where(exact.equals_any(_T.c.name, ["a", "b"]), mysql.dialect()) == (
        "t.n = %s AND ((t.name = %s AND char_length(t.name) = char_length(%s)) "
        "OR (t.name = %s AND char_length(t.name) = char_length(%s)))"
    )


def test_sort_keys_name_the_c_collation_on_postgresql_only() -> None:
    stmt = sa.select(_T.c.n).order_by(exact.in_code_point_order(_T.c.name).desc())
    assert str(stmt.compile(dialect=postgresql.dialect())).endswith(
        'ORDER BY t.name COLLATE "C" DESC'
    )
    for dialect in (sqlite.dialect(), mysql.dialect()):
        assert str(stmt.compile(dialect=dialect)).endswith("ORDER BY t.name DESC")
