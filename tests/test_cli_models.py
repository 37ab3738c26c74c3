"""The model, GPU and dtype commands: happy paths, json/csv output, and every bad input issue 2 lists.

Runs on SQLite and PostgreSQL (the `kv` fixture). A bad input must exit non-zero with exactly
one line on stderr naming the problem, and leave the registry as it was: compared with
conftest's `state()` fingerprint (SQLite: the file's bytes after folding the WAL in;
PostgreSQL: revision, row counts and content hash).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import pytest
from conftest import Kvreg

from conftest import HF_CONFIGS as CONFIG_DIR  # tests/data/hf-configs, vendored with MANIFEST.md

from conftest import CATALOG_CONFIGS as CONFIGS  # noqa: E402  (the configs the catalog was read from)

GiB = 2**30
BF16 = 2  # bytes per element
MY_8B = ["model", "add", "My-8B", "--layers", "32", "--kv-heads", "8", "--attention-heads", "32",
         "--head-dim", "128", "--params-b", "8.03"]


def sql(db_url: str, query: str, **params) -> list[tuple]:
    """Run one statement on the test's registry, whichever engine it is, and commit."""
    from sqlalchemy import text

    from kvreg.db.engine import make_engine

    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(query), params)
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()


def fails_cleanly(kv, state, *args, input=None) -> str:
    """Run a command that must fail: non-zero exit, one line on stderr, registry unchanged. Returns the line."""
    before = state()
    result = kv(*args, input=input, ok=False)
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert state() == before
    return lines[0]


def model(kv, name: str) -> dict:
    return next(m for m in kv.json("model", "list") if m["name"] == name)


def figures_at(kv, name: str, context_tokens: int) -> dict:
    """The first `model show` figures row at one context length (kv_bytes_per_token does not depend on TP)."""
    shown = json.loads(kv("model", "show", name, "--format", "json").stdout)
    return next(f for f in shown["figures"] if f["context_tokens"] == context_tokens)


# ---------------------------------------------------------------- model add


def test_model_add_stores_every_field(kv):
    result = kv(*MY_8B, "--max-context", "128K", "--notes", "test row")
    assert result.stdout.strip() == "added model My-8B"
    m = model(kv, "My-8B")
    assert (m["layers"], m["full_layers"], m["attention_heads"], m["kv_heads"]) == (32, 32, 32, 8)
    assert (m["head_dim"], m["v_head_dim"]) == (128, 128)  # v_head_dim defaults to head_dim
    assert m["params_total"] == m["params_active"] == 8_030_000_000  # 8.03 * 10^9, dense
    assert m["max_position_embeddings"] == 131_072  # 128K = 128 * 1024
    assert (m["weight_dtype"], m["source"], m["notes"]) == ("bf16", "manual", "test row")
    # GQA: 32 layers * 8 KV heads * (128 K + 128 V) * 2 B = 131,072 B per token, as Llama-3.1-8B
    assert figures_at(kv, "My-8B", 131_072)["kv_bytes_per_token"] == 32 * 8 * (128 + 128) * BF16 == 131_072


def test_model_add_mla(kv):
    kv("model", "add", "My-MLA", "--layers", "61", "--attention-heads", "128", "--kv-heads", "128",
       "--head-dim", "192", "--v-head-dim", "128", "--kv-lora-rank", "512", "--qk-rope-head-dim", "64",
       "--params-b", "671", "--active-params-b", "37", "--weight-dtype", "fp8_e4m3")
    m = model(kv, "My-MLA")
    assert (m["kv_lora_rank"], m["qk_rope_head_dim"], m["params_active"]) == (512, 64, 37_000_000_000)
    # MLA: one latent per layer, no K/V factor: 61 * (512 + 64) * 2 B = 70,272 B (SPEC, DeepSeek-V3)
    assert figures_at(kv, "My-MLA", 131_072)["kv_bytes_per_token"] == 61 * (512 + 64) * BF16 == 70_272


