"""The SQLModel tables (kvreg/db/tables.py, generated from the input declarations) against what the
hand-written migrations build: Alembic's autogenerate comparison on a database migrated to head, on
SQLite and PostgreSQL (conftest's fixtures), must find nothing to change.

What autogenerate compares here: tables, columns, their types (compare_type), nullability and server
defaults, primary and foreign keys, unique constraints and indexes. What it cannot see: CHECK
constraints (Alembic does not compare them at all) and views (not tables; kvreg.figures.views keeps
them). The CHECKs are compared here by hand: by name on both engines, and by their SQL text on SQLite,
which keeps a CHECK as written (PostgreSQL stores it re-parsed, `((x IS NULL) OR (x > 0))`).
"""

from __future__ import annotations

import re

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import CheckConstraint, MetaData, inspect

from kvreg.db.engine import alembic_config, make_engine
from kvreg.db.tables import SQLModel


def _unquoted(default: str | None) -> str | None:
    """A server default as the value it stands for: '', "''", ''::character varying and ('0') alike."""
    if default is None:
        return None
    text = str(default).strip()
    text = re.sub(r"::[a-z ]+$", "", text)  # PostgreSQL: ''::character varying
    text = re.sub(r"^\((.*)\)$", r"\1", text)
    text = re.sub(r"^\"?'(.*)'\"?$", r"\1", text)
    return text


def _compare_server_default(_ctx, _inspected, _metadata_column, inspected_default, _metadata_default,
                            rendered_metadata_default):
    # Alembic's SQLite comparison strips the quotes of a reflected default only when it holds a character, and
    # PostgreSQL's comes back cast (''::character varying), so an empty text default ('' on both sides:
    # model.notes, gpu.vendor) reads as a change to Alembic; compare the values instead.
    return _unquoted(inspected_default) != _unquoted(rendered_metadata_default)


@pytest.fixture
def migrated(empty_db_url):
    engine = make_engine(empty_db_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(empty_db_url, conn), "head")
    yield engine
    engine.dispose()


def test_the_tables_are_what_the_migrations_build(migrated):
    with migrated.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={
            "compare_type": True, "compare_server_default": _compare_server_default})
        drift = compare_metadata(ctx, SQLModel.metadata)
    assert [d if isinstance(d, tuple) else d[0][:4] for d in drift] == []


def _checks_in_db(conn, table: str) -> dict[str, str]:
    return {c["name"]: " ".join(c["sqltext"].split()) for c in inspect(conn).get_check_constraints(table)}


def _checks_declared(table) -> dict[str, str]:
    return {c.name: " ".join(str(c.sqltext).split()) for c in table.constraints if isinstance(c, CheckConstraint)}


def test_the_checks_are_what_the_migrations_build(migrated):
    with migrated.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            in_db, declared = _checks_in_db(conn, table.name), _checks_declared(table)
            assert sorted(in_db) == sorted(declared), table.name
            if conn.dialect.name == "sqlite":
                assert in_db == declared, table.name


def test_the_drift_test_sees_a_changed_column_and_check(migrated, monkeypatch):
    """The comparison can fail: a column made nullable is drift, and so is a CHECK the migrations do not make."""
    gpu = SQLModel.metadata.tables["gpu"]
    monkeypatch.setattr(gpu.c.node_gpus, "nullable", True)
    with migrated.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        drift = compare_metadata(ctx, SQLModel.metadata)
    assert [(d[0][0], d[0][2], d[0][3]) for d in drift] == [("modify_nullable", "gpu", "node_gpus")]
    copy = gpu.to_metadata(MetaData())
    copy.append_constraint(CheckConstraint("node_gpus <= 72", name="ck_gpu_node_gpus_max"))
    with migrated.connect() as conn:
        assert set(_checks_declared(copy)) - set(_checks_in_db(conn, "gpu")) == {"ck_gpu_node_gpus_max"}
