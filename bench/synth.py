"""Synthetic registries and config folders for the benchmark.

A registry is created the way a user gets one (kvreg's open_registry: migrated, seeded, views
synced) and then filled by direct SQL inserts in one transaction: N models copied from the
catalog's architectures under new names, N plans spread over those models and the catalog's
GPUs, demand for each plan in the current and the previous quarter, and a two-class workload
mix on every fourth plan. Direct inserts keep
building a 10,000-plan registry to a second; the CLI's own write paths are timed separately
(`kvreg model import`).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

# The public configs vendored for the tests (sources in their MANIFEST.md): nothing outside the repository.
HF_CONFIGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "hf-configs"

# Plan layouts cycled over: (tp, context tokens, avg tokens or None, kv dtype).
_LAYOUTS = [
    (1, 131072, None, "bf16"),
    (2, 32768, 1500, "fp8"),
    (4, 131072, 13000, "bf16"),
    (8, 8192, None, "fp8"),
    (1, 8192, 1500, "bf16"),
]


def quarters(today: dt.date | None = None) -> tuple[str, str]:
    """(previous, current) quarter as kvreg writes them: ("2026Q3", "2026Q4")."""
    today = today or dt.date.today()
    q = (today.month - 1) // 3 + 1
    prev = (today.year, q - 1) if q > 1 else (today.year - 1, 4)
    return f"{prev[0]}Q{prev[1]}", f"{today.year}Q{q}"


def create_registry(path: Path) -> str:
    """A new registry at `path`, exactly as the first `kvreg` command would leave it; returns its URL.

    open_registry runs in a child process: the benchmark's own process stays free of SQLAlchemy,
    because a child's peak RSS starts from its parent's size at fork.
    """
    url = f"sqlite:///{path}"
    code = "import sys; from kvreg.app.access import open_registry; open_registry(sys.argv[1]).dispose()"
    subprocess.run([sys.executable, "-c", code, url], check=True)
    return url


def fill(path: Path, n_models: int, n_plans: int) -> dict:
    """Add n_models models and n_plans plans (with two quarters of demand) by direct SQL."""
    prev_q, cur_q = quarters()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN IMMEDIATE")
        model_ids = _add_models(conn, n_models)
        gpu_ids = [r[0] for r in conn.execute("SELECT id FROM gpu ORDER BY id")]
        _add_plans(conn, n_plans, model_ids, gpu_ids, (prev_q, cur_q))
        conn.execute("COMMIT")
        counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                  for t in ("model", "plan", "demand", "workload_class")}
    finally:
        conn.close()
    return {**counts, "quarter": cur_q, "previous_quarter": prev_q}


def _add_models(conn: sqlite3.Connection, n: int) -> list[int]:
    cur = conn.execute("SELECT * FROM model ORDER BY id")
    cols = [d[0] for d in cur.description]
    templates = [dict(zip(cols, r)) for r in cur.fetchall()]
    cols = [c for c in cols if c != "id"]
    rows = []
    for i in range(n):
        t = dict(templates[i % len(templates)])
        t["name"] = f"synth-{i:05d}-{t['name']}"
        # Vary the claimed context so models are not byte-identical copies.
        t["max_position_embeddings"] = int(t["max_position_embeddings"]) + (i % 7) * 1024
        t["source"] = "bench"
        rows.append([t[c] for c in cols])
    conn.executemany(
        f"INSERT INTO model ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", rows
    )
    return [r[0] for r in conn.execute("SELECT id FROM model WHERE source = 'bench' ORDER BY id")]


def _add_plans(conn: sqlite3.Connection, n: int, model_ids: list[int], gpu_ids: list[int],
               qs: tuple[str, str]) -> None:
    weight = dict(conn.execute("SELECT id, weight_dtype FROM model"))
    plans = []
    for i in range(n):
        tp, ctx, avg, kvd = _LAYOUTS[i % len(_LAYOUTS)]
        m = model_ids[i % len(model_ids)] if model_ids else next(iter(weight))
        plans.append((f"bench-plan-{i:05d}", m, gpu_ids[i % len(gpu_ids)], 8, tp, 1, 1, kvd, weight[m], ctx, avg,
                      0.12, None, 16, "synthetic"))
    conn.executemany(
        "INSERT INTO plan (name, model_id, gpu_id, gpus_per_node, tp, pp, dp_attention, kv_dtype, weight_dtype,"
        " context_tokens, avg_tokens, reserve, kv_cache_memory_bytes, block_size, notes)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", plans
    )
    ids = [r[0] for r in conn.execute("SELECT id FROM plan WHERE name LIKE 'bench-plan-%' ORDER BY id")]
    demand = [(pid, q, 10 + (pid * 37 + k * 101) % 500) for pid in ids for k, q in enumerate(qs)]
    conn.executemany("INSERT INTO demand (plan_id, quarter, users) VALUES (?, ?, ?)", demand)
    # Every fourth plan serves a workload mix instead of one average: chat (80%) and half-context documents.
    mixed = [(pid, ctx) for pid, (_n, _m, _g, _gpn, _tp, _pp, _dp, _kd, _wd, ctx, *_rest) in zip(ids, plans)][::4]
    conn.executemany("UPDATE plan SET avg_tokens = NULL WHERE id = ?", [(pid,) for pid, _ctx in mixed])
    classes = [(pid, "chat", min(1500, ctx), 0.8) for pid, ctx in mixed]
    classes += [(pid, "documents", ctx // 2, 0.2) for pid, ctx in mixed]
    conn.executemany("INSERT INTO workload_class (plan_id, name, avg_tokens, share) VALUES (?, ?, ?, ?)", classes)


def write_configs(folder: Path, n: int, source: Path = HF_CONFIGS) -> list[Path]:
    """n Hugging Face config files, variants of the shared ones under unique names.

    Each variant changes max_position_embeddings slightly, so every file has its own hash; the
    file name `bench__<Model>-vNNNN.json` gives the model name `<Model>-vNNNN`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    originals = sorted(p for p in source.glob("*.json"))
    if not originals:
        raise FileNotFoundError(f"no *.json config files in {source} to make benchmark variants of")
    texts = [(p.name.removesuffix(".json").split("__", 1)[-1], json.loads(p.read_text())) for p in originals]
    out = []
    for i in range(n):
        stem, cfg = texts[i % len(texts)]
        cfg = dict(cfg)
        if isinstance(cfg.get("max_position_embeddings"), int):
            cfg["max_position_embeddings"] += i % 5
        p = folder / f"bench__{stem}-v{i:04d}.json"
        p.write_text(json.dumps(cfg, indent=2))
        out.append(p)
    return out


