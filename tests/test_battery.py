"""The bad-input battery: every command, fed what a user (or an attacker) might type.

Each case must end with a non-zero exit, exactly one line on stderr that names the problem,
nothing on stdout, no traceback, and the registry exactly as it was (SQLite: the file's bytes;
PostgreSQL: the revision, row counts and content hash, see conftest.registry_state). One
registry per engine serves every case: a case that wrote anything fails, so sharing is safe.

The cases gather the bad inputs named in issues 2-6. Inputs that are odd but valid (a model
named like an SQL injection) are accepted, and tested below the battery for round-tripping.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import Kvreg, registry_state

LONG = "m" * 10_000
SQLISH = "x'); DROP TABLE model;--"

# A config that imports cleanly (test_base_config_is_valid); each bad config changes one thing.
BASE_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "vocab_size": 128256, "torch_dtype": "bfloat16",
}


DROP = object()  # _config(key=DROP) leaves the key out


def _config(**changes) -> str:
    cfg = {**BASE_CONFIG, **changes}
    return json.dumps({k: v for k, v in cfg.items() if v is not DROP}, allow_nan=True)

# file name -> content (str or bytes); written once per module into the inputs folder.
FILES = {
    "base.json": _config(),
    "not-json.json": '{"num_hidden_layers": 32,',
    "no-layers.json": _config(num_hidden_layers=DROP),
    "no-heads.json": _config(num_attention_heads=DROP, num_key_value_heads=DROP),
    "zero-layers.json": _config(num_hidden_layers=0),
    "negative-layers.json": _config(num_hidden_layers=-4),
    "fractional-layers.json": _config(num_hidden_layers=31.5),
    "zero-heads.json": _config(num_attention_heads=0),
    "negative-kv-heads.json": _config(num_key_value_heads=-8),
    "fractional-heads.json": _config(num_attention_heads=32.5),
    "hidden-not-divisible.json": _config(hidden_size=4000, num_attention_heads=48, num_key_value_heads=8),
    "kv-not-dividing.json": _config(num_key_value_heads=5),
    "huge-layers.json": _config(num_hidden_layers=1e308),
    "int32-layers.json": _config(num_hidden_layers=3_000_000_000),
    "nan-layers.json": _config(num_hidden_layers=float("nan")),
    "inf-heads.json": _config(num_attention_heads=float("inf")),
    "string-layers.json": _config(num_hidden_layers="32"),
    "empty.json": "",
    "blank.json": "  \n\t\n",
    "list.json": json.dumps([BASE_CONFIG]),
    "string.json": json.dumps("config"),
    "null.json": "null",
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "deep-object.json": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "deep-inside.json": _config()[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "not-utf8.json": b'{"num_hidden_layers": 32, "architectures": ["\xff\xfe"]}',
    "empty.toml": "",
    "not-toml.toml": "[[model]\nname = 'x'",
    "unknown-table.toml": "[[modle]]\nname = 'x'\n",
    "unknown-key.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = '80GiB'\nmemroy = 1\n",
    "twice.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = '80GiB'\n[[gpu]]\nname = 'g'\nmemory_bytes = '80GiB'\n",
    "bananas.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = '80 bananas'\n",
    "nan.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = '80GiB'\nprice_per_hour = nan\n",
    "inf-memory.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = inf\n",
    "bare-memory.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = 80\n",
    "bare-memory-text.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = '80'\n",
    "huge-memory.toml": f"[[gpu]]\nname = 'g'\nmemory_bytes = '{2**63 - 1}B'\n",
    "long-name.toml": f"[[gpu]]\nname = '{LONG}'\nmemory_bytes = '80GiB'\n",
    "nul-name.toml": '[[gpu]]\nname = "a\\u0000b"\nmemory_bytes = "80GiB"\n',
    "nul-notes.toml": '[[gpu]]\nname = "g"\nmemory_bytes = "80GiB"\nnotes = "a\\u0000b"\n',
    "model-1e308.toml": ("[[model]]\nname = 'm'\nlayers = 1e308\nattention_heads = 32\nkv_heads = 8\nhead_dim = 128\n"
                         "params_b = 8\nmax_position_embeddings = '128K'\n"),
    "model-3e9.toml": ("[[model]]\nname = 'm'\nlayers = 3000000000\nfull_layers = 3000000000\nattention_heads = 32\n"
                       "kv_heads = 8\nhead_dim = 128\nparams_b = 8\nmax_position_embeddings = '128K'\n"),
    "model-kv.toml": ("[[model]]\nname = 'm'\nlayers = 32\nattention_heads = 32\nkv_heads = 5\nhead_dim = 128\n"
                      "params_b = 8\nmax_position_embeddings = '128K'\n"),
    "model-dtype.toml": ("[[model]]\nname = 'm'\nlayers = 32\nattention_heads = 32\nkv_heads = 8\nhead_dim = 128\n"
                         "params_b = 8\nmax_position_embeddings = '128K'\nweight_dtype = 'fp7'\n"),
    # issue 21: limits on structure, names that display other than they are, sizes out of range
    "deep.toml": "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "long-key.toml": "[" + ".".join(["a"] * 50_000) + "]\nx = 1\n",
    "bidi.toml": '[[gpu]]\nname = "H100\u202eMXS"\nmemory_bytes = "80GiB"\n',
    "tiny-dtype.toml": "[[dtype]]\nname = 'tiny'\nbytes_per_element = 1e-320\n",
    "sliding-40.toml": ("[[model]]\nname = 'm'\nlayers = 32\nsliding_layers = 40\nsliding_window = 4096\n"
                        "attention_heads = 32\nkv_heads = 8\nhead_dim = 128\nparams_b = 8\n"
                        "max_position_embeddings = '128K'\n"),
    "prev/2026-Q3/data.json": '{"format": "kvreg-report/1", "models": [1, 2]}',
    "deep-prev/2026-Q3/data.json": '{"format": "kvreg-report/1", "models": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "good-then-bad.toml": ("[[gpu]]\nname = 'fine'\nmemory_bytes = '80GiB'\n"
                           "[[gpu]]\nname = 'broken'\nmemory_bytes = '-80GiB'\n"),
    # issue 45 (round 3): values past a declared bound, numbers Python would read but nobody else does
    "price-1e308.toml": "[[gpu]]\nname = 'g'\nmemory_bytes = '80GiB'\nprice_per_hour = 1e308\n",
    "plan-400-digit-context.toml": ("[[plan]]\nname = 'p'\nmodel = 'Llama-3-8B'\ngpu = 'H100-SXM'\n"
                                    f"context_tokens = {'9' * 400}\n"),
    "demand-quarter-twice.toml": ("[[demand]]\nplan = 'chat-llama3-8b'\nquarter = '2027Q2'\nusers = 5\n"
                                  "[[demand]]\nplan = 'chat-llama3-8b'\nquarter = '2027-Q2'\nusers = 6\n"),
    "demand-underscore.csv": "plan,quarter,users\nchat-llama3-8b,2027Q1,1_000\n",
    "demand-arabic-indic.csv": "plan,quarter,users\nchat-llama3-8b,2027Q1,\u0661\u0660\u0660\n",
    "demand-long-field.csv": "plan,quarter,users\nchat-llama3-8b,2027Q1,\"" + "1" * 200_000 + "\"\n",
    "fleet-price-1e308.csv": "gpu,quarter,gpus_owned,gpus_reserved,reserved_price_per_hour\nH100-SXM,2026Q4,1,1,1e308\n",
    # numbers no engine or config prints: a 5,000-digit int (Python refuses to convert past 4,300), a 400-digit one
    "huge-int.json": '{"num_hidden_layers": ' + "9" * 5000 + "}",
    "huge-int.toml": "[[model]]\nname = \"x\"\nlayers = " + "9" * 5000 + "\n",
    "huge-number.log": "INFO 11-28 15:28:09 [kv_cache_utils.py:1229] GPU KV cache size: " + "9" * 400 + " tokens\n",
    # a release written as a TOML number: 0.10 would be read as 0.1, another release
    "engine-version-number.toml": ('[[plan]]\nname = "ev"\nmodel = "Llama-3.1-8B"\ngpu = "H100-SXM"\nrule = "vllm"\n'
                                   "engine_version = 0.10\n"),
}
BIG_JSON_BYTES = 50 * 2**20


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The folder of bad input files (and a 50 MB config.json, and a regular file to write under)."""
    folder = tmp_path_factory.mktemp("inputs")
    for name, content in FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    big = folder / "big" / "config.json"
    big.parent.mkdir()
    head = _config()[:-1] + ', "padding": "'
    with big.open("w") as fh:  # a valid config, padded past any sane size
        fh.write(head)
        fh.write("x" * (BIG_JSON_BYTES - len(head) - 2))
        fh.write('"}')
    (folder / "a-file").write_text("not a folder\n")
    os.mkfifo(folder / "fifo.toml")  # no writer: opening it would wait for ever
    os.mkfifo(folder / "fifo.csv")
    os.mkfifo(folder / "fifo.log")
    not_utf8 = os.fsencode(folder) + b"/model-\xff"  # a folder name that is not UTF-8
    os.mkdir(not_utf8)
    with open(not_utf8 + b"/config.json", "w") as fh:
        fh.write(_config())
    index = folder / "big-index"  # a valid config beside a 21 MB safetensors index
    index.mkdir()
    (index / "config.json").write_text(_config())
    with (index / "model.safetensors.index.json").open("w") as fh:
        fh.write('{"metadata": {"total_size": 16060522496}, "weight_map": {')
        fh.write(",".join(f'"model.layers.{i}.weight": "model-00001.safetensors"' for i in range(400_000)))
        fh.write("}}")
    (folder / "model-folder").mkdir()  # a folder with no config.json in it
    return folder


