"""Adding and dropping columns with their CHECK constraints, in place, for Alembic revisions.

Columns are added and dropped with ALTER TABLE ... ADD/DROP COLUMN, each CHECK constraint on its
column, not with Alembic's batch mode: on SQLite batch mode copies a table into a new one and drops
the old, and with foreign keys enforced dropping `plan` cascades into `demand` (every demand row
would vanish) and dropping a referenced `dtype` or `model` fails. SQLite adds columns with CHECK
constraints and drops them (since 3.35) in place; PostgreSQL takes named constraints.

A revision lists its columns as {table: [(column, [(check name, condition), ...]), ...]}; the
condition texts stay in the revision, so a revision is what it was when written.
"""
from __future__ import annotations

import sqlalchemy as sa

Checks = list[tuple[str, str]]
Columns = dict[str, list[tuple[sa.Column, Checks]]]


def add_columns(op, columns: Columns) -> None:
    """Add each column with its CHECK constraints, in order."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table, table_columns in columns.items():
        for column, checks in table_columns:
            if sqlite:
                op.execute(_sqlite_add_column(op, table, column, checks))
                continue
            op.add_column(table, column)
            for name, cond in checks:
                op.create_check_constraint(name, table, cond)


def drop_columns(op, columns: Columns) -> None:
    """Drop what add_columns added, in reverse order (the data in those columns goes with them)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table, table_columns in reversed(list(columns.items())):
        for column, checks in reversed(table_columns):
            if sqlite:  # the column's own CHECK constraints go with it
                op.execute(f'ALTER TABLE "{table}" DROP COLUMN {column.name}')
                continue
            for name, _cond in checks:
                op.drop_constraint(name, table, type_="check")
            op.drop_column(table, column.name)


def _sqlite_add_column(op, table: str, column: sa.Column, checks: Checks) -> str:
    dialect = op.get_bind().dialect
    parts = [f'ALTER TABLE "{table}" ADD COLUMN {column.name} {column.type.compile(dialect=dialect)}']
    if column.server_default is not None:
        parts.append(f"DEFAULT '{column.server_default.arg}'")
    if not column.nullable:
        parts.append("NOT NULL")
    parts += [f"CONSTRAINT {name} CHECK ({cond})" for name, cond in checks]
    return " ".join(parts)
