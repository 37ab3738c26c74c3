"""Migrations with data: a registry filled at every earlier schema revision upgrades to head and
back down with every row intact, on SQLite and PostgreSQL.

The fixtures are built the way a real old registry was: the old migrations create the schema
(alembic upgrade to that revision on an empty database), then rows go in through SQL that fits
that revision's tables (reflected from the database, not hand-written). The rows are the
built-in catalog as a registry at head holds it (models, GPUs, dtypes, example plans, demand)
plus a few awkward ones; a column the old revision does not have is left out of the row, and
before 0022 the catalog rows carry the notes the catalog had then (0022 rewrites 27 of them).

The revisions come from the migration scripts, oldest first, so a new revision is covered as
soon as its file lands.
"""

from __future__ import annotations

import json
import pathlib
import tomllib

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, text

from kvreg.db.engine import alembic_config, current_revision, head_revision, make_engine, migrations_dir
from kvreg.figures.aggregates import ROLLUP_SQL_KEY
from kvreg.figures.views import WHATIF_SQL_KEY

# Parents before children; every registry table.
TABLES = ("dtype", "gpu", "model", "plan", "demand", "scenario", "kvreg_meta")
# Written by kvreg itself whenever it recreates the views: not data that a migration carries.
# The rollup query and the what-ifs are compiled per dialect.
DERIVED_META = ("views_hash", "views_source", ROLLUP_SQL_KEY, WHATIF_SQL_KEY)
SQLISH = "x'); DROP TABLE model;--"
HF_CONFIGS = pathlib.Path(__file__).parent / "data" / "hf-configs"
CATALOG_NAMES = {m["name"] for m in tomllib.loads(
    (pathlib.Path(__file__).parents[1] / "kvreg" / "catalog" / "models.toml").read_text())["model"]}


def _reported_memory(gpu: dict) -> int | None:
    """0006 fills the memory CUDA reports for the catalog GPUs a public vLLM log shows, where the row
    still has the catalog's nominal size: H100-SXM 79.19 GiB, A100-40GB 39.38 GiB; nothing else."""
    logged = {"H100-SXM": (80 * 2**30, 85_029_615_043), "A100-40GB": (40 * 2**30, 42_283_953_029)}
    nominal, reported = logged.get(gpu["name"], (None, None))
    return reported if gpu["memory_bytes"] == nominal else None


def _recurrent_elements(model: dict) -> int | None:
    """0008 fills the recurrent part of the catalog Qwen3-Next row's state, 32 x 128 x 128 of its 548,864
    elements, where the row still has that state size; nothing else."""
    catalog = model["name"] == "Qwen3-Next-80B-A3B" and model["linear_state_elements_per_layer"] == 548_864
    return 32 * 128 * 128 if catalog else None


def _embedding_matrices(model: dict) -> int | None:
    """0009 fills the embedding matrices of the catalog rows imported from a config.json under
    tests/data/hf-configs, where the row still has the config's vocabulary and width: 2 when the config
    says tie_word_embeddings false, 1 when it ties them or leaves the key out (Falcon's and Gemma 2's
    configuration classes tie by default); nothing else."""
    config = HF_CONFIGS / str(model.get("source"))
    if model["name"] not in CATALOG_NAMES or not config.is_file():
        return None
    data = json.loads(config.read_text())
    vocab = data.get("vocab_size", data.get("padded_vocab_size"))  # ChatGLM3 names it padded_vocab_size
    if (model["vocab_size"], model["hidden_size"]) != (vocab, data["hidden_size"]):
        return None
    return 1 if data.get("tie_word_embeddings", True) else 2


def _expert_layout(model: dict) -> tuple | None:
    """0010 fills the expert layout of the catalog's MoE rows imported from a config.json under
    tests/data/hf-configs, where the row still has the config's layer count: (routed experts,
    moe_intermediate_size or, for gpt-oss, intermediate_size, layers minus first_k_dense_replace)."""
    config = HF_CONFIGS / str(model.get("source"))
    if model["name"] not in CATALOG_NAMES or not config.is_file():
        return None
    data = json.loads(config.read_text())
    experts = data.get("n_routed_experts") or data.get("num_experts") or data.get("num_local_experts")
    if not experts or model["layers"] != data["num_hidden_layers"]:
        return None
    width = data.get("moe_intermediate_size") or data["intermediate_size"]
    return experts, width, data["num_hidden_layers"] - data.get("first_k_dense_replace", 0)