@pytest.fixture(scope="module")
def registry(module_db_url):
    """One seeded registry per engine for the whole battery, and its fingerprint: every case
    must leave it exactly so."""
    Kvreg(module_db_url)("init")
    return module_db_url, registry_state(module_db_url)


def case(*args, match: str, stdin: str | bytes | None = None, id: str):
    """kvreg ARGS (with stdin) must fail with one stderr line matching the regular expression `match`."""
    return pytest.param(list(args), match, stdin, id=id)


SQLITE_NOWHERE = "sqlite:////nonexistent-folder/registry.db"
PG_NOWHERE = "postgresql+psycopg://kvreg@127.0.0.1:1/kvreg"

MODEL = ["--layers", "32", "--kv-heads", "8", "--attention-heads", "32", "--head-dim", "128", "--params-b", "8"]
PLAN = ["--model", "Llama-3.1-8B", "--gpu", "H100-SXM"]

CASES = [
    # ---------------------------------------------------------------- the registry URL (issue 2, 6)
    case("--db", SQLITE_NOWHERE, "model", "list",
         match=r"folder .*nonexistent-folder.* does not exist", id="db-folder-missing"),
    case("--db", PG_NOWHERE, "model", "list",
         match=r"cannot open registry .*127\.0\.0\.1:1.*(refused|running)", id="db-pg-unreachable"),
    case("--db", "mysql://u@h/db", "init", match=r"scheme 'mysql' is not supported", id="db-scheme"),
    case("--db", "not a url", "init", match=r"not understood", id="db-garbage"),
    case("db", "upgrade", "zzz9", match=r"cannot upgrade to 'zzz9'", id="db-upgrade-unknown-revision"),
    case("db", "downgrade", "zzz9", match=r"cannot downgrade to 'zzz9'", id="db-downgrade-unknown-revision"),
    case("db", "current", "--format", "xml", match=r"'xml' is not one of", id="db-current-format"),
    case("db", "copy", "--to", "{registry}",
         match=r"--from and --to are the same database", id="db-copy-onto-itself"),
    case("db", "copy", "--to", SQLITE_NOWHERE,
         match=r"folder '/nonexistent-folder' does not exist", id="db-copy-nowhere"),
    # ---------------------------------------------------------------- registries that cannot keep data (issue 21)
    case("--db", "sqlite:///", "gpu", "add", "g", "--memory", "80GiB",
         match=r"'sqlite:///' names no file \(an in-memory database\)", id="db-empty-path"),
    case("--db", "sqlite://", "gpu", "add", "g", "--memory", "80GiB", match=r"names no file", id="db-no-path"),
    case("--db", "sqlite:///:memory:", "gpu", "add", "g", "--memory", "80GiB",
         match=r"names no file .*everything written would be lost", id="db-memory"),
    case("--db", "sqlite:///file:x?mode=memory&uri=true", "plan", "list",
         match=r"names no file", id="db-memory-uri"),
    case("--db", "postgresql+psycopg://u@127.0.0.1:abc/db", "model", "list",
         match=r"is not understood", id="db-port-not-a-number"),
    case("--db", "sqlite:///{tmp}/r.db?timeout=abc", "model", "list",
         match=r"timeout='abc' is not a number of seconds", id="db-timeout-not-a-number"),
    case("--db", "sqlite:///{tmp}/d\udcff/r.db", "db", "current",
         match=r"registry path 'd\\xff/r\.db'|registry path .*d\\xff/r\.db' is not valid UTF-8", id="db-path-not-utf8"),
    case("db", "copy", "--to", "sqlite:///{tmp}/d\udcff.db",
         match=r"d\\xff\.db' is not valid UTF-8", id="db-copy-to-not-utf8"),
    case("db", "downgrade", "0002",
         match=r"to 0002 would drop .*2 workload_class rows: nothing was changed; pass --yes", id="db-downgrade-drops-rows"),
    case("db", "downgrade", "base", match=r"to base would drop .*\d+ model rows.*pass --yes", id="db-downgrade-base"),
    # ---------------------------------------------------------------- model add (issue 2)
    case("model", "add", "m", "--layers", "0", *MODEL[2:],
         match=r"layers must be at least 1, not 0", id="add-zero-layers"),
    case("model", "add", "m", "--layers", "-3", *MODEL[2:],
         match=r"layers must be at least 1, not -3", id="add-negative-layers"),
    case("model", "add", "m", "--layers", "1.5", *MODEL[2:],
         match=r"'1\.5' is not a valid integer", id="add-fractional-layers"),
    case("model", "add", "m", "--layers", "1e308", *MODEL[2:],
         match=r"'1e308' is not a valid integer", id="add-1e308-layers"),
    case("model", "add", "m", "--layers", "3000000000", *MODEL[2:],
         match=r"layers 3,000,000,000 is too large: at most 2,147,483,647", id="add-int32-layers"),
    case("model", "add", "m", "--layers", str(2**63), *MODEL[2:],
         match=r"layers .* too large", id="add-2**63-layers"),
    case("model", "add", "m", *MODEL[:2], "--kv-heads", "0", *MODEL[4:],
         match=r"kv_heads must be at least 1", id="add-zero-kv-heads"),
    case("model", "add", "m", *MODEL[:2], "--kv-heads", "5", *MODEL[4:],
         match=r"kv_heads \(5\) must divide attention_heads \(32\)", id="add-kv-not-dividing"),
    case("model", "add", "m", *MODEL[:8], "--params-b", "inf",
         match=r"--params-b must be a positive number.*inf", id="add-params-inf"),
    case("model", "add", "m", *MODEL[:8], "--params-b", "nan",
         match=r"--params-b must be a positive number.*nan", id="add-params-nan"),
    case("model", "add", "m", *MODEL[:8], "--params-b", "-8",
         match=r"--params-b must be a positive number", id="add-params-negative"),
    case("model", "add", "m", *MODEL, "--active-params-b", "nan",
         match=r"--active-params-b must be a positive", id="add-active-nan"),
    case("model", "add", "m", *MODEL, "--active-params-b", "9",
         match=r"active params exceed total params", id="add-active-above-total"),
    case("model", "add", "Llama-3.1-8B", *MODEL,
         match=r"model 'Llama-3\.1-8B' already exists", id="add-duplicate-model"),
    case("model", "add", "m", *MODEL, "--weight-dtype", "fp7",
         match=r"unknown weight dtype 'fp7'", id="add-unknown-dtype"),
    case("model", "add", "m", *MODEL, "--max-context", "12q",
         match=r"token count '12q' is not understood", id="add-bad-context"),
    case("model", "add", "m", *MODEL, "--max-context", "3000000000",
         match=r"max_position_embeddings .*too large", id="add-int32-context"),
    case("model", "add", "m", *MODEL, "--sliding-layers", "4",
         match=r"sliding layers but no --sliding-window", id="add-sliding-no-window"),
    case("model", "add", "m", *MODEL, "--kv-lora-rank", "512", match=r"MLA needs both", id="add-mla-half"),
    case("model", "add", LONG, *MODEL,
         match=r"model name is 10,000 characters long: at most 200", id="add-long-name"),
    case("model", "add", "a\x00b", *MODEL, match=r"model name .* control characters", id="add-nul-name"),
    case("model", "add", "a\x1b[31mred", *MODEL, match=r"model name .* control characters", id="add-escape-name"),
    case("model", "add", "line\nbreak", *MODEL, match=r"model name .* control characters", id="add-newline-name"),
    case("model", "add", "", *MODEL, match=r"model name must not be empty", id="add-empty-name"),
    case("model", "add", "   ", *MODEL, match=r"model name must not be empty", id="add-blank-name"),
    case("model", "add", "m", *MODEL, "--notes", "a\x00b",
         match=r"notes contains a NUL character \(\\x00\)", id="add-nul-notes"),
    case("model", "add", "m", *MODEL, "--family", "f\x00",
         match=r"family contains a NUL character \(\\x00\)", id="add-nul-family"),
    # ---------------------------------------------------------------- model import (issue 2, 6)
    case("model", "import", "{in}/not-json.json", match=r"not-json\.json: not valid JSON", id="import-not-json"),
    case("model", "import", "{in}/not-json.json", "--name", "", match=r"--name is empty: give the model's name",
         id="import-empty-name"),
    case("model", "import", "{in}/no-layers.json", match=r"no-layers\.json: no layer count", id="import-no-layers"),
    case("model", "import", "{in}/no-heads.json",
         match=r"no-heads\.json: no attention head count", id="import-no-heads"),
    case("model", "import", "{in}/zero-layers.json",
         match=r"num_hidden_layers is 0, it must be positive", id="import-zero-layers"),
    case("model", "import", "{in}/negative-layers.json",
         match=r"num_hidden_layers is -4, it must be positive", id="import-negative-layers"),
    case("model", "import", "{in}/fractional-layers.json",
         match=r"num_hidden_layers is 31\.5, not a whole number", id="import-fractional-layers"),
    case("model", "import", "{in}/zero-heads.json",
         match=r"num_attention_heads is 0, it must be positive", id="import-zero-heads"),
    case("model", "import", "{in}/negative-kv-heads.json",
         match=r"num_key_value_heads is -8, it must be positive", id="import-negative-kv-heads"),
    case("model", "import", "{in}/fractional-heads.json",
         match=r"num_attention_heads is 32\.5, not a whole number", id="import-fractional-heads"),
    case("model", "import", "{in}/hidden-not-divisible.json",
         match=r"hidden_size 4000 is not divisible by 48", id="import-head-dim-inconsistent"),
    case("model", "import", "{in}/kv-not-dividing.json",
         match=r"num_key_value_heads = 5 does not divide the 32", id="import-kv-not-dividing"),
    case("model", "import", "{in}/huge-layers.json",
         match=r"num_hidden_layers is 1e\+308, more than 1,000,000", id="import-1e308-layers"),
    case("model", "import", "{in}/int32-layers.json",
         match=r"num_hidden_layers is 3000000000, more than", id="import-int32-layers"),
    case("model", "import", "{in}/nan-layers.json",
         match=r"num_hidden_layers is nan, not a whole number", id="import-nan-layers"),
    case("model", "import", "{in}/inf-heads.json",
         match=r"num_attention_heads is inf, not a whole number", id="import-inf-heads"),
    case("model", "import", "{in}/string-layers.json",
         match=r'num_hidden_layers is "32", not a whole number', id="import-string-layers"),
    case("model", "import", "{in}/empty.json", match=r"empty\.json: not valid JSON", id="import-empty-file"),
    case("model", "import", "{in}/blank.json", match=r"blank\.json: not valid JSON", id="import-blank-file"),
    case("model", "import", "{in}/list.json",
         match=r"list\.json: JSON is a list, not an object", id="import-json-list"),
    case("model", "import", "{in}/string.json", match=r"JSON is a string, not an object", id="import-json-string"),
    case("model", "import", "{in}/null.json", match=r"JSON is a null, not an object", id="import-json-null"),
    case("model", "import", "{in}/deep.json", match=r"deep\.json: JSON nested too deeply", id="import-deep-list"),
    case("model", "import", "{in}/deep-object.json", match=r"nested too deeply", id="import-deep-object"),
    case("model", "import", "{in}/deep-inside.json", match=r"nested too deeply", id="import-deep-inside-config"),
    case("model", "import", "{in}/not-utf8.json", match=r"not UTF-8", id="import-not-utf8"),
    case("model", "import", "{in}/big/config.json", match=r"larger than 10 MB", id="import-50MB"),
    case("model", "import", "{in}/missing.json", match=r"missing\.json: no such file", id="import-missing-file"),
    case("model", "import", "{in}/model-folder",
         match=r"folder has no config\.json", id="import-folder-without-config"),
    case("model", "import", "/dev/zero", match=r"not a regular file", id="import-dev-zero"),
    case("model", "import", "-", "--name", "m", stdin="", match=r"stdin: not valid JSON", id="import-empty-stdin"),
    case("model", "import", "-", stdin=_config(), match=r"needs --name", id="import-stdin-without-name"),
    case("model", "import", "{in}/base.json", "--name", LONG,
         match=r"model name is 10,000 characters", id="import-long-name"),
    case("model", "import", "{in}/base.json", "--name", "a\x00b", match=r"control characters", id="import-nul-name"),
    case("model", "import", "{in}/base.json", "--name", "Llama-3.1-8B",
         match=r"'Llama-3\.1-8B' already exists", id="import-duplicate"),
    case("model", "import", "{in}/base.json", "--params-b", "nan",
         match=r"params_b nan is not a parameter count", id="import-params-nan"),
    case("model", "import", "{in}/base.json", "--params-b", "inf",
         match=r"params_b inf is not a parameter count", id="import-params-inf"),
    case("model", "import", "{in}/base.json", "{in}/list.json",
         match=r"list\.json: JSON is a list", id="import-batch-one-bad"),
    case("model", "import", "{in}/base.json", "{in}/base.json",
         match=r"'base' already exists", id="import-batch-twice"),
    case("model", "import", "-", "--name", "m", stdin=b"\0" * (10_000_000 + 2),
         match=r"stdin: larger than 10 MB", id="import-stdin-dev-zero"),
    case("model", "import", "{in}/model-\udcff",
         match=r"model name 'model-\\xff' is not valid UTF-8 .*--name", id="import-folder-not-utf8"),
    case("model", "import", "{in}/big-index",
         match=r"model\.safetensors\.index\.json: larger than 20 MB", id="import-21MB-safetensors-index"),
    # ---------------------------------------------------------------- names that display other than they are (issue 21)
    case("gpu", "add", "H100\u202eMXS", "--memory", "80GiB",
         match=r"gpu name .* invisible or direction-changing characters \(U\+202E\)", id="gpu-bidi-override"),
    case("model", "add", "Llama\u200b-3.1-8B", *MODEL,
         match=r"model name .*\(U\+200B\)", id="model-zero-width-space"),
    case("plan", "add", "\u2066chat\u2069", *PLAN, match=r"plan name .*\(U\+2066, U\+2069\)", id="plan-bidi-isolate"),
    case("dtype", "add", "fp8\ufeff", "--bytes-per-element", "1", match=r"\(U\+FEFF\)", id="dtype-zero-width-bom"),
    case("apply", "{in}/bidi.toml", match=r"gpu name .*\(U\+202E\)", id="apply-bidi-name"),
    # ---------------------------------------------------------------- model show / remove / list
    case("model", "show", "Lama-3.1-8B",
         match=r"unknown model 'Lama-3\.1-8B': did you mean Llama-3\.1-8B", id="show-unknown-model"),
    case("model", "show", "Llama-3.1-8B", "--gpu", "H100-SMX",
         match=r"unknown gpu 'H100-SMX': did you mean H100-SXM", id="show-unknown-gpu"),
    case("model", "show", SQLISH, match=r"unknown model \"x'\); DROP TABLE model;--\"", id="show-sql-name"),
    case("model", "remove", "Llama-3-8B", match=r"used by plan\(s\) chat-llama3-8b", id="remove-model-in-use"),
    case("model", "remove", LONG, match=r"unknown model 'm{197}\.\.\.'", id="remove-long-name"),
    case("model", "list", "--format", "pdf", match=r"'pdf' is not one of", id="model-list-format"),
    # ---------------------------------------------------------------- gpu and dtype (issue 2)
    case("gpu", "add", "g", "--memory", "80 bananas", match=r"unknown unit 'bananas'", id="gpu-bananas"),
    case("gpu", "add", "g", "--memory", f"{2**63}B",
         match=r"too large \(at most 2\^63 - 1 bytes\)", id="gpu-2**63-bytes"),
    # a size without a unit is refused, not read as bytes: --memory 80 was an 80-byte GPU
    case("gpu", "add", "g", "--memory", "80", match=r"^Error: size '80' has no unit: write 80GiB \(80 x 2\^30 bytes\) "
         r"or 80GB \(80 x 10\^9 bytes\), or 80B if you mean bytes$", id="gpu-memory-without-unit"),
    case("gpu", "add", "g", "--memory", "80GiB", "--bandwidth", "3.35", match=r"size '3.35' has no unit",
         id="gpu-bandwidth-without-unit"),
    case("gpu", "add", "g", "--memory", "8EiB", match=r"unknown unit 'eib'", id="gpu-exbibytes"),
    case("gpu", "add", "g", "--memory", "1e308B", match=r"too large", id="gpu-1e308-bytes"),
    case("gpu", "add", "g", "--memory", "inf", match=r"'inf' is not understood", id="gpu-inf-memory"),
    case("gpu", "add", "g", "--memory", "nan", match=r"'nan' is not understood", id="gpu-nan-memory"),
    case("gpu", "add", "g", "--memory", "0GiB", match=r"must be greater than zero", id="gpu-zero-memory"),
    case("gpu", "add", "g", "--memory", "-80GiB", match=r"not understood", id="gpu-negative-memory"),
    case("gpu", "add", "g", "--memory", "80GiB", "--price-per-hour", "nan",
         match=r"price_per_hour must be a finite number.*nan", id="gpu-price-nan"),
    case("gpu", "add", "g", "--memory", "80GiB", "--unit-price", "inf",
         match=r"unit_price must be a finite number.*inf", id="gpu-price-inf"),
    case("gpu", "add", "g", "--memory", "80GiB", "--unit-price", "-1",
         match=r"unit_price must be a finite number of at least 0", id="gpu-price-negative"),
    case("gpu", "add", "H100-SXM", "--memory", "80GiB", match=r"gpu 'H100-SXM' already exists", id="gpu-duplicate"),
    case("gpu", "add", LONG, "--memory", "80GiB", match=r"gpu name is 10,000 characters", id="gpu-long-name"),
    case("gpu", "add", "g\x00", "--memory", "80GiB", match=r"gpu name .* control characters", id="gpu-nul-name"),
    case("gpu", "add", "g\x7f", "--memory", "80GiB", match=r"gpu name .* control characters", id="gpu-del-name"),
    case("gpu", "add", "g", "--memory", "80GiB", "--vendor", "v\x00",
         match=r"vendor contains a NUL character \(\\x00\)", id="gpu-nul-vendor"),
    case("gpu", "show", "H100-SMX", match=r"unknown gpu 'H100-SMX': did you mean H100-SXM", id="gpu-show-unknown"),
    case("gpu", "remove", "H100-SXM", match=r"gpu 'H100-SXM' is used by plan\(s\)", id="gpu-remove-in-use"),
    case("dtype", "add", "bf16", "--bytes-per-element", "2",
         match=r"dtype 'bf16' already exists", id="dtype-duplicate"),
    case("dtype", "add", "d", "--bytes-per-element", "nan",
         match=r"--bytes-per-element must be a number from 0\.125 \(1 bit\) to 8 bytes", id="dtype-nan"),
    case("dtype", "add", "d", "--bytes-per-element", "inf",
         match=r"--bytes-per-element must be a number from 0\.125 \(1 bit\) to 8 bytes", id="dtype-inf"),
    case("dtype", "add", "d", "--bytes-per-element", "0",
         match=r"--bytes-per-element must be a number from 0\.125 \(1 bit\) to 8 bytes", id="dtype-zero"),
    case("dtype", "add", LONG, "--bytes-per-element", "1",
         match=r"dtype name is 10,000 characters", id="dtype-long-name"),
    case("dtype", "add", "d\x00", "--bytes-per-element", "1",
         match=r"dtype name .* control characters", id="dtype-nul-name"),
    case("dtype", "add", "d", "--bytes-per-element", "1", "--mla-bytes-per-token-per-layer", "3000000000",
         match=r"mla_bytes_per_token_per_layer 3,000,000,000 is too large", id="dtype-int32-mla-bytes"),
    # ---------------------------------------------------------------- apply / export (issue 2, 6)
    case("apply", "{in}/empty.toml", match=r"empty\.toml is empty: declare \[\[dtype\]\]", id="apply-empty-file"),
    case("apply", "-", stdin="", match=r"stdin is empty", id="apply-empty-stdin"),
    case("apply", "{in}/missing.toml", match=r"cannot read .*missing\.toml: No such file", id="apply-missing-file"),
    case("apply", "{in}/not-toml.toml", match=r"not valid TOML", id="apply-not-toml"),
    case("apply", "{in}/deep.json", match=r"not valid TOML", id="apply-deep-json"),
    case("apply", "{in}/big/config.json", match=r"config\.json is 52\.4 MB: larger than 16 MB", id="apply-50MB"),
    case("apply", "{in}/not-utf8.json", match=r"not UTF-8", id="apply-not-utf8"),
    case("apply", "{in}/unknown-table.toml",
         match=r"unknown table 'modle': did you mean \[\[model\]\]", id="apply-unknown-table"),
    case("apply", "{in}/unknown-key.toml", match=r"#1 'g': unknown key 'memroy'", id="apply-unknown-key"),
    case("apply", "{in}/twice.toml", match=r"'g' is declared twice", id="apply-duplicate-in-file"),
    case("apply", "{in}/bananas.toml", match=r"unknown unit 'bananas'", id="apply-bananas"),
    case("apply", "{in}/nan.toml", match=r"price_per_hour must be a finite number.*nan", id="apply-nan-price"),
    case("apply", "{in}/inf-memory.toml", match=r"memory_bytes = inf has no unit", id="apply-inf-memory"),
    case("apply", "{in}/bare-memory.toml", match=r"\[\[gpu\]\] #1 'g': memory_bytes = 80 has no unit: write memory_bytes = \"80GiB\" "
         r"or \"80GB\", or \"80B\" if you mean bytes", id="apply-memory-without-unit"),
    case("apply", "{in}/bare-memory-text.toml", match=r"size '80' has no unit", id="apply-memory-text-without-unit"),
    case("apply", "{in}/long-name.toml", match=r"gpu name is 10,000 characters", id="apply-long-name"),
    case("apply", "{in}/nul-name.toml", match=r"gpu name .* control characters", id="apply-nul-name"),
    case("apply", "{in}/nul-notes.toml", match=r"#1 'g': notes contains a NUL character", id="apply-nul-notes"),
    case("apply", "{in}/model-1e308.toml",
         match=r"layers 1e\+308 is too large: at most 2,147,483,647", id="apply-1e308-layers"),
    case("apply", "{in}/model-3e9.toml",
         match=r"layers 3,000,000,000 is too large: at most 2,147,483,647", id="apply-int32-layers"),
    case("apply", "{in}/model-kv.toml",
         match=r"kv_heads \(5\) must divide attention_heads \(32\)", id="apply-kv-not-dividing"),
    case("apply", "{in}/model-dtype.toml", match=r"unknown weight dtype 'fp7'", id="apply-unknown-dtype"),
    case("apply", "{in}/good-then-bad.toml", match=r"#2 'broken'.*not understood", id="apply-good-then-bad"),
    case("apply", "/dev/zero", match=r"cannot read /dev/zero: it is not a regular file", id="apply-dev-zero"),
    case("apply", "-", stdin=b"\0" * (16_000_000 + 2), match=r"stdin: larger than 16 MB", id="apply-stdin-dev-zero"),
    case("apply", "{in}/fifo.toml", match=r"fifo\.toml: it is not a regular file", id="apply-fifo"),
    case("apply", "{in}/deep.toml", match=r"deep\.toml: nested more than 32 levels deep", id="apply-deep-toml"),
    case("apply", "{in}/long-key.toml", match=r"a dotted key has more than 16 parts", id="apply-50000-part-key"),
    case("apply", "{in}/tiny-dtype.toml",
         match=r"bytes_per_element must be a number from 0\.125 \(1 bit\) to 8 bytes .*1e-320", id="apply-dtype-1e-320"),
    case("dtype", "add", "tiny", "--bytes-per-element", "1e-320",
         match=r"--bytes-per-element must be a number from 0\.125", id="dtype-1e-320"),
    case("apply", "{in}/sliding-40.toml",
         match=r"'m': sliding \(40\) \+ chunked \(0\) \+ linear \(0\) layers add up to 40, more than layers \(32\)",
         id="apply-sliding-beyond-layers"),
    case("export", "--out", "{in}/a-file/sub/registry.toml",
         match=r"cannot write .*a-file/sub/registry\.toml", id="export-under-a-file"),
    case("export", "--out", "/proc/kvreg.toml", match=r"cannot write /proc/kvreg\.toml", id="export-to-proc"),
    # ---------------------------------------------------------------- capacity (issue 3)
    case("capacity", "--model", "Llama-3.1-8B", "--context", "12q",
         match=r"token count '12q' is not understood", id="capacity-context-12q"),
    case("capacity", "--model", "Llama-3.1-8B", "--context", "nan",
         match=r"token count 'nan' is not understood", id="capacity-context-nan"),
    case("capacity", "--model", "Llama-3.1-8B", "--context", "1e308",
         match=r"token count '1e308' is not understood", id="capacity-context-1e308"),
    case("capacity", "--model", "Llama-3.1-8B", "--tp", "3",
         match=r"TP 3 is not valid for Llama-3\.1-8B.*1, 2, 4, 8", id="capacity-tp-invalid"),
    case("capacity", "--model", "Llama-3.1-8B", "--tp", "3000000000",
         match=r"TP 3000000000 x PP 1 needs 3000000000 GPUs but a node has 8", id="capacity-tp-int32"),
    case("capacity", "--model", "Llama-3.1-8B", "--tp", "two",
         match=r"--tp 'two' is not understood", id="capacity-tp-word"),
    case("capacity", "--model", "Lama-3.1-8B",
         match=r"unknown model 'Lama-3\.1-8B': did you mean Llama-3\.1-8B", id="capacity-unknown-model"),
    case("capacity", "--gpu", "H100-SMX",
         match=r"unknown gpu 'H100-SMX': did you mean H100-SXM", id="capacity-unknown-gpu"),
    case("capacity", "--model", SQLISH,
         match=r"unknown model \"x'\); DROP TABLE model;--\"", id="capacity-sql-model"),
    case("capacity", "--reserve", "1", match=r"reserve '1' must be at least 0 and below 1", id="capacity-reserve-1"),
    case("capacity", "--reserve", "-0.1",
         match=r"reserve '-0\.1' must be at least 0 and below 1", id="capacity-reserve-negative"),
    case("capacity", "--reserve", "nan",
         match=r"reserve 'nan' must be at least 0 and below 1", id="capacity-reserve-nan"),
    case("capacity", "--reserve", "inf",
         match=r"reserve 'inf' must be at least 0 and below 1", id="capacity-reserve-inf"),
    case("capacity", "--kv-cache-memory", "80 bananas", match=r"unknown unit 'bananas'", id="capacity-pool-bananas"),
    case("capacity", "--kv-dtype", "fp7", match=r"unknown KV dtype 'fp7'", id="capacity-unknown-kv-dtype"),
    case("capacity", "--pp", "0",
         match=r"--pp, --dp-attention and --gpus-per-node must be at least 1", id="capacity-pp-zero"),
    # ---------------------------------------------------------------- plans and demand (issue 4)
    case("plan", "add", "p", "--model", "Lama-3.1-8B", "--gpu", "H100-SXM",
         match=r"unknown model 'Lama-3\.1-8B'", id="plan-unknown-model"),
    case("plan", "add", "p", "--model", "Llama-3.1-8B", "--gpu", "H100-SMX",
         match=r"unknown gpu 'H100-SMX': did you mean H100-SXM", id="plan-unknown-gpu"),
    case("plan", "add", "p", "--gpu", "H100-SXM", match=r"a plan needs a model \(--model\)", id="plan-no-model"),
    case("plan", "add", "p", *PLAN, "--tp", "4", "--pp", "4",
         match=r"TP 4 x PP 4 needs 16 GPUs but a node has 8", id="plan-tp-pp-exceed-node"),
    case("plan", "add", "p", *PLAN, "--tp", "3",
         match=r"TP 3 is not valid for Llama-3\.1-8B.*1, 2, 4, 8", id="plan-tp-not-dividing-heads"),
    case("plan", "add", "p", *PLAN, "--tp", "3", "--gpus-per-node", "3000000000",
         match=r"gpus_per_node 3,000,000,000 is too large: at most 1,024", id="plan-int32-gpus-per-node"),
    case("plan", "add", "p", *PLAN, "--tp", "3", "--gpus-per-node", "100000",
         match=r"gpus_per_node 100,000 is too large: at most 1,024", id="plan-huge-node"),
    case("plan", "add", "p", *PLAN, "--tp", "3000000000",
         match=r"tp 3,000,000,000 is too large: at most 2,147,483,647", id="plan-int32-tp"),
    case("plan", "add", "p", *PLAN, "--context", "12q",
         match=r"token count '12q' is not understood", id="plan-context-12q"),
    case("plan", "add", "p", *PLAN, "--reserve", "nan",
         match=r"reserve 'nan' must be at least 0", id="plan-reserve-nan"),
    case("plan", "add", "p", *PLAN, "--reserve", "1.5",
         match=r"reserve '1\.5' must be at least 0", id="plan-reserve-1.5"),
    case("plan", "add", "p", *PLAN, "--reserve", "0.1", "--kv-cache-memory", "53GB",
         match=r"give --reserve or --kv-cache-memory, not both", id="plan-reserve-and-pool"),
    case("plan", "add", "p", *PLAN, "--kv-cache-memory", "inf", match=r"'inf' is not understood", id="plan-pool-inf"),
    case("plan", "add", "p", *PLAN, "--kv-cache-memory", f"{2**63}B", match=r"too large", id="plan-pool-2**63"),
    case("plan", "add", "p", *PLAN, "--kv-cache-memory", "53e9", match=r"size '53e9' has no unit: write 53e9B if you mean bytes",
         id="plan-pool-without-unit"),
    case("capacity", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--kv-cache-memory", "40",
         match=r"size '40' has no unit", id="capacity-pool-without-unit"),
    case("capacity", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--rule", "vllm", "--activation-memory", "1.2",
         match=r"--activation-memory: size '1.2' has no unit", id="capacity-activation-without-unit"),
    case("plan", "add", "p", *PLAN, "--avg-tokens", "-5",
         match=r"token count '-5' is not understood", id="plan-avg-negative"),
    case("plan", "add", "p", *PLAN, "--block-size", "-16",
         match=r"block_size must be at least 0", id="plan-block-negative"),
    case("plan", "add", "p", *PLAN, "--kv-dtype", "fp7", match=r"unknown KV dtype 'fp7'", id="plan-unknown-kv-dtype"),
    case("plan", "add", "chat-llama3-8b", *PLAN, match=r"plan 'chat-llama3-8b' already exists", id="plan-duplicate"),
    case("plan", "add", LONG, *PLAN, match=r"plan name is 10,000 characters", id="plan-long-name"),
    case("plan", "add", "p\x00", *PLAN, match=r"plan name .* control characters", id="plan-nul-name"),
    case("plan", "set", "chat-llama3-8b",
         match=r"nothing to change for plan 'chat-llama3-8b'", id="plan-set-nothing"),
    case("plan", "set", "chat-llama3-8", "--tp", "2",
         match=r"unknown plan 'chat-llama3-8': did you mean chat-llama3-8b", id="plan-set-unknown"),
    case("plan", "set", "chat-llama3-8b", "--tp", "3", "--gpus-per-node", "8",
         match=r"TP 3 is not valid", id="plan-set-tp-invalid"),
    case("plan", "set", "chat-llama3-8b", "--rename", "docs-llama3-8b",
         match=r"plan 'docs-llama3-8b' already exists", id="plan-set-rename-duplicate"),
    case("plan", "set", "chat-llama3-8b", "--rename", LONG,
         match=r"plan name is 10,000 characters", id="plan-set-rename-long"),
    case("plan", "set", "chat-llama3-8b", "--rename", "a\x00", match=r"control characters", id="plan-set-rename-nul"),
    case("plan", "set", "chat-llama3-8b", "--rename", "", match=r"plan name must not be empty",
         id="plan-set-rename-empty"),
    case("plan", "set", "chat-llama3-8b", "--reserve", "inf",
         match=r"reserve 'inf' must be at least 0", id="plan-set-reserve-inf"),
    case("plan", "show", "nope", match=r"unknown plan 'nope'", id="plan-show-unknown"),
    case("plan", "show", "chat-llama3-8b", "--quarter", "2026Q5",
         match=r"quarter '2026Q5' has no quarter 5", id="plan-show-2026Q5"),
    case("plan", "remove", "nope", match=r"unknown plan 'nope'", id="plan-remove-unknown"),
    case("plan", "rollup", "--quarter", "2026-13", match=r"quarter '2026-13'", id="plan-rollup-2026-13"),
    case("plan", "list", "--format", "pdf", match=r"'pdf' is not one of", id="plan-list-format"),
    case("plan", "solve", "context", *PLAN, "--users", "-1", "--gpus", "8",
         match=r"users must be at least 1, not -1", id="solve-context-negative-users"),
    case("plan", "solve", "context", *PLAN, "--users", "10", "--gpus", "nan",
         match=r"gpus must be a whole number, not 'nan'", id="solve-context-nan-gpus"),
    case("plan", "solve", "gpus", *PLAN, "--users", "1e308",
         match=r"users must be a whole number, not '1e308'", id="solve-gpus-1e308-users"),
    case("plan", "solve", "gpus", *PLAN, "--users", "10", "--tp", "3",
         match=r"TP 3 is not valid", id="solve-gpus-tp-invalid"),
    case("plan", "solve", "reserve", "nope", match=r"unknown plan 'nope'", id="solve-reserve-unknown"),
    case("demand", "set", "chat-llama3-8b", "2026Q5", "10",
         match=r"quarter '2026Q5' has no quarter 5", id="demand-2026Q5"),
    case("demand", "set", "chat-llama3-8b", "2026-13", "10", match=r"quarter '2026-13'", id="demand-2026-13"),
    case("demand", "set", "chat-llama3-8b", "2026Q4", "-5",
         match=r"users must be at least 0, not -5", id="demand-negative-users"),
    case("demand", "set", "chat-llama3-8b", "2026Q4", "1.5",
         match=r"users must be a whole number, not '1\.5'", id="demand-fractional-users"),
    case("demand", "set", "chat-llama3-8b", "2026Q4", "nan",
         match=r"users must be a whole number, not 'nan'", id="demand-nan-users"),
    case("demand", "set", "chat-llama3-8b", "2026Q4", str(2**63),
         match=r"users .* too large", id="demand-2**63-users"),
    # a trillion is the declared maximum: at 10^18 the optimizer (HiGHS, in doubles) called the quarter infeasible
    case("demand", "set", "chat-llama3-8b", "2026Q4", str(10**18),
         match=r"users \(19 digits\) is too large: at most 1,000,000,000,000$", id="demand-10**18-users"),
    case("demand", "set", "nope", "2026Q4", "10", match=r"unknown plan 'nope'", id="demand-unknown-plan"),
    case("demand", "remove", "chat-llama3-8b", "1999Q1", match=r"has no demand in 1999Q1", id="demand-remove-absent"),
    case("demand", "list", "--quarter", "2026Q0", match=r"quarter '2026Q0'", id="demand-list-2026Q0"),
    # ---------------------------------------------------------------- report (issue 5)
    # ---------------------------------------------------------------- round 3 (issue 45)
    case("gpu", "add", "g", "--memory", "80GiB", "--price-per-hour", "1e308",
         match=r"price_per_hour must be a finite number of at least 0 and at most 1,000,000, not 1e\+308",
         id="gpu-price-1e308"),
    case("gpu", "add", "g", "--memory", "80GiB", "--unit-price", "1e12",
         match=r"unit_price must be .* at most 1,000,000,000", id="gpu-unit-price-1e12"),
    case("apply", "{in}/price-1e308.toml", match=r"price_per_hour must be a finite number .* not 1e\+308",
         id="apply-price-1e308"),
    case("fleet", "import", "{in}/fleet-price-1e308.csv",
         match=r"fleet-price-1e308.csv line 2: reserved_price_per_hour must be .* at most 1,000,000, not '1e308'",
         id="fleet-import-price-1e308"),
    case("fleet", "set", "H100-SXM", "2026Q4", "1", "--reserved", "1", "--reserved-price", "1e308",
         match=r"reserved_price_per_hour must be .* at most 1,000,000", id="fleet-set-price-1e308"),
    case("capacity", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--context", "9" * 400,
         match=r"token count '9{19}\.\.\. \(400 characters\) is too large \(at most 2\^40\)", id="capacity-400-digit-context"),
    case("plan", "add", "p", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--avg-tokens", "9" * 400,
         match=r"token count .* is too large \(at most 2\^40\)", id="plan-add-400-digit-avg-tokens"),
    case("apply", "{in}/plan-400-digit-context.toml", match=r"too large", id="apply-400-digit-context"),
    case("apply", "{in}/demand-quarter-twice.toml",
         match=r"\[\[demand\]\] #2 'chat-llama3-8b 2027Q2' is declared twice \(also #1\)", id="apply-quarter-twice"),
    case("demand", "import", "{in}/demand-underscore.csv",
         match=r"line 2: users must be a whole number, not '1_000' \(write the digits 0-9 only", id="demand-import-1_000"),
    case("demand", "import", "{in}/demand-arabic-indic.csv",
         match=r"line 2: users must be a whole number, not '\u0661\u0660\u0660' \(write the digits 0-9 only",
         id="demand-import-arabic-indic"),
    case("demand", "import", "{in}/demand-long-field.csv",
         match=r"line 2: a field is longer than 131,072 characters", id="demand-import-128KB-field"),
    case("demand", "import", "/dev/zero", match=r"cannot read /dev/zero: it is not a regular file",
         id="demand-import-dev-zero"),
    case("demand", "import", "-", stdin=b"\0" * (64_000_000 + 2), match=r"stdin: larger than 64 MB",
         id="demand-import-stdin-dev-zero"),
    case("fleet", "import", "{in}/fifo.csv", match=r"fifo\.csv: it is not a regular file", id="fleet-import-fifo"),
    case("calibrate", "--log", "/dev/zero", match=r"cannot read /dev/zero: it is not a regular file",
         id="calibrate-log-dev-zero"),
    case("calibrate", "--log", "/dev/urandom", match=r"cannot read /dev/urandom: it is not a regular file",
         id="calibrate-log-dev-urandom"),
    case("calibrate", "--log", "{in}/fifo.log", match=r"fifo\.log: it is not a regular file", id="calibrate-log-fifo"),
    case("report", "--quarter", "2026-13", "--out", "{tmp}/reports", match=r"quarter '2026-13'", id="report-2026-13"),
    case("report", "--quarter", "2026Q5", "--out", "{tmp}/reports",
         match=r"quarter '2026Q5' has no quarter 5", id="report-2026Q5"),
    case("report", "--format", "pdf", "--out", "{tmp}/reports",
         match=r"report format 'pdf' is not supported", id="report-pdf"),
    case("report", "--format", "", "--out", "{tmp}/reports", match=r"no report format given", id="report-no-format"),
    case("report", "--quarter", "2026Q4", "--out", "{in}/a-file/sub",
         match=r"cannot write reports under .*a-file/sub", id="report-out-under-a-file"),
    case("report", "--quarter", "2026Q4", "--out", "/proc/kvreg-reports",
         match=r"cannot write reports under /proc/kvreg-reports", id="report-out-in-proc"),
    case("report", "--quarter", "2026Q4", "--out", "{in}/a-file",
         match=r"cannot write reports under .*a-file: it is a file, not a folder", id="report-out-is-a-file"),
    case("report", "--quarter", "2026Q4", "--out", "{in}/prev", "--compare", "2026Q3",
         match=r"--compare 2026Q3: .*cannot be read \(its models is not a list of records", id="report-previous-malformed"),
    case("report", "--quarter", "2026Q4", "--out", "{in}/deep-prev", "--compare", "2026Q3",
         match=r"--compare 2026Q3: .*nested more than 32 levels deep", id="report-previous-deep"),
    case("report", "--quarter", "2026Q4", "--out", "{in}", "--compare", "2026Q2",
         match=r"--compare 2026Q2: there is no report", id="report-compare-missing"),
    # found by a hostile-input review (stop 53): each was a traceback, a silent wrong value or a destroyed file
    case("export", "--out", "{in}/fifo.toml", match=r"fifo\.toml is not a regular file \(a device, pipe, socket or"
         r" folder\): give a file name", id="export-out-fifo"),
    case("demand", "export", "-o", "/nonexistent-folder/x.csv",
         match=r"^Error: cannot write /nonexistent-folder/x\.csv: No such file or directory$", id="demand-export-nowhere"),
    case("calibrate", "--log", "{in}/huge-number.log", "--gpu", "H200",
         match=r"the log's line .* holds a number too large to be an engine's", id="calibrate-log-400-digits"),
    case("model", "import", "{in}/huge-int.json",
         match=r"huge-int\.json: holds a number too long to be a model's", id="import-5000-digit-int"),
    case("apply", "{in}/huge-int.toml", match=r"huge-int\.toml: holds a number thousands of digits long",
         id="apply-toml-5000-digit-int"),
    case("apply", "{in}/engine-version-number.toml",
         match=r"--engine-version 0\.1 is a number: write the release as text", id="apply-engine-version-number"),
    case("plan", "rollup", "--from", "9999Q4", match=r"quarter '9999Q4' has an implausible year 9999",
         id="rollup-from-9999Q4"),
    case("plan", "optimize", "--time-limit", "0", match=r"'--time-limit': 0\.0 is not in the range 0<x<=86400",
         id="optimize-time-limit-0"),
    case("plan", "optimize", "--time-limit", "nan", match=r"'--time-limit': nan is not a number of seconds",
         id="optimize-time-limit-nan"),
    case("plan", "calibrate", "chat-llama3-8b", "--max-concurrency", "2000000000x",
         match=r"measured_max_concurrency must be a finite number of at least 0 and at most 1,000,000,000",
         id="calibrate-concurrency-past-its-maximum"),
    case("gpu", "set", "H200", "--lead-time", "41", match=r"lead_time_quarters 41 is too large: at most 40",
         id="gpu-lead-time-past-40"),
    case("--db", "sqlite:///{in}/base.json", "model", "list",
         match=r"base\.json cannot be opened: file is not a database \(not an SQLite database, or a damaged one\)",
         id="db-not-a-database"),
    case("--db", "sqlite:///{in}/base.json", "init", match=r"base\.json cannot be opened: file is not a database",
         id="db-init-not-a-database"),
    # a name the CSV and TOML readers would strip, so that its exported demand or fleet would not import again
    case("plan", "add", " lead", *PLAN, match=r"plan name ' lead' begins or ends with a space: give it as 'lead'",
         id="plan-name-leading-space"),
    case("gpu", "add", "SPACEGPU ", "--memory", "80GiB",
         match=r"gpu name 'SPACEGPU ' begins or ends with a space: give it as 'SPACEGPU'", id="gpu-name-trailing-space"),
]