def test_model_add_sliding_and_linear_layers(kv):
    kv("model", "add", "My-Hybrid", "--layers", "48", "--attention-heads", "16", "--kv-heads", "2",
       "--head-dim", "256", "--linear-layers", "36", "--linear-state-elements", "548864",
       "--linear-recurrent-elements", "524288", "--linear-state-heads", "16", "--params-b", "80")
    kv("model", "add", "My-SWA", "--layers", "42", "--attention-heads", "16", "--kv-heads", "8",
       "--head-dim", "256", "--sliding-layers", "21", "--sliding-window", "4096", "--params-b", "9")
    kv("model", "add", "My-Tied", "--layers", "28", "--attention-heads", "16", "--kv-heads", "8", "--head-dim", "128",
       "--params-b", "0.6", "--vocab-size", "151936", "--hidden-size", "1024", "--tied-embeddings")
    assert model(kv, "My-Tied")["embedding_matrices"] == 1 and model(kv, "My-SWA")["embedding_matrices"] is None
    kv("model", "add", "My-MoE", "--layers", "24", "--attention-heads", "64", "--kv-heads", "8", "--head-dim", "64",
       "--params-b", "20.9", "--experts", "32", "--expert-intermediate-size", "2880", "--moe-layers", "24")
    moe = model(kv, "My-MoE")
    assert (moe["experts"], moe["expert_intermediate_size"], moe["moe_layers"]) == (32, 2_880, 24)
    hybrid, swa = model(kv, "My-Hybrid"), model(kv, "My-SWA")
    assert (hybrid["linear_state_elements_per_layer"], hybrid["linear_recurrent_elements_per_layer"]) == (548_864, 524_288)
    assert (hybrid["full_layers"], hybrid["linear_layers"]) == (12, 36)  # 48 layers - 36 linear = 12 full
    assert (swa["full_layers"], swa["sliding_layers"], swa["sliding_window"]) == (21, 21, 4096)


def test_model_add_mha_when_only_attention_heads_given(kv):
    kv("model", "add", "My-MHA", "--layers", "32", "--attention-heads", "32", "--head-dim", "128", "--params-b", "7")
    assert model(kv, "My-MHA")["kv_heads"] == 32


# ---------------------------------------------------------------- bad input: one line, nothing written

BAD_MODEL_ADD = [
    (["--layers", "0"], "layers must be at least 1, not 0"),
    (["--layers", "-4"], "layers must be at least 1, not -4"),
    (["--layers", "1.5"], "Invalid value for '--layers': '1.5' is not a valid integer"),
    (["--attention-heads", "0"], "attention_heads must be at least 1, not 0"),
    (["--attention-heads", "-32"], "attention_heads must be at least 1, not -32"),
    (["--attention-heads", "32.5"], "Invalid value for '--attention-heads': '32.5' is not a valid integer"),
    (["--kv-heads", "0"], "kv_heads must be at least 1, not 0"),
    (["--kv-heads", "-8"], "kv_heads must be at least 1, not -8"),
    (["--kv-heads", "2.5"], "Invalid value for '--kv-heads': '2.5' is not a valid integer"),
    (["--kv-heads", "5"], "kv_heads (5) must divide attention_heads (32)"),
    (["--kv-heads", "64"], "kv_heads (64) must divide attention_heads (32)"),
    (["--head-dim", "0"], "head_dim must be at least 1, not 0"),
    (["--v-head-dim", "0"], "v_head_dim must be at least 1, not 0"),
    (["--params-b", "0"], "--params-b must be a positive number of billions"),
    (["--params-b", "nan"], "--params-b must be a positive number of billions"),
    (["--weight-dtype", "fp5"], "unknown weight dtype 'fp5'"),
    (["--max-context", "lots"], "token count 'lots' is not understood"),
    (["--sliding-layers", "8"], "has sliding layers but no --sliding-window"),
    (["--kv-lora-rank", "512"], "MLA needs both --kv-lora-rank and --qk-rope-head-dim"),
    (["--linear-recurrent-elements", "64"], "linear_recurrent_elements_per_layer (64 elements) must be at most "
                                            "linear_state_elements_per_layer, which is not given: give "
                                            "--linear-state-elements too, or leave --linear-recurrent-elements out; "
                                            "linear_recurrent_elements_per_layer: of linear_state_elements_per_layer, "
                                            "the recurrent (SSM) state's, the rest being the conv state (left out: not "
                                            "split)"),
    (["--linear-recurrent-elements", "0"], "linear_recurrent_elements_per_layer must be at least 1, not 0"),
    (["--experts", "8", "--expert-intermediate-size", "1024", "--moe-layers", "33"],
     "model 'My-8B': moe_layers (33 layers) must be at most layers (32 layers); moe_layers: layers that carry experts "
     "(left out: dense, or unknown)"),
]


