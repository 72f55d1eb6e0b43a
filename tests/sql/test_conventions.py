"""One naming convention and one set of table options for every schema (:mod:`wharf.sql.conventions`).

The migration tests compare each schema with its migrations on every backend; these check that
both schemas take their names and options from the toolkit, and what those names look like.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, Table, UniqueConstraint
from sqlalchemy.dialects import mysql
from sqlalchemy.schema import CreateIndex, CreateTable

from wharf.resource_manager.service.tables import metadata as rm_metadata
from wharf.sql.conventions import NAMING_CONVENTION, TABLE_OPTIONS, new_metadata
from wharf.store.sql.tables import metadata as store_metadata


def test_constraint_and_index_names_come_from_table_and_column_names() -> None:
    metadata = new_metadata()
    Table("parent", metadata, Column("id", Integer, primary_key=True), **TABLE_OPTIONS)
    child = Table(
        "child",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("parent_id", Integer, ForeignKey("parent.id"), index=True),
        Column("a", Integer),
        Column("b", Integer),
        UniqueConstraint("a", "b"),
        Index(None, "b", "a"),
        **TABLE_OPTIONS,
    )
    ddl = str(CreateTable(child).compile(dialect=mysql.dialect()))
    assert "CONSTRAINT pk_child PRIMARY KEY" in ddl
    assert "CONSTRAINT uq_child_a_b UNIQUE" in ddl
    assert "CONSTRAINT fk_child_parent_id_parent FOREIGN KEY" in ddl
    assert "ENGINE=InnoDB" in ddl
    assert "CHARSET=utf8mb4" in ddl
    assert "COLLATE utf8mb4_bin" in ddl
    indexes = {str(CreateIndex(index).compile(dialect=mysql.dialect())) for index in child.indexes}
    assert any(statement.startswith("CREATE INDEX ix_child_parent_id ") for statement in indexes)
    assert any(statement.startswith("CREATE INDEX ix_child_b_a ") for statement in indexes)


def test_the_store_and_the_resource_manager_share_the_conventions() -> None:
    for metadata in (store_metadata, rm_metadata):
        assert metadata.naming_convention == {**metadata.naming_convention, **NAMING_CONVENTION}
        assert metadata.tables
        for table in metadata.tables.values():
            options = {key: table.kwargs.get(key) for key in TABLE_OPTIONS}
            assert options == TABLE_OPTIONS, table.name
