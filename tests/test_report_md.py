"""`kvreg report`, the Markdown half: figures from the views, escaping, atomic writes, quarter over quarter.

Most tests use a small registry (two models, two GPUs, no catalog plans) with plans and demand
inserted here by SQL, so they do not depend on the example plans in kvreg/catalog/plans.toml.

The snapshot test renders the *seeded* registry's report for 2026Q4 and compares it with
tests/snapshots/capacity.md, ignoring the generated_at and registry_url lines. When the catalog
(models, GPUs, example plans) or the template changes, the snapshot changes too: regenerate it,
then review the diff like any other change to the report:

    KVREG_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_report_md.py -k snapshot
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from conftest import Kvreg

SNAPSHOT = Path(__file__).parent / "snapshots" / "capacity.md"
GIB = 2**30
NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.timezone.utc)
HOSTILE = [
    '=HYPERLINK("http://x","y")',
    "+1",
    "-1+2",
    "@SUM(A1)",
    "a|b||c",
    "tick`code`tick",
    "<script>alert(1)</script>",
    "line one\n# injected heading\n| x | y |",
    "*bold* _em_ [link](http://e.example) ~~gone~~ R&D $x^$",
    "_hidden",
    "back\\|slash",
]

# Llama-3.1-8B (SPEC golden figures): 32 layers x 8 KV heads x (128 + 128) x 2 bytes = 131,072 B per token.
LLAMA8_KV_BYTES_PER_TOKEN = 32 * 8 * (128 + 128) * 2
LLAMA8_WEIGHTS = 8_050_000_000 * 2  # params_total x 2 bytes (bf16)
H100 = 80 * GIB
H200 = 141 * GIB


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def small_registry(tmp_path_factory) -> Path:
    """A seeded SQLite registry cut down to Llama-3.1-8B and Qwen2.5-7B on H100-SXM and H200."""
    from kvreg.app.access import open_registry

    path = tmp_path_factory.mktemp("small") / "registry.db"
    eng = open_registry(f"sqlite:///{path}")
    with eng.begin() as conn:
        conn.execute(text("DELETE FROM demand"))
        conn.execute(text("DELETE FROM plan"))
        conn.execute(text("DELETE FROM model WHERE name NOT IN ('Llama-3.1-8B', 'Qwen2.5-7B')"))
        conn.execute(text("DELETE FROM gpu WHERE name NOT IN ('H100-SXM', 'H200')"))
    eng.dispose()  # the last connection folds the write-ahead log into the file
    return path


@pytest.fixture
def small_url(small_registry, tmp_path) -> str:
    path = tmp_path / "registry.db"
    shutil.copy(small_registry, path)
    return f"sqlite:///{path}"


@pytest.fixture
def small(small_url):
    from kvreg.app.access import open_registry

    eng = open_registry(small_url)
    yield eng
    eng.dispose()


def add_plan(conn, name: str, model: str = "Llama-3.1-8B", gpu: str = "H100-SXM", **settings) -> None:
    """A plan row by SQL (no validation, as a hostile or careless client could write it)."""
    row = dict(name=name, model=model, gpu=gpu, gpus_per_node=8, tp=1, pp=1, dp_attention=1, kv_dtype="bf16",
               weight_dtype="bf16", context_tokens=131072, avg_tokens=None, reserve=0.12,
               kv_cache_memory_bytes=None, block_size=16, notes="")
    row.update(settings)
    conn.execute(text(
        "INSERT INTO plan (name, model_id, gpu_id, gpus_per_node, tp, pp, dp_attention, kv_dtype, weight_dtype,"
        " context_tokens, avg_tokens, reserve, kv_cache_memory_bytes, block_size, notes)"
        " VALUES (:name, (SELECT id FROM model WHERE name = :model), (SELECT id FROM gpu WHERE name = :gpu),"
        " :gpus_per_node, :tp, :pp, :dp_attention, :kv_dtype, :weight_dtype, :context_tokens, :avg_tokens,"
        " :reserve, :kv_cache_memory_bytes, :block_size, :notes)"), row)


def add_demand(conn, plan: str, quarter: str, users: int) -> None:
    conn.execute(text("INSERT INTO demand (plan_id, quarter, users) VALUES ((SELECT id FROM plan WHERE name = :p),"
                      " :q, :u)"), {"p": plan, "q": quarter, "u": users})


def copy_model(conn, source: str, name: str) -> None:
    """A model row copied from another under a new name (SQL: skips the registry's name checks)."""
    from kvreg.db.tables import MODEL_FIELDS

    cols = [c for c in MODEL_FIELDS if c != "name"]
    conn.execute(text(f"INSERT INTO model (name, {', '.join(cols)}) SELECT :name, {', '.join(cols)}"
                      " FROM model WHERE name = :source"), {"name": name, "source": source})


def report(engine, out, quarter="2026Q4", **kw):
    from kvreg.report import write_report

    kw.setdefault("formats", ("md",))
    kw.setdefault("now", NOW)
    return write_report(engine, quarter, out, **kw)


def read(folder: Path) -> tuple[str, dict]:
    return (folder / "capacity.md").read_text(encoding="utf-8"), json.loads((folder / "data.json").read_text())


def table_rows(md: str, first_header: str) -> list[list[str]]:
    """The cells of the Markdown table whose header starts with `first_header` (split on unescaped |)."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(split_row(line))
    return rows


def split_row(line: str) -> list[str]:
    cells, cell, i = [], "", 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            cell += line[i:i + 2]
            i += 2
            continue
        if line[i] == "|":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += line[i]
        i += 1
    return cells[1:]  # text before the first pipe is empty


def unescape(cell: str) -> str:
    """Markdown's reading of an escaped cell: backslash escapes and the three entities."""
    out = re.sub(r"\\(.)", r"\1", cell)
    return out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# --------------------------------------------------------------------------- escaping


@pytest.mark.parametrize("raw, escaped", [
    ("a|b", "a\\|b"),
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("line one\n# two\r\n| three", "line one \\# two \\| three"),
    ("tick`code`", "tick\\`code\\`"),
    ("*b* _e_ [l](u) ~~s~~", "\\*b\\* \\_e\\_ \\[l\\](u) \\~\\~s\\~\\~"),
    ("R&D", "R&amp;D"),
    ("back\\|slash", "back\\\\\\|slash"),  # the backslash itself is escaped, so the pipe stays escaped
    ('=HYPERLINK("http://x","y")', '=HYPERLINK("http://x","y")'),  # inert in Markdown as it is
    ("-1+2", "-1+2"),
])
def test_escape(raw, escaped):
    from kvreg.export.markdown import escape

    assert escape(raw) == escaped
    assert unescape(escaped) == " ".join(raw.split())


def test_hostile_names_stay_inert_text(small, tmp_path):
    with small.begin() as conn:
        for i, name in enumerate(HOSTILE):
            copy_model(conn, "Qwen2.5-7B", name)
            add_plan(conn, name, model=name, gpu="H100-SXM" if i % 2 else "H200")
            add_demand(conn, name, "2026Q4", 10)
            conn.execute(text("INSERT INTO workload_class (plan_id, name, avg_tokens, share) VALUES"
                              " ((SELECT id FROM plan WHERE name = :p), :n, 1000, 1)"), {"p": name, "n": name})
    r = report(small, tmp_path / "reports")
    md, data = read(r.folder)
    # Each plan's workload mix table names its one class, the hostile name, as inert text.
    lines = md.splitlines()
    classes = {unescape(split_row(lines[i + 2])[0]) for i, line in enumerate(lines)
               if line.startswith("| Workload class |")}
    assert classes == {" ".join(name.split()) for name in HOSTILE}

    assert "<" not in md and ">" not in md  # no raw HTML at all, from names or anywhere else
    assert not any(line.startswith(("# injected", "| x | y |")) for line in md.splitlines())
    # Every table keeps its column count, whatever the names hold.
    blocks = re.findall(r"(?:^\|.*\n)+", md, flags=re.M)
    assert len(blocks) > 5
    for block in blocks:
        widths = {len(split_row(line)) for line in block.splitlines()}
        assert len(widths) == 1, block
    # Each name reads back exactly (newlines as spaces) in the catalog and as its plan's heading.
    catalog = {unescape(row[0]) for row in table_rows(md, "Model")[2:]}
    headings = {unescape(line[4:]) for line in md.splitlines() if line.startswith("### ")}
    for name in HOSTILE:
        assert " ".join(name.split()) in catalog
        assert " ".join(name.split()) in headings
    assert {p["plan"] for p in data["plans"]} == set(HOSTILE)  # data.json keeps the raw names
    assert (r.folder / "charts" / "concurrency.png").stat().st_size > 0  # $ and _ names do not break the chart


# --------------------------------------------------------------------------- figures


@pytest.fixture
def chat_plan(small):
    """One plan: Llama-3.1-8B on H100-SXM, TP1, 128K, bf16; 40 users in 2026Q3 and 100 in 2026Q4."""
    with small.begin() as conn:
        add_plan(conn, "chat")
        add_demand(conn, "chat", "2026Q3", 40)
        add_demand(conn, "chat", "2026Q4", 100)
    return small


def test_procurement_summary_and_plan_figures(chat_plan, tmp_path):
    r = report(chat_plan, tmp_path / "reports")
    md, data = read(r.folder)
    assert r.folder == tmp_path / "reports" / "2026-Q4"
    assert r.files == ["capacity.md", "charts/concurrency.png", "charts/gpus-needed.png", "data.json"]

    pool = H100 * (1 - 0.12) - LLAMA8_WEIGHTS  # 75,591,424,409.6 - 16,100,000,000 bytes
    sequence = LLAMA8_KV_BYTES_PER_TOKEN * 131072  # 16 GiB
    concurrency = pool / sequence  # 3.4629 (SPEC: 3.5)
    plan = data["plans"][0]
    assert plan["max_concurrency"] == pytest.approx(concurrency)
    assert plan["demand"]["replicas_needed"] == math.ceil(100 / concurrency) == 29
    assert plan["demand"]["gpus_needed"] == 29
    assert plan["demand"]["nodes_needed"] == math.ceil(29 / 8) == 4
    assert plan["demand"]["cost_per_month"] == pytest.approx(29 * 2.5 * 730)  # 52,925 USD
    assert plan["demand"]["capex"] == pytest.approx(29 * 30_000)
    assert math.ceil(40 / concurrency) == 12  # 2026Q3

    # The summary row, as printed: no fleet, so all 29 GPUs are to buy (29 x 30,000 = 870,000 USD);
    # 12 the quarter before (+17), 4 nodes. Headers in words with units (kvreg.figures.labels);
    # data.json keeps the view column names.
    from kvreg.figures.labels import label

    rows = table_rows(md, label("gpu"))
    assert rows[0] == [label(c) for c in ["gpu", "gpus_to_buy", "capex_to_buy", "gpus_needed", "gpus_installed",
                                          "gpus_spare", "plans", "plans_not_fitting", "users", "nodes_needed",
                                          "cost_per_month", "previous_quarter_gpus_needed",
                                          "gpus_needed_quarter_change"]]
    assert rows[2] == ["H100-SXM", "29", "870,000.00", "29", "0", "0", "1", "0", "100", "4", "52,925.00", "12", "+17"]
    assert data["procurement"][0]["gpus_needed_quarter_change"] == 17
    assert "- 29 x H100-SXM, capex 870,000.00 USD at `unit_price` 30,000.00 USD" in md
    assert "| Max concurrency (sequences) | 3.46 |" in md
    assert "**Fits:** one replica holds 3.46 context-length sequences (3 whole)." in md
    headroom = 29 * concurrency - 100  # 0.42 users
    assert plan["demand"]["headroom_users"] == pytest.approx(headroom)
    assert f"Headroom: {headroom:.2f} users" in md


def test_a_plan_that_does_not_fit_says_why(small, tmp_path):
    with small.begin() as conn:
        add_plan(conn, "too-long", context_tokens=1_000_000)  # 122 GiB of KV per sequence on an 80 GiB card
        add_demand(conn, "too-long", "2026Q4", 5)
    md, data = read(report(small, tmp_path / "r").folder)
    plan = data["plans"][0]
    assert plan["fits"] == 0 and plan["demand"]["gpus_needed"] is None
    # 1,000,000 tokens x 131,072 B = 122.07 GiB per sequence; pool (80 x 0.88 - 14.99) GiB = 55.41 GiB.
    # and 1,000,000 tokens is past Llama-3.1-8B's 131,072-token claim: the reason says so too
    assert plan["reason"] == ("one 1,000,000-token sequence needs 122.07 GiB per GPU but the KV pool holds 55.41 GiB; "
                              "beyond the model's 131,072-token claim")
    assert "**Does not fit:** one 1,000,000-token sequence needs 122.07 GiB per GPU" in md
    assert "**Not counted:** 1 plan(s) with demand in 2026Q4 serve no user (they do not fit in memory" in md


def test_model_catalog_from_model_kv(small, tmp_path):
    md, data = read(report(small, tmp_path / "r").folder)
    llama = next(m for m in data["models"] if m["model"] == "Llama-3.1-8B")
    assert llama["kv"]["bf16"]["kv_bytes_per_token"] == 131_072
    assert llama["kv"]["fp8"]["kv_bytes_per_token"] == 131_072 // 2  # one byte per element
    assert llama["kv"]["bf16"]["kv_gib_per_128k_sequence"] == 131_072 * 131_072 / GIB == 16.0
    rows = {r[0]: r for r in table_rows(md, "Model")[2:]}
    # Qwen2.5-7B: 28 layers x 4 KV heads x 256 x 2 B = 57,344 B per token, 7.00 GiB per 128K (SPEC: 56 KiB / 7.00).
    # Columns per KV dtype: kv_bytes_per_token, kv_bytes_per_token_full (equal: every layer is full), 128K GiB.
    assert rows["Qwen2.5-7B"] == ["Qwen2.5-7B", "bf16", "15.20", "131,072", "57,344", "57,344", "7.00",
                                  "28,672", "28,672", "3.50"]
    assert rows["Llama-3.1-8B"][4:] == ["131,072", "131,072", "16.00", "65,536", "65,536", "8.00"]


def test_context_sweep_is_one_question_to_the_capacity_view(small, tmp_path, monkeypatch):
    import kvreg.app.capacity

    calls = []
    real = kvreg.app.capacity.ask
    monkeypatch.setattr(kvreg.app.capacity, "ask", lambda conn, q: calls.append(q) or real(conn, q))
    md, data = read(report(small, tmp_path / "r").folder)
    assert len(calls) == 1 and calls[0].tp == "auto" and calls[0].contexts == [8192]  # TP picked at the shortest
    assert len(data["sweep"]) == 2 * 2 * 4  # models x GPUs x contexts (8K, 32K, 128K, 1m)

    # H200, 128K: (141 GiB x 0.88 - 16.1e9 B) / 16 GiB = 6.82 sequences at TP1 (SPEC: 6.8).
    h200 = (H200 * 0.88 - LLAMA8_WEIGHTS) / (LLAMA8_KV_BYTES_PER_TOKEN * 131072)
    # H100, 1m: the row keeps TP1 (picked at 8K), where a sequence needs 131,072 B x 1e6 = 131 GB:
    # (80 GiB x 0.88 - 16.1e9 B) / 1.31072e11 B = 0.45, no fit (TP2 would hold 1.03; the row names its TP).
    h100_1m = (H100 * 0.88 - LLAMA8_WEIGHTS) / (LLAMA8_KV_BYTES_PER_TOKEN * 1_000_000)
    sections = {s.split("\n", 1)[0]: s for s in md.split("\n### ")}
    h100_llama = table_rows(sections["H100-SXM"], "Model")[2:][0]
    h200_llama = table_rows(sections["H200"], "Model")[2:][0]
    assert table_rows(sections["H200"], "Model")[0] == ["Model", "TP", "8K context", "32K context", "128K context",
                                                       "1m context"]
    assert h200_llama[:2] == ["Llama-3.1-8B", "1"] and h200_llama[4] == f"{h200:.2f}" == "6.82"
    assert h100_llama[1] == "1" and h100_llama[5] == f"{h100_1m:.2f} no fit" == "0.45 no fit"


def test_report_and_workbook_ask_one_sweep_question_when_it_is_the_same(small, tmp_path, monkeypatch):
    """Plans on both models and both GPUs: the report's sweep (every model on every GPU, 2 x 2) and the
    workbook's (the models and GPUs plans use) are the same question, asked once; with one plan the
    workbook asks its own (1 model x 1 GPU)."""
    from openpyxl import load_workbook

    import kvreg.app.capacity

    calls = []
    real = kvreg.app.capacity.ask
    monkeypatch.setattr(kvreg.app.capacity, "ask", lambda conn, q: calls.append(q) or real(conn, q))
    with small.begin() as conn:
        add_plan(conn, "a", model="Llama-3.1-8B", gpu="H100-SXM")
    r = report(small, tmp_path / "one", formats=("md", "xlsx"))
    assert [(q.models, q.gpus) for q in calls] == [(["Llama-3.1-8B", "Qwen2.5-7B"], ["H100-SXM", "H200"]),
                                                   (["Llama-3.1-8B"], ["H100-SXM"])]
    calls.clear()
    with small.begin() as conn:
        add_plan(conn, "b", model="Qwen2.5-7B", gpu="H200")
    r = report(small, tmp_path / "both", formats=("md", "xlsx"))
    assert len(calls) == 1
    sweep = load_workbook(r.folder / "capacity.xlsx", read_only=True)["Context sweep"]
    rows = [row[:3] for row in sweep.iter_rows(min_row=3, values_only=True)]  # model, gpu, context_tokens
    assert len(rows) == len(read(r.folder)[1]["sweep"]) == 2 * 2 * 4  # models x GPUs x contexts
    pairs = {(m, g) for m in ("Llama-3.1-8B", "Qwen2.5-7B") for g in ("H100-SXM", "H200")}
    assert {(m, g) for m, g, _ in rows} == pairs


# --------------------------------------------------------------------------- provenance


def test_provenance_hash_revision_and_masked_url(chat_plan, tmp_path):
    from kvreg.report.gather import registry_rows

    url = "postgresql+psycopg://kvadmin:s3cret-pw@db.example/kvreg"
    r = report(chat_plan, tmp_path / "r", registry_url=url)
    md, data = read(r.folder)
    with chat_plan.connect() as conn:
        revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        canonical = json.dumps(registry_rows(conn), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    p = data["provenance"]
    assert p["schema_revision"] == revision
    assert p["registry_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert p["generated_at"] == "2026-11-29T12:00:00Z"
    assert p["registry_url"] == "postgresql+psycopg://kvadmin:***@db.example/kvreg"
    assert "- registry_url: postgresql+psycopg://kvadmin:\\*\\*\\*@db.example/kvreg" in md
    for f in r.files:
        assert b"s3cret-pw" not in (r.folder / f).read_bytes()
    # The hash follows the content: one more user changes it, the sweep's what-ifs (which write nothing) do not.
    assert read(report(chat_plan, tmp_path / "r2").folder)[1]["provenance"]["registry_sha256"] == p["registry_sha256"]
    with chat_plan.begin() as conn:
        conn.execute(text("UPDATE demand SET users = 101 WHERE quarter = '2026Q4'"))
    assert read(report(chat_plan, tmp_path / "r3").folder)[1]["provenance"]["registry_sha256"] != p["registry_sha256"]


def test_same_registry_and_quarter_give_the_same_files(chat_plan, tmp_path):
    a = report(chat_plan, tmp_path / "a", now=NOW)
    b = report(chat_plan, tmp_path / "b", now=NOW + dt.timedelta(hours=5))
    assert a.files == b.files
    for f in a.files:
        left, right = (a.folder / f).read_bytes(), (b.folder / f).read_bytes()
        if f.endswith(".png"):
            assert left == right, f
            continue
        diff = [(x, y) for x, y in zip(left.splitlines(), right.splitlines()) if x != y]
        assert len(left.splitlines()) == len(right.splitlines())
        assert len(diff) == 1 and b"generated_at" in diff[0][0], (f, diff)


# --------------------------------------------------------------------------- quarter over quarter


def test_next_quarter_compares_with_the_previous_report(chat_plan, tmp_path):
    out = tmp_path / "reports"
    first = report(chat_plan, out, quarter="2026Q3")
    assert read(first.folder)[1]["comparison"]["found"] is False
    with chat_plan.begin() as conn:
        copy_model(conn, "Qwen2.5-7B", "Qwen2.5-7B-copy")
        conn.execute(text("DELETE FROM gpu WHERE name = 'H200'"))
        conn.execute(text("UPDATE plan SET reserve = 0.20 WHERE name = 'chat'"))
        add_plan(conn, "batch", model="Qwen2.5-7B")
    md, data = read(report(chat_plan, out).folder)

    cmp = data["comparison"]
    assert cmp["found"] is True and cmp["against"] == "2026-Q3/data.json" and cmp["previous_quarter"] == "2026Q3"
    assert cmp["models"] == {"added": ["Qwen2.5-7B-copy"], "removed": [], "changed": []}
    assert cmp["gpus"] == {"added": [], "removed": ["H200"], "changed": []}
    assert cmp["plans"]["added"] == ["batch"] and cmp["plans"]["removed"] == []
    changed = cmp["plans"]["changed"][0]
    assert changed["name"] == "chat" and {"reserve", "max_concurrency", "usable_gib_per_gpu"} <= set(changed["fields"])

    before = (H100 * 0.88 - LLAMA8_WEIGHTS) / (LLAMA8_KV_BYTES_PER_TOKEN * 131072)  # 3.46 at reserve 0.12
    after = (H100 * 0.80 - LLAMA8_WEIGHTS) / (LLAMA8_KV_BYTES_PER_TOKEN * 131072)  # 3.06 at reserve 0.20
    capacity = cmp["capacity"][0]
    assert capacity["last_report_max_concurrency"] == pytest.approx(before)
    assert capacity["max_concurrency"] == pytest.approx(after)
    assert capacity["max_concurrency_since_last_report"] == pytest.approx(after - before)
    # GPUs to buy: 40 users in the 2026Q3 report (ceil(40 / 3.46) = 12), 100 now (ceil(100 / 3.06) = 33).
    assert math.ceil(40 / before) == 12 and math.ceil(100 / after) == 33
    # Named apart from the quarter-over-quarter change: last_report_x and x_since_last_report. No fleet
    # in either registry, so GPUs to buy are the GPUs needed.
    assert cmp["procurement"] == [{
        "gpu": "H100-SXM", "last_report_gpus_to_buy": 12, "gpus_to_buy": 33, "gpus_to_buy_since_last_report": 21,
        "last_report_gpus_needed": 12, "gpus_needed": 33, "gpus_needed_since_last_report": 21,
        "last_report_cost_per_month": pytest.approx(12 * 2.5 * 730), "cost_per_month": pytest.approx(33 * 2.5 * 730),
        "cost_per_month_since_last_report": pytest.approx(21 * 2.5 * 730),
    }]
    assert "- **Models**: added Qwen2.5-7B-copy" in md
    assert "- **GPUs**: removed H200" in md
    row = next(line for line in md.splitlines() if line.startswith("| H100-SXM | 12 | 33 |"))
    assert row == "| H100-SXM | 12 | 33 | +21 | 12 | 33 | +21 | 21,900.00 | 60,225.00 | +38,325.00 |", row


def test_compare_names_the_quarter(chat_plan, small_url, tmp_path):
    kv = Kvreg(small_url)
    out = tmp_path / "reports"
    report(chat_plan, out, quarter="2026Q2")
    result = kv("report", "--quarter", "2026Q4", "--out", out, "--format", "md", "--compare", "2026Q2")
    assert "2026-Q4" in result.output
    data = json.loads((out / "2026-Q4" / "data.json").read_text())
    assert data["comparison"]["found"] and data["comparison"]["against"] == "2026-Q2/data.json"

    missing = kv("report", "--quarter", "2026Q4", "--out", out, "--format", "md", "--compare", "2025Q1", ok=False)
    assert missing.exit_code == 1
    assert missing.output.count("\n") == 1 and "2025Q1" in missing.output and "--compare" in missing.output
    assert json.loads((out / "2026-Q4" / "data.json").read_text()) == data  # the existing report is untouched


# --------------------------------------------------------------------------- the command and bad input


def test_cli_writes_the_current_quarter_by_default(small_url, tmp_path):
    from kvreg.core.units import current_quarter, quarter_folder

    result = Kvreg(small_url)("report", "--out", tmp_path / "out", "--format", "md")
    folder = tmp_path / "out" / quarter_folder(current_quarter())
    assert result.output.strip() == f"wrote {folder}/: capacity.md, charts/concurrency.png, data.json"
    assert json.loads((folder / "data.json").read_text())["quarter"] == current_quarter()


@pytest.mark.parametrize("args, words", [
    (["--quarter", "2026-13"], ["2026-13", "2026Q4"]),
    (["--quarter", "2026Q5"], ["2026Q5", "Q1 to Q4"]),
    (["--format", "pdf"], ["pdf", "md, xlsx"]),
    (["--format", "md,pdf"], ["pdf"]),
    (["--compare", "last"], ["last", "quarter"]),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, words):
    db = tmp_path / "registry.db"
    result = Kvreg(f"sqlite:///{db}")("report", "--out", tmp_path / "out", *args, ok=False)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
    assert all(w in result.output for w in words), result.output
    assert not (tmp_path / "out").exists() and not db.exists()  # checked before the registry is opened


def test_unwritable_output_folder(small, tmp_path):
    from kvreg.core.errors import KvregError

    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(KvregError, match=r"cannot write reports under .*a-file/reports: Not a directory; choose"):
        report(small, tmp_path / "a-file" / "reports")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_run_leaves_the_previous_report(chat_plan, tmp_path, monkeypatch, failure):
    import kvreg.export.charts
    from kvreg.core.errors import KvregError

    out = tmp_path / "reports"
    old = report(chat_plan, out)
    before = _snapshot(old.folder)

    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(kvreg.export.charts, "write_charts", broken)
    expected = KeyboardInterrupt if isinstance(failure, KeyboardInterrupt) else KvregError
    with pytest.raises(expected) as exc:
        report(chat_plan, out, now=NOW + dt.timedelta(days=1))
    if expected is KvregError:
        assert "No space left on device; the previous report was left as it was" in str(exc.value)
    assert _snapshot(old.folder) == before
    assert sorted(p.name for p in out.iterdir()) == ["2026-Q4"]  # no temporary folder left behind


def test_a_failed_swap_puts_the_previous_report_back(chat_plan, tmp_path, monkeypatch):
    import kvreg.report.publish
    from kvreg.core.errors import KvregError

    out = tmp_path / "reports"
    old = report(chat_plan, out)
    before = _snapshot(old.folder)
    real = os.rename
    calls = []

    def rename(src, dst):
        calls.append(Path(dst).name)
        if len(calls) == 2:  # the old report has moved away; moving the new one in fails
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(kvreg.report.publish, "_exchange", lambda a, b: False)  # the two-rename way, as off Linux
    monkeypatch.setattr(kvreg.report.publish.os, "rename", rename)
    with pytest.raises(KvregError, match="Input/output error"):
        report(chat_plan, out)
    assert _snapshot(old.folder) == before
    assert sorted(p.name for p in out.iterdir()) == ["2026-Q4"]


# --------------------------------------------------------------------------- engines and the seeded registry


def _normalised(md: str) -> str:
    """The report without what differs between runs and machines: the time and the registry's location."""
    md = re.sub(r"(?m)^- generated_at: .*$", "- generated_at: <generated-at>", md)
    return re.sub(r"(?m)^- registry_url: .*$", "- registry_url: <registry-url>", md)


def test_postgresql_gives_the_same_report(pg_url, tmp_path):
    """The seeded registry on PostgreSQL prints what it prints on SQLite (ordering, sums, types)."""
    from kvreg.app.access import open_registry

    texts = []
    for url in (pg_url, f"sqlite:///{tmp_path / 'registry.db'}"):
        eng = open_registry(url)
        try:
            with eng.begin() as conn:  # every model (names sort differently by collation) on the plans' GPUs
                conn.execute(text("DELETE FROM gpu WHERE id NOT IN (SELECT gpu_id FROM plan)"))
            texts.append(_normalised(read(report(eng, tmp_path / url.split(":")[0]).folder)[0]))
        finally:
            eng.dispose()
    assert texts[0] == texts[1]


def test_seeded_registry_snapshot(tmp_path):
    """The seeded registry's 2026Q4 report, reviewed when it changes (see the module docstring)."""
    from kvreg.app.access import open_registry

    eng = open_registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        md = _normalised(read(report(eng, tmp_path / "reports").folder)[0])
    finally:
        eng.dispose()
    if os.environ.get("KVREG_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(md, encoding="utf-8")
    assert SNAPSHOT.exists(), "tests/snapshots/capacity.md is missing: KVREG_UPDATE_SNAPSHOTS=1 pytest -k snapshot"
    assert md == SNAPSHOT.read_text(encoding="utf-8"), (
        "the seeded report changed: review the difference, then regenerate tests/snapshots/capacity.md with "
        "KVREG_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_report_md.py -k snapshot"
    )


def test_sweep_covers_only_the_models_and_gpus_plans_use_in_a_large_registry(engine):
    """24 catalog models + 20 more on 10 GPUs is 440 pairs, above SWEEP_MAX_PAIRS (400): the sweep
    then asks only about what plans use, 4 contexts each, and says so."""
    from sqlalchemy import text

    from kvreg.app.capacity import SWEEP_MAX_PAIRS
    from kvreg.app.registry import add_model
    from kvreg.report.gather import SWEEP_CONTEXTS, gather

    with engine.begin() as conn:
        for i in range(20):
            add_model(conn, dict(name=f"synthetic-{i:02d}", layers=32, kv_heads=8, attention_heads=32, head_dim=128,
                                 params_total=8_000_000_000, max_position_embeddings=131072, weight_dtype="bf16"))
        n_models = conn.execute(text("SELECT COUNT(*) FROM model")).scalar_one()
        n_gpus = conn.execute(text("SELECT COUNT(*) FROM gpu")).scalar_one()
        assert n_models * n_gpus > SWEEP_MAX_PAIRS
        used = conn.execute(text("SELECT DISTINCT m.name, g.name FROM plan p JOIN model m ON m.id = p.model_id "
                                 "JOIN gpu g ON g.id = p.gpu_id")).all()
        data = gather(conn, "2026Q4", generated_at="2026-11-29T00:00:00Z", registry_url="sqlite://")
    models, gpus = {m for m, _ in used}, {g for _, g in used}
    assert {r["model"] for r in data["sweep"]} == models
    assert {r["gpu"] for r in data["sweep"]} == gpus
    assert len(data["sweep"]) == len(models) * len(gpus) * len(SWEEP_CONTEXTS)
    assert f"the {len(models)} models and {len(gpus)} GPUs that plans use" in data["settings"]["sweep"]["scope"]


def test_concurrency_chart_shows_every_plan_gpu_and_only_drawn_lines(tmp_path):
    """A sweep of 6 GPUs (G0-G5) x 10 models (m0-m9); plans run m3 on G5 and m9 on G2. Panels: G2 and
    G5 (every GPU a plan uses, even G5, which sorts after four others), then G0 and G1 (the others by
    name, up to 4 panels). On G2 the plans' models come first. m7's weights fit nowhere (max
    concurrency 0 at every context): no line and no legend entry, named under "Weights do not fit".
    m1 and m2 have the same figures everywhere (the same KV layout): one line named after both, so
    no line hides another. m0 on G0 has a 0 at 1m: its line has the three points that are drawn."""
    from kvreg.export.charts import MAX_LINES, concurrency_chart, concurrency_lines

    contexts = [8192, 32768, 131072, 1_000_000]

    def conc(g, m, c):
        if m == 7 or (g, m, c) == (0, 0, 1_000_000):
            return 0.0
        return 1000 * (1 + (1 if m == 2 else m) + g) / c  # m2 draws exactly what m1 draws

    sweep = [{"gpu": f"G{g}", "model": f"m{m}", "context_tokens": c, "max_concurrency": conc(g, m, c), "tp": 1}
             for g in range(6) for m in range(10) for c in contexts]
    plans = [{"model": "m3", "gpu": "G5"}, {"model": "m9", "gpu": "G2"}]
    panels = concurrency_lines(sweep, plans)
    assert [p["gpu"] for p in panels] == ["G2", "G5", "G0", "G1"]
    g2 = panels[0]
    assert [line["models"] for line in g2["lines"]] == [["m3"], ["m9"], ["m0"], ["m1", "m2"], ["m4"], ["m5"], ["m6"],
                                                        ["m8"]]
    assert len(g2["lines"]) == MAX_LINES and g2["more"] == [] and g2["not_drawn"] == ["m7"]
    g0 = panels[2]
    m0 = next(line for line in g0["lines"] if line["models"] == ["m0"])
    assert [x for x, _ in m0["points"]] == contexts[:3] and g0["more"] == []

    fig = concurrency_chart(sweep, contexts, tmp_path / "c.png", plans)
    ax = fig.axes[0]
    drawn = ax.get_lines()[1:]  # the first is the dashed one-sequence line
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["m3 (TP 1) *", "m9 (TP 1) *", "m0 (TP 1)", "m1 = m2 (TP 1)", "m4 (TP 1)", "m5 (TP 1)",
                      "m6 (TP 1)", "m8 (TP 1)"]
    assert [line.get_label() for line in drawn] == legend and all(len(line.get_xdata()) == 4 for line in drawn)
    assert list(drawn[0].get_ydata()) == [1000 * (1 + 3 + 2) / c for c in contexts]  # m3 on G2
    # Lines told apart: no two share colour, marker and dash; each is thinner than the one before.
    styles = [(line.get_color(), line.get_marker(), line.get_linestyle()) for line in drawn]
    assert len(set(styles)) == len(styles) and len({s[0] for s in styles}) == len(styles)
    widths = [line.get_linewidth() for line in drawn]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == len(widths)
    assert ax.get_xlabel() == "Context (tokens)"
    assert any(t.get_text() == "Weights do not fit: m7" for t in ax.texts)
    assert [a.get_title() for a in fig.axes if a.get_visible()] == ["G2", "G5", "G0", "G1"]


def test_gpus_needed_chart_and_table_show_every_quarter(small, tmp_path):
    """Demand for 2026Q2 and 2026Q4 only, and none in force in 2026Q3 (the plan's 2026Q3 entry sets
    0 users, which ends it until 2026Q4): the chart and the table under it show 2026Q2 through
    2027Q3 (the report's quarter and the three after it), 2026Q3 marked as needing none; the axis
    is "GPUs needed"; the plan's GPU type is the only series."""
    from kvreg.export.charts import gpus_needed_chart, gpus_needed_series

    with small.begin() as conn:
        add_plan(conn, "chat")
        add_demand(conn, "chat", "2026Q2", 40)
        add_demand(conn, "chat", "2026Q3", 0)
        add_demand(conn, "chat", "2026Q4", 100)
    r = report(small, tmp_path / "reports")
    md, data = read(r.folder)
    quarters = ["2026Q2", "2026Q3", "2026Q4", "2027Q1", "2027Q2", "2027Q3"]
    assert data["procurement_quarters"] == quarters
    chart = gpus_needed_series(data["procurement_by_quarter"], quarters)
    # 40 users / 3.4629 per replica -> 12 GPUs; 100 users -> 29 (test_procurement_summary_and_plan_figures)
    assert chart == {"xlabel": "Quarter", "ylabel": "GPUs needed", "series": {"H100-SXM": [12, 0, 29, 29, 29, 29]},
                     "empty": [1]}
    fig = gpus_needed_chart(data["procurement_by_quarter"], quarters, "2026Q4", tmp_path / "g.png")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "GPUs needed" and [t.get_text() for t in ax.get_xticklabels()] == quarters
    # bar labels (the numbers over the bars; none over a 0) and the one "none needed" note
    assert [t.get_text() for t in ax.texts] == ["12", "", "29", "29", "29", "29", "none\nneeded"]
    assert ax.texts[-1].get_position()[0] == 1  # over 2026Q3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["H100-SXM"]
    rows = table_rows(md, "Quarter")
    assert rows[2:] == [["2026Q2", "12"], ["2026Q3 (none needed)", "0"], ["2026Q4", "29"], ["2027Q1", "29"],
                        ["2027Q2", "29"], ["2027Q3", "29"]]


def test_procurement_table_has_a_grand_total(small, tmp_path):
    """Two GPU types in 2026Q4: chat (Llama-3.1-8B, H100-SXM, 29 GPUs for 100 users, as in
    test_procurement_summary_and_plan_figures) and h200 (Llama-3.1-8B on H200, 10 users). The Total
    row adds each column over both rows as the view gave them; H200 without a unit price has a blank
    purchase cost, which the total leaves out and says so."""
    with small.begin() as conn:
        add_plan(conn, "chat")
        add_demand(conn, "chat", "2026Q4", 100)
        add_plan(conn, "h200", gpu="H200")
        add_demand(conn, "h200", "2026Q4", 10)
        conn.execute(text("UPDATE gpu SET unit_price = NULL WHERE name = 'H200'"))
    r = report(small, tmp_path / "reports")
    md, data = read(r.folder)
    from kvreg.figures.labels import label

    rows = {row[0]: row for row in table_rows(md, label("gpu"))[2:]}
    h100, h200 = data["procurement"]
    assert (h100["gpu"], h200["gpu"]) == ("H100-SXM", "H200")
    assert h200["capex_to_buy"] is None and h100["capex_to_buy"] == 29 * 30_000
    total = data["procurement_total"]
    assert total["gpus_needed"] == 29 + h200["gpus_needed"] and total["users"] == 110
    assert total["capex_to_buy"] == 870_000 and total["unknown"] == {"capex_to_buy": ["H200"]}
    assert total["cost_per_month"] == pytest.approx(h100["cost_per_month"] + h200["cost_per_month"])
    n = 29 + h200["gpus_needed"]
    assert rows["**Total**"][:5] == ["**Total**", f"**{n}**", "**870,000.00**\\*", f"**{n}**", "**0**"]
    assert rows["**Total**"][8] == "**110**"
    assert "\\* leaves out H200 (blank: Purchase cost of the GPUs to buy (USD) unknown)" in md


def test_horizon_table_shows_a_quarter_without_entries(small, tmp_path):
    """chat holds 100 users from 2026Q4 and ends (0 users) in 2027Q2: the horizon (2026Q4-2027Q3)
    keeps 2027Q2 and 2027Q3 as columns, marked (none), with 0 GPUs, instead of leaving them out."""
    with small.begin() as conn:
        add_plan(conn, "chat")
        add_demand(conn, "chat", "2026Q4", 100)
        add_demand(conn, "chat", "2027Q2", 0)
    md, data = read(report(small, tmp_path / "reports").folder)
    rows = table_rows(md, "GPU type | Figure")
    assert rows[0] == ["GPU type", "Figure", "2026Q4", "2027Q1", "2027Q2 (none)", "2027Q3 (none)"]
    assert rows[2] == ["H100-SXM", "GPUs needed (GPUs)", "29", "29", "0", "0"]
    assert "The next 4 quarters" in md