def test_model_add_bad_input(kv, state):
    """Each bad flag on its own, against one registry (creating one per case would dominate the run time)."""
    kv("init")
    for change, message in BAD_MODEL_ADD:
        args = list(MY_8B)
        for flag, value in zip(change[::2], change[1::2]):
            if flag in args:
                args[args.index(flag) + 1] = value
            else:
                args += [flag, value]
        line = fails_cleanly(kv, state, *args)
        assert message in line, (change, line)
    assert "My-8B" not in [m["name"] for m in kv.json("model", "list")]


def test_model_add_duplicate_name(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, *["Llama-3.1-8B" if a == "My-8B" else a for a in MY_8B])
    assert line == "Error: model 'Llama-3.1-8B' already exists: choose another name, or change it with `kvreg apply`"


def test_model_add_missing_required_option(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, "model", "add", "My-8B", "--kv-heads", "8", "--head-dim", "128",
                         "--params-b", "8")
    # CliRunner names the program `cli`; the installed command says `kvreg model add --help`
    assert line.startswith("Error: Missing option '--layers'. (see `") and line.endswith(" model add --help`)")


def test_gpu_add_memory_in_bananas(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, "gpu", "add", "Banana-GPU", "--memory", "80 bananas")
    assert "size '80 bananas' has an unknown unit 'bananas'" in line
    assert "GiB" in line  # says what to type instead


@pytest.mark.parametrize("memory, message", [("0GiB", "must be greater than zero"), ("-80GiB", "is not understood"),
                                             ("lots", "is not understood")])
def test_gpu_add_bad_memory(kv, state, memory, message):
    kv("init")
    assert message in fails_cleanly(kv, state, "gpu", "add", "Bad-GPU", f"--memory={memory}")


def test_gpu_add_duplicate_name(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, "gpu", "add", "H100-SXM", "--memory", "80GiB")
    assert "gpu 'H100-SXM' already exists" in line


def test_db_url_that_cannot_be_opened():
    bad = Kvreg("sqlite:////nonexistent/dir/x.db")
    result = bad(*MY_8B, ok=False)
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [
        "Error: cannot open registry '/nonexistent/dir/x.db': folder '/nonexistent/dir' does not exist"
    ]
    assert not Path("/nonexistent").exists()


def test_db_url_with_unknown_scheme():
    result = Kvreg("mongodb://localhost/kvreg")("model", "list", ok=False)
    assert result.exit_code != 0
    assert len(result.stderr.strip().splitlines()) == 1 and "not supported" in result.stderr


@pytest.mark.parametrize("args", [MY_8B, ["model", "list"], ["gpu", "add", "X", "--memory", "8GB"]],
                         ids=["model add", "model list", "gpu add"])
def test_registry_newer_than_kvreg(kv, state, db_url, args):
    kv("init")
    sql(db_url, "UPDATE alembic_version SET version_num = 'ffff'")  # as a newer kvreg would leave it
    line = fails_cleanly(kv, state, *args)
    assert "is at schema revision ffff, newer than this kvreg knows" in line
    assert "upgrade kvreg" in line
    assert sql(db_url, "SELECT version_num FROM alembic_version") == [("ffff",)]


# ---------------------------------------------------------------- list / show / remove, json and csv


def test_model_list_json_keys_are_column_names_and_csv_agrees(kv):
    rows = kv.json("model", "list")
    assert len(rows) == 24  # the built-in catalog
    from kvreg.db.tables import MODEL_FIELDS

    assert all(list(r) == ["id", *MODEL_FIELDS] for r in rows)
    parsed = list(csv.DictReader(io.StringIO(kv("model", "list", "--format", "csv").stdout)))
    assert [r["name"] for r in parsed] == [r["name"] for r in rows]
    assert all(p["params_total"] == str(r["params_total"]) for p, r in zip(parsed, rows))
    assert all(p["kv_lora_rank"] == ("" if r["kv_lora_rank"] is None else str(r["kv_lora_rank"]))
               for p, r in zip(parsed, rows))


