"""`kvreg apply` and `kvreg export` (kvreg.interchange.sync): a TOML file of models, GPUs and dtypes <-> the registry.

Runs on SQLite and PostgreSQL (the `kv` fixture). Every bad file must leave the registry exactly
as it was: compared with conftest's `state()` fingerprint (SQLite: the file's bytes after folding
the WAL in; PostgreSQL: revision, row counts and content hash).
"""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvreg.interchange.toml_text import toml_string, toml_value

GiB = 2**30

MY_MODEL = """
[[dtype]]
name = "mxfp4"
bytes_per_element = 0.53125  # 4 bits + one 8-bit scale per 32 elements = 4.25 bits = 0.53125 B
kind = "weight"
notes = 'MX "fp4" \\ with scales'

[[gpu]]
name = "H800-PCIe"
vendor = "NVIDIA"
memory_bytes = "80GiB"
memory_bandwidth_bytes_per_s = "2TB"
price_per_hour = 2.0

[[model]]
name = "My-8B"
layers = 32
attention_heads = 32
kv_heads = 8
head_dim = 128
params_b = 8.03
weight_dtype = "mxfp4"
max_position_embeddings = "128K"
notes = "two\\nlines, a tab\\t, a quote \\" and a bell \\u0007"
"""


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


@pytest.fixture
def toml_file(tmp_path):
    def write(text: str, name: str = "registry.toml") -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


# ---------------------------------------------------------------- export


def test_export_writes_every_catalog_row_sorted_by_name(kv):
    data = tomllib.loads(kv("export").stdout)
    assert sorted(data) == ["demand", "dtype", "gpu", "model", "plan"]  # no fleet entered: no [[fleet]]
    # the built-in catalog: 14 dtypes, 37 GPUs, 24 models, 6 example plans with 12 demand entries
    assert [len(data[k]) for k in ("dtype", "gpu", "model", "plan", "demand")] == [14, 37, 24, 6, 12]
    for kind in ("dtype", "gpu", "model", "plan"):
        names = [r["name"] for r in data[kind]]
        assert names == sorted(names)
    h100 = next(g for g in data["gpu"] if g["name"] == "H100-SXM")
    # sizes carry their unit (a bare number is refused on the way back in): 80 x 2^30 = 85,899,345,920 B
    assert (h100["memory_bytes"], h100["memory_bandwidth_bytes_per_s"]) == ("80GiB", "3350GB")
    llama = next(m for m in data["model"] if m["name"] == "Llama-3.1-8B")
    assert (llama["layers"], llama["kv_heads"], llama["head_dim"], llama["params_total"]) == (32, 8, 128, 8_050_000_000)
    nvfp4 = next(d for d in data["dtype"] if d["name"] == "nvfp4")
    assert nvfp4["bytes_per_element"] == 0.5625  # 4 bits + an 8-bit scale per 16 = 4.5 bits
    assert "id" not in llama  # ids are the registry's business, names are the keys


def test_export_omits_nulls(kv):
    data = tomllib.loads(kv("export").stdout)
    llama = next(m for m in data["model"] if m["name"] == "Llama-3.1-8B")
    assert "kv_lora_rank" not in llama and "sliding_window" not in llama


def test_export_out_writes_the_same_text_as_stdout(kv, tmp_path):
    out = tmp_path / "reg.toml"
    kv("export", "--out", out)
    assert out.read_text(encoding="utf-8") == kv("export").stdout


def test_export_out_to_missing_folder_fails_in_one_line(kv, tmp_path):
    kv("init")  # the registry exists: stderr holds the error alone, not the first-run notice
    result = kv("export", "--out", tmp_path / "no" / "such" / "dir.toml", ok=False)
    assert result.exit_code != 0
    assert len(result.stderr.strip().splitlines()) == 1 and "cannot write" in result.stderr


# ---------------------------------------------------------------- apply