def _expert_part(i: int):
    return lambda model: (_expert_layout(model) or (None, None, None))[i]


# The catalog's GPUs before issue 41 added 27 more: the ones 0011 and 0015 know and fill (a GPU added to the
# catalog since is not in a migration's table, and a registry seeded before it does not have it).
FIRST_CATALOG_GPUS = ("H100-SXM", "H200", "A100-40GB", "A100-80GB", "L40S", "RTX-4090", "RTX-5090", "MI300X", "B200",
                      "M3-Ultra")


def _gpu_fact(i: int):
    """0011 fills the compute capability (i = 0) and the fabric (i = 1) of the catalog GPUs, where the row still has
    the catalog's nominal memory: the catalog's own values (kvreg/catalog/gpus.toml); nothing else."""
    catalog = {g["name"]: g for g in tomllib.loads(
        (pathlib.Path(__file__).parents[1] / "kvreg" / "catalog" / "gpus.toml").read_text())["gpu"]}

    def fact(gpu: dict):
        row = catalog.get(gpu["name"])
        if row is None or gpu["memory_bytes"] != row["memory_bytes"] or gpu["name"] not in FIRST_CATALOG_GPUS:
            return None
        return row.get(("compute_capability", "fabric")[i])
    return fact


def _gpu_flops(column: str):
    """0015 fills the dense FLOP/s of the catalog GPUs, where the row still has the catalog's nominal memory: the
    catalog's own values (kvreg/catalog/gpus.toml: the H100-SXM's BF16 989.4 TFLOPS, the A100's FP8 none); nothing
    else, and never a GPU added since (its name is not the catalog's)."""
    catalog = {g["name"]: g for g in tomllib.loads(
        (pathlib.Path(__file__).parents[1] / "kvreg" / "catalog" / "gpus.toml").read_text())["gpu"]}

    def fact(gpu: dict):
        row = catalog.get(gpu["name"])
        if row is None or gpu["memory_bytes"] != row["memory_bytes"] or gpu["name"] not in FIRST_CATALOG_GPUS:
            return None
        return row.get(column)
    return fact




def _rotary_dim(model: dict) -> int | None:
    """0012 fills the rotated width of the catalog's partial-rotary rows where a row still has the catalog's
    head_dim: head_dim x partial_rotary_factor from the config.json under tests/data/hf-configs (Qwen3-Next 0.25
    of 256, GLM-4.5 0.5 of 128), half the head for ChatGLM's model file (ChatGLM3 from its config, GLM-4-9B-chat-1M
    entered by hand); nothing else."""
    if model["name"] not in CATALOG_NAMES or model["head_dim"] != {"Qwen3-Next-80B-A3B": 256}.get(model["name"], 128):
        return None
    if model["name"] == "GLM-4-9B-chat-1M":
        return 128 // 2
    config = HF_CONFIGS / str(model.get("source"))
    if not config.is_file():
        return None
    data = json.loads(config.read_text())
    if data.get("model_type") == "chatglm":
        return model["head_dim"] // 2
    factor = data.get("partial_rotary_factor")
    return int(model["head_dim"] * factor) if factor and factor < 1 else None


# New columns a revision fills from the rows' data rather than leaving NULL: (table, column) -> expected.
FILLED = {("gpu", "reported_memory_bytes"): _reported_memory,
          ("model", "linear_recurrent_elements_per_layer"): _recurrent_elements,
          ("model", "embedding_matrices"): _embedding_matrices,
          ("model", "experts"): _expert_part(0), ("model", "expert_intermediate_size"): _expert_part(1),
          ("model", "moe_layers"): _expert_part(2), ("model", "rotary_dim"): _rotary_dim,
          ("gpu", "compute_capability"): _gpu_fact(0), ("gpu", "fabric"): _gpu_fact(1),
          **{("gpu", c): _gpu_flops(c) for c in ("flops_bf16_per_s", "flops_fp8_per_s", "flops_fp4_per_s")}}


def revisions() -> list[str]:
    """Every schema revision, oldest first."""
    script = ScriptDirectory(str(migrations_dir()))
    return [s.revision for s in reversed(list(script.walk_revisions()))]


EARLIER = revisions()[:-1]