def test_model_list_table_has_a_header(kv):
    lines = kv("model", "list").stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "family", "layers"]
    assert len(lines) == 2 + 24  # header, rule, one line per model


def test_model_show_json(kv):
    shown = json.loads(kv("model", "show", "Llama-3.1-8B", "--format", "json").stdout)
    assert shown["model"]["kv_heads"] == 8 and "id" not in shown["model"]
    at_128k = next(f for f in shown["figures"] if f["context_tokens"] == 131_072 and f["tp"] == 1)
    # 32 layers * 8 heads * (128 + 128) * 2 B = 131,072 B per token; * 131,072 tokens = 16 GiB
    assert at_128k["kv_bytes_per_token"] == 131_072
    assert at_128k["kv_gib_per_sequence_per_gpu"] == 131_072 * 131_072 / GiB == 16.0


def test_model_show_unknown_suggests(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, "model", "show", "Lama-3.1-8B")
    assert line.startswith("Error: unknown model 'Lama-3.1-8B': did you mean Llama-3.1-8B")


def test_model_remove(kv):
    kv(*MY_8B)
    assert kv("model", "remove", "My-8B").stdout.strip() == "removed model My-8B"
    assert "My-8B" not in [m["name"] for m in kv.json("model", "list")]


def add_plan(db_url: str, model_name: str, gpu_name: str) -> None:
    """A plan row written straight to the table (column defaults for the rest), so these tests
    do not depend on `kvreg plan`."""
    from sqlalchemy import insert, select

    from kvreg.db.engine import make_engine
    from kvreg.db.tables import Gpu, Model, Plan

    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            model_id = conn.execute(select(Model.id).where(Model.name == model_name)).scalar_one()
            gpu_id = conn.execute(select(Gpu.id).where(Gpu.name == gpu_name)).scalar_one()
            conn.execute(insert(Plan).values(name="test-plan", model_id=model_id, gpu_id=gpu_id, kv_dtype="bf16",
                                             weight_dtype="bf16", reserve=0.12, notes=""))
    finally:
        engine.dispose()


def test_remove_refuses_what_a_plan_uses(kv, state, db_url):
    kv(*MY_8B)
    kv("gpu", "add", "My-GPU", "--memory", "80GiB")
    add_plan(db_url, "My-8B", "My-GPU")
    assert "model 'My-8B' is used by plan(s) test-plan" in fails_cleanly(kv, state, "model", "remove", "My-8B")
    assert "gpu 'My-GPU' is used by plan(s) test-plan" in fails_cleanly(kv, state, "gpu", "remove", "My-GPU")


def test_remove_unknown(kv, state):
    kv("init")
    assert "unknown model 'No-Such-Model'" in fails_cleanly(kv, state, "model", "remove", "No-Such-Model")
    assert "unknown gpu 'No-Such-GPU'" in fails_cleanly(kv, state, "gpu", "remove", "No-Such-GPU")


def test_gpu_add_list_show_remove(kv):
    assert kv("gpu", "add", "H800-PCIe", "--memory", "80GiB", "--bandwidth", "2TB", "--vendor", "NVIDIA",
              "--price-per-hour", "2.0", "--unit-price", "25000").stdout.splitlines()[0] == "added gpu H800-PCIe"
    kv("gpu", "add", "Small", "--memory", "24GB")
    shown = kv.json("gpu", "show", "H800-PCIe")[0]
    assert shown["memory_bytes"] == 80 * GiB == 85_899_345_920
    assert shown["memory_gib"] == 80.0
    assert shown["memory_bandwidth_bytes_per_s"] == 2 * 10**12
    assert (shown["price_per_hour"], shown["unit_price"]) == (2.0, 25000.0)
    small = kv.json("gpu", "show", "Small")[0]
    assert small["memory_bytes"] == 24 * 10**9  # GB is decimal
    assert small["memory_gib"] == 24e9 / GiB
    assert len(kv.json("gpu", "list")) == 39  # 37 built in + 2
    kv("gpu", "remove", "Small")
    assert "Small" not in [g["name"] for g in kv.json("gpu", "list")]


