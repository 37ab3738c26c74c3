"""kvreg on PostgreSQL: the same views give the same numbers as on SQLite, and `kvreg db copy`
moves a registry between the two and proves the copy.

The `db_url`/`kv` tests run on both engines (conftest); the rest need a PostgreSQL server
(KVREG_TEST_PG_URL) and skip without one, or fail under CI=true.
"""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import text

from kvreg.app.access import open_registry
from kvreg.db.engine import make_engine

GIB = 2**30
VIEWS = {"model_kv": "model_id, kv_dtype", "capacity": "id", "plan_capacity": "plan_id",
         "plan_quarter": "plan_id, quarter", "procurement": "gpu, quarter"}


# --------------------------------------------------------------------------- same numbers


def test_llama_8b_on_h100_gives_the_spec_concurrency(kv):
    row = kv.json("capacity", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "128K")[0]
    per_sequence_gib = 2 * 32 * 8 * 128 * 2 * 131072 / GIB  # K and V x 32 layers x 8 KV heads x 128 x bf16 x 128K = 16
    weights_gib = 8.05e9 * 2 / GIB  # 8.05e9 bf16 parameters = 14.994 GiB
    pool_gib = 80 * (1 - 0.12) - weights_gib  # 80 GiB less the 12% reserve, less weights = 55.406 GiB
    assert row["kv_gib_per_sequence_per_gpu"] == 16.0 == per_sequence_gib
    assert row["max_concurrency"] == pytest.approx(pool_gib / per_sequence_gib, rel=1e-12)  # 3.4628566592931...
    assert row["max_concurrency"] == pytest.approx(3.4628566592931, abs=1e-12)


def test_procurement_counts_are_integers(engine):
    # PostgreSQL sums BIGINT into NUMERIC (a Python Decimal, which JSON cannot print); the view casts back.
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT gpu, quarter, users, gpus_needed, nodes_needed FROM procurement")).all()
    assert rows, "the catalog's example plans have demand"
    for r in rows:
        assert all(v is None or type(v) is int for v in (r.users, r.gpus_needed, r.nodes_needed)), r


def test_postgres_view_sql_uses_no_sqlite_only_spelling():
    from kvreg.figures.views import figure_sql, view_definitions

    reason = figure_sql("reason", "postgresql")
    assert "TO_CHAR" in reason and "FM999999999999990.00'" in reason  # fmt(x, 2): two decimals
    for name, sql in view_definitions("postgresql"):
        assert "printf" not in sql and " % " not in sql, name  # SQLite's printf and modulo
        assert " REAL" not in sql, name  # single precision on PostgreSQL


def _fill_scenarios(conn) -> int:
    """Every model x GPU x three KV dtypes x TP 1, 2, 3, 8 (3 never divides the heads, so some rows
    are invalid, some do not fit, and the reasons are formatted numbers)."""
    models = conn.execute(text("SELECT id, weight_dtype FROM model ORDER BY id")).all()
    gpus = conn.execute(text("SELECT id FROM gpu ORDER BY id")).scalars().all()
    kv_dtypes = conn.execute(text("SELECT name FROM dtype WHERE kind IN ('kv', 'both') ORDER BY name")).scalars().all()
    rows, n = [], 0
    for m, weight_dtype in models:
        for g in gpus:
            for kvd in kv_dtypes[:3]:
                for tp in (1, 2, 3, 8):
                    n += 1
                    rows.append(dict(id=n, m=m, g=g, kvd=kvd, wd=weight_dtype, tp=tp,
                                     ctx=1_000_000 if tp == 3 else 131072, blk=0 if tp == 2 else 16))
    conn.execute(text(
        "INSERT INTO scenario (id, model_id, gpu_id, gpus_per_node, tp, pp, dp_attention, kv_dtype, weight_dtype,"
        " context_tokens, avg_tokens, reserve, kv_cache_memory_bytes, block_size)"
        " VALUES (:id, :m, :g, 8, :tp, 1, 1, :kvd, :wd, :ctx, NULL, 0.12, NULL, :blk)"), rows)
    return n


def _views(url: str) -> tuple[int, dict[str, list[dict]]]:
    """(scenarios asked, every view's rows) with the scenario rows rolled back."""
    engine = open_registry(url)
    try:
        with engine.connect() as conn:
            with conn.begin() as t:
                n = _fill_scenarios(conn)
                out = {v: [dict(r) for r in conn.execute(text(f"SELECT * FROM {v} ORDER BY {key}")).mappings()]
                       for v, key in VIEWS.items()}
                t.rollback()
    finally:
        engine.dispose()
    return n, out