def _fill(args: list[str], **where) -> list[str]:
    """The case's arguments with {in} (the inputs folder), {tmp} and {registry} filled in."""
    for key, value in where.items():
        args = [a.replace("{" + key + "}", str(value)) for a in args]
    return args


@pytest.mark.parametrize("args, match, stdin", CASES)
def test_bad_input_is_refused_in_one_line_and_writes_nothing(args, match, stdin, registry, inputs, tmp_path):
    url, pristine = registry
    result = Kvreg(url)(*_fill(args, **{"in": inputs, "tmp": tmp_path, "registry": url}), input=stdin, ok=False)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code != 0, f"accepted: {result.stdout!r}"
    assert len(lines) == 1, result.stderr
    assert re.search(match, lines[0]), lines[0]
    assert result.stdout == ""
    assert registry_state(url) == pristine
    assert not (tmp_path / "reports").exists()


def test_the_base_config_imports(inputs):
    """The bad configs are the base config with one thing changed: the base itself is good."""
    from kvreg.interchange.hf.row import import_path

    row, _ = import_path(inputs / "base.json")
    assert (row["name"], row["layers"], row["attention_heads"], row["kv_heads"], row["head_dim"]) == \
        ("base", 32, 32, 8, 4096 // 32)


# --------------------------------------------------------------------------- odd but valid names

ODD_NAMES = [SQLISH, 'Robert"); DROP TABLE plan;-- say "hi" \\ 100% _under_ [x] %s {0}',
             ("ünïcødé ✓ 模型 «ÆØÅ» " * 11)[:199] + "!"]  # 200 characters: the most a name may have


def test_names_that_look_like_sql_are_stored_as_given(kv, db_url):
    """Valid names, however they look, are data: stored as typed, found again by name, and the
    tables they name are still there. Each becomes a model, a GPU, a KV dtype and a plan using all three."""
    from sqlalchemy import inspect

    from kvreg.db.engine import make_engine

    kv("init")
    counts = {what: len(kv.json(what, "list")) for what in ("model", "gpu", "plan")}
    for i, name in enumerate(ODD_NAMES):
        kv("model", "add", name, *MODEL)
        kv("gpu", "add", name, "--memory", "80GiB")
        kv("dtype", "add", name, "--bytes-per-element", "1", "--kind", "kv")
        kv("plan", "add", name, "--model", name, "--gpu", name, "--kv-dtype", name, "--gpus-per-node", "1",
           "--context", "8K")
        kv("demand", "set", name, "2026Q4", str(10 + i))
        assert kv.json("model", "show", name)["model"]["name"] == name
        assert kv.json("gpu", "show", name)[0]["name"] == name
        [row] = kv.json("plan", "show", name, "--quarter", "2026Q4")
        assert (row["plan"], row["model"], row["gpu"], row["kv_dtype"]) == (name, name, name, name)
        assert row["users"] == 10 + i
        [cap] = kv.json("capacity", "--model", name, "--gpu", name, "--kv-dtype", name, "--context", "8K")
        # Llama-3.1-8B's shape in int8-sized KV: 2 (K and V) x 32 layers x 8 heads x 128 x 1 B = 65,536 B per token.
        assert (cap["model"], cap["kv_bytes_per_token"]) == (name, 65_536)
    assert {what: len(kv.json(what, "list")) for what in ("model", "gpu", "plan")} == \
        {what: n + len(ODD_NAMES) for what, n in counts.items()}
    engine = make_engine(db_url)
    with engine.connect() as conn:
        assert {"model", "gpu", "plan", "dtype", "demand"} <= set(inspect(conn).get_table_names())
    engine.dispose()