def test_gpu_list_csv_and_json_agree(kv):
    from kvreg.cli.gpus import GPU_COLUMNS

    rows = kv.json("gpu", "list")
    assert all(list(r) == GPU_COLUMNS for r in rows)
    h100 = next(r for r in rows if r["name"] == "H100-SXM")
    assert (h100["memory_bytes"], h100["memory_gib"]) == (85_899_345_920, 80.0)
    parsed = list(csv.DictReader(io.StringIO(kv("gpu", "list", "--format", "csv").stdout)))
    assert list(parsed[0]) == GPU_COLUMNS
    assert [p["name"] for p in parsed] == [r["name"] for r in rows]
    assert next(p for p in parsed if p["name"] == "H100-SXM")["memory_bytes"] == "85899345920"


def test_bad_format_is_one_line(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, "gpu", "list", "--format", "xml")
    assert "'xml' is not one of 'table', 'json', 'csv'" in line


# ---------------------------------------------------------------- dtypes


def test_dtype_list_exact_bytes(kv):
    rows = {d["name"]: d for d in kv.json("dtype", "list")}
    assert len(rows) == 14
    assert (rows["int4"]["bytes_per_element"], rows["nvfp4"]["bytes_per_element"]) == (0.5, 0.5625)
    assert rows["fp8_ds_mla"]["mla_bytes_per_token_per_layer"] == 656  # 512 + 4*4 + 64*2
    parsed = list(csv.DictReader(io.StringIO(kv("dtype", "list", "--format", "csv").stdout)))
    assert list(parsed[0]) == ["name", "bytes_per_element", "kind", "mla_bytes_per_token_per_layer",
                               "scale_bytes_per_token_per_head", "notes"]


def test_dtype_add_then_use_it(kv):
    kv("dtype", "add", "fp6", "--bytes-per-element", "0.75", "--kind", "kv")
    assert next(d for d in kv.json("dtype", "list") if d["name"] == "fp6")["bytes_per_element"] == 0.75
    rows = kv.json("capacity", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "128K", "--kv-dtype", "fp6")
    # 32 layers * 8 heads * (128 + 128) * 0.75 B = 49,152 B per token
    assert rows[0]["kv_bytes_per_token"] == 32 * 8 * 256 * 0.75 == 49_152


@pytest.mark.parametrize("args, message", [
    (["fp6", "--bytes-per-element", "0"], "--bytes-per-element must be a number from 0.125 (1 bit) to 8 bytes"),
    (["fp6", "--bytes-per-element", "16"], "--bytes-per-element must be a number from 0.125 (1 bit) to 8 bytes"),
    (["fp8", "--bytes-per-element", "1"], "dtype 'fp8' already exists"),
    (["fp6", "--bytes-per-element", "0.75", "--kind", "scale"], "'scale' is not one of 'kv', 'weight', 'both'"),
])
def test_dtype_add_bad_input(kv, state, args, message):
    kv("init")
    assert message in fails_cleanly(kv, state, "dtype", "add", *args)


# ---------------------------------------------------------------- model import


