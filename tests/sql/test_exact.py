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