# 0022 rewrites 27 catalog notes, where a row's notes are still the old catalog text: (table, name, old, new).
CATALOG_NOTES = "0022"
REWRITTEN_NOTES = ScriptDirectory(str(migrations_dir())).get_revision(CATALOG_NOTES).module.NOTES
NOTES_TABLES = {"model": "models.toml", "gpu": "gpus.toml", "plan": "plans.toml", "dtype": "dtypes.toml"}


def _notes(rows: dict[str, list[dict]], old: bool) -> dict[str, list[dict]]:
    """The rows with 0022's catalog notes as they were before it (old) or after it: each row of the
    table and name 0022 names, whose notes are the other text, gets this one; the rest as they are."""
    swap = {(t, name, new if old else was): was if old else new for t, name, was, new in REWRITTEN_NOTES}

    def one(table: str, row: dict) -> dict:
        want = swap.get((table, row.get("name"), row.get("notes")))
        return row if want is None else {**row, "notes": want}
    return {t: [one(t, r) for r in rs] for t, rs in rows.items()}


def held_at(revision: str, rows: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The catalog rows as a registry at `revision` held them: before 0022, with the catalog's old notes."""
    before_notes = revisions().index(revision) < revisions().index(CATALOG_NOTES)
    return _notes(rows, old=True) if before_notes else rows


def alembic(url: str, action: str, revision: str) -> None:
    """An Alembic command in one transaction, as `kvreg db` runs it."""
    from alembic import command

    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            getattr(command, action)(alembic_config(url, conn), revision)
    finally:
        engine.dispose()


def _columns(conn) -> dict[str, list[str]]:
    """Each registry table's columns in the database as it is now."""
    meta = MetaData()
    meta.reflect(conn, only=[t for t in TABLES])
    return {t: [c.name for c in meta.tables[t].columns] for t in TABLES}


def dump(url: str) -> dict[str, list[dict]]:
    """Every row of every registry table, in primary-key order (kvreg_meta by key)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            out = {}
            for t in TABLES:
                order = "key" if t == "kvreg_meta" else "id" if t != "dtype" else "name"
                rows = [dict(r) for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY {order}")).mappings()]
                if t == "kvreg_meta":
                    rows = [r for r in rows if r["key"] not in DERIVED_META]
                out[t] = rows
            return out
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def head_rows(tmp_path_factory) -> dict[str, list[dict]]:
    """The rows to load: a seeded registry at head, read back, plus the awkward rows."""
    from kvreg.app.access import open_registry

    url = f"sqlite:///{tmp_path_factory.mktemp('head') / 'registry.db'}"
    open_registry(url).dispose()
    rows = dump(url)
    _add_awkward_rows(rows)
    return rows


def _add_awkward_rows(rows: dict[str, list[dict]]) -> None:
    """Rows that a careless table rebuild would damage: quotes, non-ASCII, line breaks, integers
    past a double's 53 bits, binary fractions, NULLs, and a scratch scenario row."""
    def next_id(table):
        return max(r["id"] for r in rows[table]) + 1

    base_model = next(r for r in rows["model"] if r["name"] == "Llama-3.1-8B")
    model = {**base_model, "id": next_id("model"), "name": SQLISH, "family": "ünïcødé ✓ 模型",
             "notes": "line one\nline 'two' \"three\"\ttab", "params_total": 2**53 + 1, "params_active": 2**53 + 1,
             "source_sha256": None, "imported_at": None}
    rows["model"].append(model)
    # Revision 0005's columns set (sliding layers with their own heads and width, cache-less layers, K=V).
    base_hybrid = next(r for r in rows["model"] if r["name"] == "gpt-oss-120b")
    rows["model"].append({**base_hybrid, "id": next_id("model"), "name": "kinds ✓", "sliding_kv_heads": 16,
                          "sliding_head_dim": 32, "chunked_kv_heads": None, "chunked_head_dim": None,
                          "no_cache_layers": 4, "k_eq_v_layers": 18})
    base_gpu = rows["gpu"][0]
    gpu = {**base_gpu, "id": next_id("gpu"), "name": "GPU «ÆØÅ»", "memory_bytes": 2**62 - 1,
           "price_per_hour": 0.1, "unit_price": None, "memory_bandwidth_bytes_per_s": None}
    rows["gpu"].append(gpu)
    dtype = {**rows["dtype"][0], "name": "odd_fp", "bytes_per_element": 0.5625, "kind": "kv",
             "notes": "a 9-bit format, 'quoted'"}
    rows["dtype"].append(dtype)
    base_plan = rows["plan"][0]
    plan = {**base_plan, "id": next_id("plan"), "name": f"plan {SQLISH}", "model_id": model["id"],
            "gpu_id": gpu["id"], "kv_dtype": "odd_fp", "reserve": 1 / 3, "avg_tokens": 1500,
            "kv_cache_memory_bytes": 53_000_000_000, "notes": "ünïcødé"}
    rows["plan"].append(plan)
    rows["demand"].append({"id": next_id("demand"), "plan_id": plan["id"], "quarter": "2026Q4", "users": 2**40})
    scenario_keys = [k for k in base_plan if k not in ("name", "notes") and not k.startswith("measured_")]
    rows["scenario"].append({**{k: plan[k] for k in scenario_keys}, "id": 1})
    rows["kvreg_meta"].append({"key": "note from an old kvreg", "value": "kept ✓"})


def load(url: str, rows: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Insert the rows through SQL that fits the registry's current revision: only the columns its
    tables have. Returns what was inserted, as the tables hold it."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            meta = MetaData()
            meta.reflect(conn, only=list(TABLES))
            for t in TABLES:
                table = meta.tables[t]
                have = {c.name for c in table.columns}
                fitted = [{k: v for k, v in r.items() if k in have} for r in rows[t]]
                if fitted:
                    conn.execute(table.insert(), fitted)
    finally:
        engine.dispose()
    return dump(url)


def _only(rows: dict[str, list[dict]], columns: dict[str, list[str]]) -> dict[str, list[dict]]:
    return {t: [{c: r[c] for c in columns[t]} for r in rows[t]] for t in TABLES}


def _defaults(url: str) -> dict[str, dict[str, str | None]]:
    """Each column's server default as the database reports it (None: no default)."""
    from sqlalchemy import inspect

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            insp = inspect(conn)
            return {t: {c["name"]: c.get("default") for c in insp.get_columns(t)} for t in TABLES}
    finally:
        engine.dispose()


def columns_of(url: str) -> dict[str, list[str]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return _columns(conn)
    finally:
        engine.dispose()


def revision_of(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    finally:
        engine.dispose()


def test_there_is_history_to_test():
    """At least one revision before head, or the test below has nothing to walk."""
    assert EARLIER and revisions()[-1] == head_revision()


@pytest.mark.parametrize("revision", EARLIER)
def test_a_registry_filled_at_an_earlier_revision_upgrades_and_downgrades_with_every_row(
        revision, empty_db_url, head_rows):
    url = empty_db_url
    alembic(url, "upgrade", revision)
    assert revision_of(url) == revision
    old_columns = columns_of(url)
    before = load(url, held_at(revision, head_rows))
    assert {t: len(r) for t, r in before.items()} == {t: len(head_rows[t]) for t in TABLES}
    assert any(r["name"] == SQLISH for r in before["model"])

    alembic(url, "upgrade", "head")
    assert revision_of(url) == head_revision()
    new_columns = columns_of(url)
    common = {t: [c for c in old_columns[t] if c in new_columns[t]] for t in TABLES}
    after = dump(url)
    # every row, every old value; 0022 gave the catalog rows the catalog's new notes
    assert _only(after, common) == _only(_notes(before, old=False), common)
    defaults = _defaults(url)
    for t in TABLES:  # a column the revision did not have: NULL or its default on every old row
        for c in (c for c in new_columns[t] if c not in old_columns[t]):
            for r in after[t]:
                if (t, c) in FILLED:  # a revision that fills a new column from data: what it promises
                    assert r[c] == FILLED[t, c](r), (t, c, r["name"], r[c])
                    continue
                assert r[c] is None or str(r[c]) in str(defaults[t][c]), (t, c, r[c], defaults[t][c])
    _views_answer_for_the_old_rows(url)

    alembic(url, "downgrade", revision)
    assert revision_of(url) == revision
    assert columns_of(url) == old_columns
    assert dump(url) == before  # back down: the rows exactly as they were loaded


def _views_answer_for_the_old_rows(url: str) -> None:
    """At head the views are back and compute over the migrated rows (the awkward plan included)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = {r["plan"]: dict(r) for r in conn.execute(text("SELECT * FROM plan_capacity")).mappings()}
            tables = {r[0] for r in conn.execute(text(
                "SELECT name FROM sqlite_master WHERE type = 'table'" if conn.dialect.name == "sqlite"
                else "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))}
    finally:
        engine.dispose()
    assert set(TABLES) <= tables
    plan = rows[f"plan {SQLISH}"]
    assert plan["model"] == SQLISH and plan["gpu"] == "GPU «ÆØÅ»" and plan["kv_dtype"] == "odd_fp"
    # kv_cache_memory_bytes 53e9 is the pool per GPU: 53e9 / 2**30 = 49.36 GiB.
    assert plan["kv_pool_gib_per_gpu"] == pytest.approx(53e9 / 2**30)


@pytest.mark.parametrize("nominal", [80 * 2**30, 81 * 2**30])
def test_0006_fills_the_reported_memory_only_of_an_unchanged_catalog_gpu(empty_db_url, head_rows, nominal):
    """An H100-SXM with the catalog's 80 GiB gets 79.19 GiB reported; one its user resized keeps NULL
    (its size is the user's, not the catalog's). Down again, the column is gone and the row is as it was."""
    url = empty_db_url
    alembic(url, "upgrade", "0003")
    rows = {t: [] for t in TABLES}
    h100 = next(r for r in head_rows["gpu"] if r["name"] == "H100-SXM")
    rows["gpu"] = [{**h100, "memory_bytes": nominal}]
    before = load(url, rows)
    alembic(url, "upgrade", "0006")
    [gpu] = dump(url)["gpu"]
    assert gpu["reported_memory_bytes"] == (85_029_615_043 if nominal == 80 * 2**30 else None)
    assert round(85_029_615_043 / 2**30, 2) == 79.19
    alembic(url, "downgrade", "0003")
    assert dump(url) == before


def _catalog_notes() -> dict[tuple[str, str], str]:
    """(table, name) -> notes, as kvreg/catalog/*.toml says now."""
    catalog = pathlib.Path(__file__).parents[1] / "kvreg" / "catalog"
    return {(t, r["name"]): r.get("notes", "") for t, file in NOTES_TABLES.items()
            for r in tomllib.loads((catalog / file).read_text())[t]}


@pytest.mark.parametrize("edited", [None, ("plan", "chat-llama3-8b")], ids=["unedited", "one-edited"])
def test_0022_gives_the_catalog_rows_the_new_notes_unless_their_owner_edited_them(empty_db_url, head_rows, edited):
    """A registry at 0021 holding the catalog's old notes (as the catalog seeded them), one of them edited by its
    owner (the old text with a line added) or none, opened by this kvreg: each of the 27 rows 0022 names has what
    kvreg/catalog/*.toml says now, an edited row keeps its owner's note, nothing else changes. Down to 0021, the
    old text is back."""
    url = empty_db_url
    assert {t: sum(n[0] == t for n in REWRITTEN_NOTES) for t in NOTES_TABLES} == {
        "model": 16, "gpu": 4, "plan": 6, "dtype": 1}
    alembic(url, "upgrade", "0021")
    rows = _notes(head_rows, old=True)
    if edited:
        table, name = edited
        rows[table] = [{**r, "notes": r["notes"] + "\nOurs: two replicas."} if r["name"] == name else r
                       for r in rows[table]]
    before = load(url, rows)
    held = {(t, r["name"]): r["notes"] for t in NOTES_TABLES for r in before[t]}
    assert [(t, n) for t, n, old, _ in REWRITTEN_NOTES if held[t, n] != old] == ([edited] if edited else [])

    from kvreg.app.access import open_registry

    open_registry(url).dispose()  # the next open upgrades it, as `kvreg init` and every command do
    assert revision_of(url) == head_revision()
    after = dump(url)
    catalog = _catalog_notes()
    got = {(t, r["name"]): r["notes"] for t in NOTES_TABLES for r in after[t]}
    assert len(REWRITTEN_NOTES) == 27
    for t, name, _, new in REWRITTEN_NOTES:
        assert new == catalog[t, name]  # the migration's new text is the catalog's
        assert got[t, name] == (held[t, name] if (t, name) == edited else catalog[t, name]), (t, name)
    assert after == _notes(before, old=False)  # and no other row or column changed

    alembic(url, "downgrade", "0021")
    assert dump(url) == before