def test_apply_adds_rows_with_sizes_tokens_and_billions(kv, toml_file):
    result = kv("apply", toml_file(MY_MODEL))
    assert "+ dtype mxfp4" in result.stdout and "+ gpu H800-PCIe" in result.stdout and "+ model My-8B" in result.stdout
    assert "applied: 3 row(s) written" in result.stdout
    gpu = kv.json("gpu", "show", "H800-PCIe")[0]
    assert gpu["memory_bytes"] == 80 * 2**30 == 85_899_345_920
    assert gpu["memory_bandwidth_bytes_per_s"] == 2 * 10**12
    model = next(m for m in kv.json("model", "list") if m["name"] == "My-8B")
    assert model["params_total"] == 8_030_000_000  # 8.03 * 10^9
    assert model["params_active"] == 8_030_000_000  # dense: active = total
    assert model["max_position_embeddings"] == 131_072  # 128K = 128 * 1024
    assert model["full_layers"] == 32 and model["v_head_dim"] == 128
    assert model["weight_dtype"] == "mxfp4"  # a dtype declared in the same file
    assert model["notes"] == 'two\nlines, a tab\t, a quote " and a bell \x07'


def test_apply_twice_changes_nothing(kv, state, toml_file):
    path = toml_file(MY_MODEL)
    kv("apply", path)
    before = state()
    result = kv("apply", path)
    assert "nothing to do" in result.stdout
    assert "dtype: 0 added, 0 changed, 1 unchanged" in result.stdout
    assert state() == before


def test_dry_run_prints_the_diff_and_writes_nothing(kv, state, toml_file):
    kv("init")
    before = state()
    head, h100 = kv("export").stdout.split('name = "H100-SXM"\n')
    h100 = h100.replace("price_per_hour = 2.5\n", "price_per_hour = 2.25\n", 1)
    text = head + 'name = "H100-SXM"\n' + h100 + MY_MODEL
    result = kv("apply", "--dry-run", toml_file(text))
    lines = result.stdout.splitlines()
    assert "~ gpu H100-SXM" in lines
    assert "    price_per_hour: 2.5 -> 2.25" in lines
    assert "+ model My-8B" in lines
    assert "gpu: 1 added, 1 changed, 36 unchanged" in lines  # H800-PCIe added; 37 catalog GPUs - 1 changed
    assert "model: 1 added, 0 changed, 24 unchanged" in lines
    assert lines[-1] == "dry run: nothing written"
    assert state() == before


def test_apply_updates_a_changed_field(kv, toml_file):
    kv("apply", toml_file(MY_MODEL))
    result = kv("apply", toml_file(MY_MODEL.replace("params_b = 8.03", "params_b = 8")))
    assert "~ model My-8B" in result.stdout
    assert "    params_total: 8030000000 -> 8000000000" in result.stdout
    assert "    params_active: 8030000000 -> 8000000000" in result.stdout
    model = next(m for m in kv.json("model", "list") if m["name"] == "My-8B")
    assert model["params_total"] == 8_000_000_000


def test_a_row_declares_the_whole_row(kv, toml_file):
    """Keys left out mean NULL or the column default, as in the catalog: the file is the truth."""
    result = kv("apply", toml_file('[[gpu]]\nname = "H100-SXM"\nmemory_bytes = "80GiB"\n'))
    assert "    unit_price: 30000.0 -> (none)" in result.stdout
    assert kv.json("gpu", "show", "H100-SXM")[0]["unit_price"] is None


def test_apply_never_deletes_without_prune(kv, toml_file):
    kv("apply", toml_file(MY_MODEL))
    assert len(kv.json("model", "list")) == 25  # 24 catalog models + My-8B


def add_plan(db_url: str, name: str, model_name: str, gpu_name: str) -> None:
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
            conn.execute(insert(Plan).values(name=name, model_id=model_id, gpu_id=gpu_id, kv_dtype="bf16",
                                             weight_dtype="bf16", reserve=0.12, notes=""))
    finally:
        engine.dispose()


def clear_plans(kv, db_url) -> None:
    """A seeded registry without the catalog's example plans, so prune may delete any model."""
    kv("init")
    sql(db_url, "DELETE FROM demand")
    sql(db_url, "DELETE FROM plan")