def horizon(start: str, n: int) -> list[str]:
    """n consecutive quarters from `start` (2026Q4 -> 2026Q4, 2027Q1, ...)."""
    i = int(start[:4]) * 4 + int(start[5]) - 1
    return [f"{(i + k) // 4}Q{(i + k) % 4 + 1}" for k in range(n)]


def add_procurement(path: Path, qs: list[str]) -> dict:
    """Demand over the quarters `qs` that carries forward, and a fleet: each plan gets an entry in
    every other quarter of `qs` (the quarters between carry its last one; every tenth plan ends with 0),
    and each GPU type a fleet entry in the first quarter and the middle one. Replaces the plans' demand."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        ids = [r[0] for r in conn.execute("SELECT id FROM plan WHERE name LIKE 'bench-plan-%' ORDER BY id")]
        conn.execute("DELETE FROM demand WHERE plan_id IN (SELECT id FROM plan WHERE name LIKE 'bench-plan-%')")
        demand = []
        for pid in ids:
            for k, q in enumerate(qs):
                if (pid + k) % 2 == 0:
                    ends = pid % 10 == 0 and k >= len(qs) - 2
                    demand.append((pid, q, 0 if ends else 10 + (pid * 37 + k * 101) % 500))
        conn.executemany("INSERT INTO demand (plan_id, quarter, users) VALUES (?, ?, ?)", demand)
        gpus = [r[0] for r in conn.execute("SELECT id FROM gpu ORDER BY id")]
        fleet = [(g, q, 100 * (i + 1) + 50 * k, 8 * k, 2.0 if k else None)
                 for i, g in enumerate(gpus) for k, q in enumerate((qs[0], qs[len(qs) // 2]))]
        conn.executemany("INSERT INTO fleet (gpu_id, quarter, gpus_owned, gpus_reserved, reserved_price_per_hour)"
                         " VALUES (?, ?, ?, ?, ?)", fleet)
        conn.execute("COMMIT")
        counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("plan", "demand", "fleet")}
    finally:
        conn.close()
    return counts