def _same(a, b) -> bool:
    """Equal, numbers to 1e-12 (SQLite hands back 0 where PostgreSQL hands back 0.0)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)
    return a == b


def test_every_view_gives_the_same_rows_on_both_engines(pg_url, tmp_path):
    (n_lite, lite), (n_pg, pg) = _views(f"sqlite:///{tmp_path / 'r.db'}"), _views(pg_url)
    assert n_lite == n_pg == len(pg["capacity"])
    for view in VIEWS:
        assert len(lite[view]) == len(pg[view]) > 0, view
        for a, b in zip(lite[view], pg[view]):
            assert list(a) == list(b), view
            diff = {k: (a[k], b[k]) for k in a if not _same(a[k], b[k])}
            assert not diff, (view, a.get("model") or a.get("gpu"), diff)
    reasons = {r["reason"] for r in pg["capacity"]}
    assert any(" GiB" in r for r in reasons)  # formatted numbers in reasons agree too


# --------------------------------------------------------------------------- db copy


def _copy(kv, source: str, target: str, *extra, ok=True):
    return kv("db", "copy", "--from", source, "--to", target, *extra, ok=ok)


@pytest.fixture
def sqlite_registry(tmp_path):
    """A SQLite registry with the catalog, an extra model and plan, and a gap in the model ids."""
    from conftest import Kvreg

    url = f"sqlite:///{tmp_path / 'source.db'}"
    kv = Kvreg(url)
    kv("model", "add", "Gap-1B", "--layers", "4", "--kv-heads", "2", "--attention-heads", "8", "--head-dim", "64",
       "--params-b", "1")
    kv("model", "add", "Mine-3B", "--layers", "28", "--kv-heads", "8", "--attention-heads", "24",
       "--head-dim", "128", "--params-b", "3.2", "--notes", "naïve — ünïcode, 'quotes' and a % sign")
    kv("model", "remove", "Gap-1B")
    return url


def test_copy_sqlite_to_postgres_and_back(sqlite_registry, pg_server, tmp_path):
    from conftest import Kvreg

    target = pg_server.url(pg_server.create_database())  # empty: no tables yet
    kv = Kvreg(sqlite_registry)
    out = json.loads(_copy(kv, sqlite_registry, target, "--format", "json").stdout)[0]
    try:
        assert out["verified"] is True and out["source_sha256"] == out["target_sha256"]
        assert out["replaced_rows"] == 0
        pg = Kvreg(target)
        models = {m["name"]: m for m in pg.json("model", "list")}
        lite_models = {m["name"]: m for m in kv.json("model", "list")}
        assert models == lite_models  # ids kept, gap included
        assert out["model_rows"] == len(models)
        # The sequence moved past the copied ids: the next model gets a fresh one.
        pg("model", "add", "Next-1B", "--layers", "4", "--kv-heads", "2", "--attention-heads", "8",
           "--head-dim", "64", "--params-b", "1")
        new_id = {m["name"]: m["id"] for m in pg.json("model", "list")}["Next-1B"]
        assert new_id == max(m["id"] for m in models.values()) + 1
        # The same figures from the copied rows, through PostgreSQL's views.
        ask = ("capacity", "--model", "Mine-3B", "--gpu", "H100-SXM", "--context", "32K")
        assert pg.json(*ask)[0]["max_concurrency"] == pytest.approx(kv.json(*ask)[0]["max_concurrency"], rel=1e-12)
        # And back: a new SQLite file with the same contents, hence the same hash.
        back = f"sqlite:///{tmp_path / 'back.db'}"
        again = json.loads(_copy(kv, target, back, "--format", "json").stdout)[0]
        assert again["verified"] and again["model_rows"] == out["model_rows"] + 1
    finally:
        pg_server.drop_database(target.rsplit("/", 1)[1])


def test_copy_prints_counts_and_both_hashes(sqlite_registry, tmp_path):
    from conftest import Kvreg

    from kvreg.interchange.dbcopy import content_hash

    target = f"sqlite:///{tmp_path / 'copy.db'}"
    out = _copy(Kvreg(sqlite_registry), sqlite_registry, target).stdout
    engine = make_engine(sqlite_registry)
    with engine.connect() as conn:
        sha = content_hash(conn)
        models = conn.execute(text("SELECT COUNT(*) FROM model")).scalar()
    engine.dispose()
    assert f"content sha256 source {sha}" in out and f"content sha256 target {sha}" in out
    assert any(line.split() == ["model", str(models), str(models)] for line in out.splitlines())


def test_copy_refuses_a_target_that_holds_rows_unless_forced(kv, db_url, sqlite_registry, state):
    kv("init")  # the target: a registry holding the catalog
    before = state()
    result = _copy(kv, sqlite_registry, db_url, ok=False)
    assert result.exit_code == 1
    assert "already holds rows" in result.stderr and "--force" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert state() == before
    forced = json.loads(_copy(kv, sqlite_registry, db_url, "--force", "--format", "json").stdout)[0]
    assert forced["verified"] and forced["replaced_rows"] > 0
    assert "Mine-3B" in {m["name"] for m in kv.json("model", "list")}


def test_a_copy_that_fails_leaves_the_target_as_it_was(sqlite_registry, pg_server):
    from conftest import Kvreg

    # SQLite keeps any integer in an INTEGER column; PostgreSQL's INTEGER stops at 2**31 - 1.
    engine = make_engine(sqlite_registry)
    with engine.begin() as conn:
        conn.execute(text("UPDATE model SET max_position_embeddings = :n WHERE name = 'Mine-3B'"), {"n": 2**40})
    engine.dispose()
    name = pg_server.create_database()
    target = pg_server.url(name)
    try:
        result = _copy(Kvreg(sqlite_registry), sqlite_registry, target, ok=False)
        assert result.exit_code == 1
        assert "cannot copy table model" in result.stderr and "nothing was written" in result.stderr
        # Not even the migration stayed: it ran in the copy's transaction.
        assert pg_server.sql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
        engine = make_engine(target)
        with engine.connect() as conn:
            tables = conn.execute(text("SELECT count(*) FROM information_schema.tables "
                                       "WHERE table_schema = 'public'")).scalar()
        engine.dispose()
        assert tables == 0
    finally:
        pg_server.drop_database(name)


def test_a_copy_that_does_not_verify_writes_nothing(kv, db_url, sqlite_registry, state, monkeypatch):
    import kvreg.interchange.dbcopy

    kv("init")
    before = state()
    monkeypatch.setattr(kvreg.interchange.dbcopy, "content_hash", lambda conn: "0" * 64)  # the target's hash differs
    result = _copy(kv, sqlite_registry, db_url, "--force", ok=False)
    monkeypatch.undo()
    assert result.exit_code == 1 and "did not verify" in result.stderr and "nothing was written" in result.stderr
    assert state() == before  # the --force deletes and the inserts were rolled back with it


def test_a_failed_copy_leaves_no_new_sqlite_file(sqlite_registry, tmp_path, monkeypatch):
    from conftest import Kvreg

    import kvreg.interchange.dbcopy

    monkeypatch.setattr(kvreg.interchange.dbcopy, "content_hash", lambda conn: "0" * 64)
    result = _copy(Kvreg(sqlite_registry), sqlite_registry, f"sqlite:///{tmp_path / 'new.db'}", ok=False)
    assert result.exit_code == 1 and "did not verify" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("new.db")) == []


@pytest.mark.parametrize("case, message", [
    ("missing", "no registry at"),
    ("same", "are the same database"),
    ("base", "is not a kvreg registry"),
])
def test_copy_refuses_bad_sources(kv, db_url, tmp_path, case, message, state):
    from conftest import Kvreg

    source = {"missing": f"sqlite:///{tmp_path / 'nothing.db'}", "same": db_url,
              "base": f"sqlite:///{tmp_path / 'base.db'}"}[case]
    target = db_url if case == "same" else f"sqlite:///{tmp_path / 'target.db'}"
    if case == "base":
        Kvreg(source)("db", "downgrade", "base")  # every table gone, no revision
    kv("init")
    before = state()
    result = _copy(kv, source, target, ok=False)
    assert result.exit_code == 1 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert state() == before
    assert not (tmp_path / "target.db").exists()


def test_a_value_postgres_cannot_hold_is_one_line_and_rolled_back(pg_url):
    from kvreg.db.engine import UnstorableValue
    from kvreg.interchange.dbcopy import content_hash

    engine = open_registry(pg_url)
    with engine.connect() as conn:
        before = content_hash(conn)
    with pytest.raises(UnstorableValue, match="integer out of range"):
        with engine.begin() as conn:
            conn.execute(text("UPDATE model SET notes = 'changed'"))
            conn.execute(text("UPDATE model SET layers = :n"), {"n": 2**31})  # INTEGER holds up to 2**31 - 1
    with engine.connect() as conn:
        assert content_hash(conn) == before
    engine.dispose()