def test_prune_deletes_undeclared_rows_of_declared_kinds_only(kv, db_url, toml_file):
    clear_plans(kv, db_url)
    dtype_and_model = MY_MODEL.split("[[gpu]]")[0] + "[[model]]" + MY_MODEL.split("[[model]]")[1]
    result = kv("apply", "--prune", toml_file(dtype_and_model))
    assert "- model Llama-3.1-8B" in result.stdout
    assert [m["name"] for m in kv.json("model", "list")] == ["My-8B"]
    assert len(kv.json("gpu", "list")) == 37  # the file has no [[gpu]] tables: GPUs are left alone
    assert len(kv.json("dtype", "list")) == 15  # dtypes are never pruned: 14 + mxfp4


def test_prune_keeps_rows_a_plan_uses(kv, db_url, toml_file):
    clear_plans(kv, db_url)
    add_plan(db_url, "chat", "Llama-3.1-8B", "H100-SXM")
    result = kv("apply", "--prune", toml_file(MY_MODEL))
    assert "  model Llama-3.1-8B kept: used by plan(s) chat" in result.stdout
    assert "  gpu H100-SXM kept: used by plan(s) chat" in result.stdout
    assert sorted(m["name"] for m in kv.json("model", "list")) == ["Llama-3.1-8B", "My-8B"]
    assert sorted(g["name"] for g in kv.json("gpu", "list")) == ["H100-SXM", "H800-PCIe"]


def test_apply_reads_stdin(kv):
    result = kv("apply", "-", input='[[gpu]]\nname = "Tiny"\nmemory_bytes = "24GB"\n')
    assert "+ gpu Tiny" in result.stdout
    assert kv.json("gpu", "show", "Tiny")[0]["memory_bytes"] == 24 * 10**9


def test_round_trip_export_apply_export_is_identical(kv, tmp_path, toml_file):
    """Change a registry in every way apply can, export it, sync a fresh registry to that file,
    export again: the same text. The fresh registry is SQLite, so the PostgreSQL case of this
    test also proves the two engines export identical text."""
    kv("apply", toml_file(MY_MODEL))
    kv("model", "remove", "Kimi-K2")
    kv("apply", toml_file('[[gpu]]\nname = "L40S"\nmemory_bytes = "48GiB"\nnotes = "price\\\\unknown"\n', "l40s.toml"))
    first = kv("export").stdout

    fresh = type(kv)(f"sqlite:///{tmp_path / 'fresh.db'}")  # the same CLI runner, on a new registry
    result = fresh("apply", "--prune", toml_file(first, "exported.toml"))
    assert "- model Kimi-K2" in result.stdout and "~ gpu L40S" in result.stdout
    assert fresh("export").stdout == first
    assert fresh("apply", toml_file(first, "exported.toml")).stdout.splitlines()[-1] == (
        "nothing to do: the registry matches"
    )


# ---------------------------------------------------------------- bad files: one line, nothing written

BAD = [
    ("layers = 32", "layers = 0", "'My-8B': layers must be at least 1, not 0"),
    ("layers = 32", "layers = -4", "'My-8B': layers must be at least 1, not -4"),
    ("attention_heads = 32", "attention_heads = 32.5", "attention_heads must be a whole number, not 32.5"),
    ("kv_heads = 8", "kv_heads = 5", "kv_heads (5) must divide attention_heads (32)"),
    ("layers = 32", "layers = 32\nembedding_matrices = 3", "'My-8B': embedding_matrices must be at most 2, not 3: a"
     " checkpoint holds 2 vocabulary matrices (input embeddings and lm_head) or 1 when tied; give 1 or 2"),
    ("layers = 32", "layers = 32\nexperts = 8", "experts, expert_intermediate_size and moe_layers go together (a"
     " mixture-of-experts layout); give all three, or none for a dense model"),
    ("kv_heads = 8", "kv_head = 8", "unknown key 'kv_head': did you mean kv_heads?"),
    ('weight_dtype = "mxfp4"', 'weight_dtype = "fp5"', "unknown weight dtype 'fp5'"),
    ('memory_bytes = "80GiB"', 'memory_bytes = "80 bananas"', "'H800-PCIe': size '80 bananas' has an unknown unit"),
    ("bytes_per_element = 0.53125", "bytes_per_element = 9", "bytes_per_element must be a number from 0.125 (1 bit) to 8 bytes"),
    ('kind = "weight"', 'kind = "scale"', "kind must be one of kv, weight, both, not 'scale'"),
    ("params_b = 8.03", "params_b = 8.03\nparams_total = 8030000000", "give params_b or params_total, not both"),
    ("params_b = 8.03", "params_b = -1", "params_b must be a positive number of billions"),
    ('notes = "two', 'notes = 5\nsource = "two', "notes must be a string in quotes, not 5"),
    ("price_per_hour = 2.0", "price_per_hour = true", "price_per_hour must be a single number or string, not true"),
    ("layers = 32", "layers = [32]", "layers must be a single number or string, not an array"),
    ('max_position_embeddings = "128K"', 'max_position_embeddings = "lots"', "token count 'lots' is not understood"),
    ('[[model]]\nname = "My-8B"', '[[model]]\nname = "H800-PCIe"\n[[model]]\nname = "H800-PCIe"', "is declared twice"),
    ("[[gpu]]", "[[gpus]]", "unknown table 'gpus': did you mean [[gpu]]?"),
    ("[[gpu]]", "[[gpu]", "is not valid TOML"),
]