def test_import_every_shared_config_in_one_call(kv):
    """Every file in tests/data/hf-configs, one command, one transaction. Most names are built in
    already, so --replace updates those rows from the configs."""
    rows = kv.json("model", "import", *CONFIGS, "--replace")
    assert len(rows) == len(CONFIGS) == 17
    models = {m["name"]: m for m in kv.json("model", "list")}
    for row in rows:
        assert models[row["name"]]["source"] == row["source"]
    by_source = {m["source"]: m for m in models.values()}
    for path in CONFIGS:  # provenance: the file name and the sha256 of its bytes
        assert by_source[path.name]["source_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    ds = by_source["deepseek-ai__DeepSeek-V3.json"]
    assert (ds["layers"], ds["kv_lora_rank"], ds["qk_rope_head_dim"], ds["weight_dtype"]) == (61, 512, 64, "fp8_e4m3")
    oss = by_source["openai__gpt-oss-120b.json"]
    assert (oss["full_layers"], oss["sliding_layers"], oss["sliding_window"]) == (18, 18, 128)
    # tie_word_embeddings false in Llama's and gpt-oss's configs; Gemma 2's leaves it out and its class ties
    assert [by_source[f]["embedding_matrices"] for f in ("meta-llama__Llama-3.1-8B.json", "openai__gpt-oss-120b.json",
                                                         "google__gemma-2-9b-it.json")] == [2, 2, 1]
    nxt = by_source["Qwen__Qwen3-Next-80B-A3B-Thinking.json"]
    # (2*16*128 + 32*128) * (4-1) conv + 32*128*128 recurrent = 548,864 elements per linear layer
    assert (nxt["full_layers"], nxt["linear_layers"], nxt["linear_state_elements_per_layer"]) == (12, 36, 548_864)
    glm = by_source["THUDM__chatglm3-6b-128k.json"]
    assert (glm["layers"], glm["kv_heads"], glm["head_dim"]) == (28, 2, 128)  # multi_query_group_num, kv_channels


def test_import_under_new_name(kv):
    path = CONFIG_DIR / "meta-llama__Llama-3.1-8B.json"
    rows = kv.json("model", "import", path, "--name", "My-Llama", "--params-b", "8.03")
    assert [r["name"] for r in rows] == ["My-Llama"]
    m = model(kv, "My-Llama")
    assert (m["layers"], m["kv_heads"], m["head_dim"], m["params_total"]) == (32, 8, 128, 8_030_000_000)
    assert m["source"] == path.name


def test_import_from_stdin(kv):
    path = CONFIG_DIR / "Qwen__Qwen2.5-7B.json"
    kv("model", "import", "-", "--name", "Piped-Qwen", "--params-b", "7.6", input=path.read_bytes())
    m = model(kv, "Piped-Qwen")
    assert (m["layers"], m["kv_heads"], m["sliding_layers"], m["source"]) == (28, 4, 0, "stdin")


def test_import_batch_with_an_existing_name_writes_nothing(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, "model", "import", *CONFIGS)  # without --replace: names already exist
    assert "already exists" in line


def test_import_batch_with_a_bad_file_writes_nothing(kv, state, tmp_path):
    """The good files come first; the last one is not JSON. --replace would change the built-in
    rows (estimated params_total differ from the catalog's), so an unchanged dump proves none was written."""
    kv("init")
    broken = tmp_path / "broken.json"
    broken.write_text("{ this is not json", encoding="utf-8")
    line = fails_cleanly(kv, state, "model", "import", *CONFIGS, broken, "--replace")
    assert "broken.json" in line


def test_import_missing_path(kv, state, tmp_path):
    kv("init")
    assert "nope.json" in fails_cleanly(kv, state, "model", "import", tmp_path / "nope.json")


def test_import_replace_warns_once_per_batch_and_not_for_counts_it_kept(kv):
    """Every vendored config imported with --replace into the seeded registry: one warning line per
    kind for the whole batch (46 lines before, one per model and count). Models the catalog already
    holds keep their published parameter counts (the config has no index: its count would be an
    estimate), so no ESTIMATE names them; models new to the registry store the estimate and are
    named in it, each once, with its estimate."""
    from kvreg.interchange.hf.row import import_path

    paths = sorted(CONFIG_DIR.glob("*.json"))
    before = {m["name"] for m in kv.json("model", "list")}
    result = kv("model", "import", *paths, "--replace", "--format", "json")
    written = [r["name"] for r in json.loads(result.stdout)]  # in the order of the paths
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    estimated_total = [line for line in warnings if line.startswith("warning: params_total is an ESTIMATE")]
    assert len(estimated_total) == 1 and len(warnings) == len({w.split(" for ")[0] for w in warnings})
    # Which models the ESTIMATE names: those new to the registry whose config gives no count.
    new_estimated = []
    for p, name in zip(paths, written, strict=True):
        row, warns = import_path(p)  # an updated model may be matched by its repository, under another name
        if name not in before and any(w.startswith("params_total") and "ESTIMATE" in w for w in warns):
            new_estimated.append(f"{name} {row['params_total'] / 1e9:.2f}B")
    named = estimated_total[0].split(" models: ")[1].split("; pass --params-b")[0].split(", ")
    assert sorted(named) == sorted(new_estimated) and len(named) >= 5
    named_models = {n.rsplit(" ", 1)[0] for n in named}  # "name 7.62B" -> "name"
    assert not named_models & {"Qwen2.5-72B", "Llama-3.1-8B", "DeepSeek-V3"}  # kept
    assert "warning: falcon-40b, falcon-7b-instruct: config has no max_position_embeddings" in result.stderr
    updated = [line for line in result.stderr.splitlines() if line.startswith("updated ")]
    assert len(updated) == 1 and "'Qwen2.5-72B'" in updated[0]