def test_bad_file_fails_in_one_line_and_writes_nothing(kv, state, toml_file):
    """Each bad edit of MY_MODEL on its own, against one registry (one registry per case would
    dominate the run time)."""
    kv("init")
    before = state()
    for old, new, message in BAD:
        assert old in MY_MODEL
        result = kv("apply", toml_file(MY_MODEL.replace(old, new, 1)), ok=False)
        assert result.exit_code != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert message in lines[0], (new, lines[0])
        assert "registry.toml" in lines[0]  # names the file ...
        assert state() == before, new  # ... and the dtype and GPU rows before the bad one were rolled back


def test_bad_row_names_its_position_and_name(kv, toml_file):
    text = MY_MODEL + '\n[[model]]\nname = "Broken"\nlayers = 2\nattention_heads = 4\nkv_heads = 3\nhead_dim = 64\n' \
                      'params_b = 1\nmax_position_embeddings = 4096\n'
    result = kv("apply", toml_file(text), ok=False)
    assert result.stderr.strip().endswith(
        "registry.toml: [[model]] #2 'Broken': kv_heads (3) must divide attention_heads (4)"
    )
    assert "My-8B" not in [m["name"] for m in kv.json("model", "list")]  # row #1 was valid, and not written


def test_missing_file_fails_in_one_line(kv, tmp_path):
    result = kv("apply", tmp_path / "nope.toml", ok=False)
    assert result.exit_code != 0
    missing = tmp_path / "nope.toml"
    assert result.stderr.strip().splitlines() == [f"Error: cannot read {missing}: No such file or directory"]


def test_file_that_is_not_utf8_fails_in_one_line(kv, tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('[[gpu]]\nname = "Caf\xe9"\n'.encode("latin-1"))
    result = kv("apply", path, ok=False)
    assert result.stderr.strip().splitlines() == [f"Error: {path} is not UTF-8 text: save it as UTF-8 TOML"]


# ---------------------------------------------------------------- TOML writing


@pytest.mark.parametrize("text, literal", [
    ("plain", '"plain"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("C:\\models", '"C:\\\\models"'),
    ("a\nb\tc\rd", '"a\\nb\\tc\\rd"'),
    ("bell\x07 nul\x00 del\x7f", '"bell\\u0007 nul\\u0000 del\\u007F"'),
    ("µ — 中文", '"µ — 中文"'),
])
def test_toml_string_escapes(text, literal):
    assert toml_string(text) == literal
    assert tomllib.loads(f"x = {literal}")["x"] == text


@pytest.mark.parametrize("value, literal", [(0, "0"), (85_899_345_920, "85899345920"), (0.5625, "0.5625"),
                                            (2.0, "2.0"), (1e-05, "1e-05"), (1e16, "1e+16")])
def test_toml_numbers_read_back_exactly(value, literal):
    assert toml_value(value) == literal
    assert tomllib.loads(f"x = {literal}")["x"] == value


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"])))  # surrogates are not text TOML can hold
def test_any_string_round_trips(text):
    assert tomllib.loads(f"x = {toml_string(text)}")["x"] == text
