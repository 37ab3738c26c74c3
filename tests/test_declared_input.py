"""Adding an input is its declaration (kvreg/figures/inputs.py), a migration and, for a model field, the
importer's key: the declaration alone reaches the table (column and CHECK), the read path's columns, the
validator and its one-line errors, the CLI option with its help (model add, gpu add/set, plan add/set,
capacity), the capacity question and the scenario rows it binds, the web forms (plan and what-if), and the
workbook's input columns, which `kvreg apply` reads back.

Five throwaway inputs, a model's `vision_layers`, a deployment's `draft_tokens`, a GPU's `tdp_watts`, a workload's
`prefix_hit_rate` and an SGLang engine setting, `chunked_prefill_size`, are added to the declarations' source as one would edit the file, and kvreg is imported from it
in a fresh interpreter (the tables and options are built once, at import); nothing else is edited. Their migration
is the one thing missing, and the drift test's comparison says so.
"""

from __future__ import annotations

import json
import subprocess
import sys

DECLARE = '''
import importlib.util, json, pathlib, re, sys, tempfile
import kvreg.figures

# kvreg/figures/inputs.py with five more declarations at the end of _INPUTS, loaded as that module.
path = pathlib.Path(kvreg.figures.__file__).with_name("inputs.py")
source = path.read_text()
assert source.count("\\n]\\nINPUTS = {") == 1
source = source.replace("\\n]\\nINPUTS = {", """
    InputDecl("vision_layers", "layers", "layers of the vision tower (NULL: no tower)", nullable=True,
              positive=True, at_most=1000, table="model", help="Layers of the vision tower (Llama 4: 34)"),
    InputDecl("draft_tokens", "tokens", "tokens a speculative draft proposes per step (NULL: none)", nullable=True,
              positive=True, table="deployment", help="Speculative tokens proposed per step"),
    InputDecl("tdp_watts", "W", "the GPU's board power (NULL: unknown)", nullable=True, positive=True, table="gpu",
              help="Board power in watts (H100 SXM: 700)"),
    InputDecl("prefix_hit_rate", "fraction", "share of a request's prompt tokens the prefix cache holds (NULL: none)",
              "real", nullable=True, minimum=0, at_most=1, table="workload",
              help="Share of the prompt tokens the prefix cache holds, in [0, 1]"),
    InputDecl("chunked_prefill_size", "tokens", "SGLang --chunked-prefill-size (NULL: the release's default)",
              nullable=True, positive=True, table="deployment", engine="sglang", help="SGLang: tokens per prefill chunk"),
]
INPUTS = {""")
module = importlib.util.module_from_spec(importlib.util.spec_from_loader("kvreg.figures.inputs", loader=None))
module.__file__ = str(path)
sys.modules["kvreg.figures.inputs"] = module
exec(compile(source, str(path), "exec"), module.__dict__)

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from click.testing import CliRunner

from kvreg.app import options
from kvreg.app.plans import spec_from_options
from kvreg.app.registry import check_input, validate_model
from kvreg.core.errors import KvregError


def input_error(field, value):
    """check_input's one-line error for `value`, or None when it passes."""
    try:
        check_input(field, value)
    except KvregError as exc:
        return str(exc)
    return None

from kvreg.cli import cli
from kvreg.cli.models import model_add
from kvreg.db.engine import alembic_config, make_engine
from kvreg.db.read import MODEL_COLUMNS
from kvreg.db.tables import Model, Plan, Scenario, SQLModel
from kvreg.export import xlsx

out = {}
column = Model.__table__.c.vision_layers
out["column"] = [str(column.type), column.nullable]
out["check"] = [str(c.sqltext) for c in Model.__table__.constraints if c.name == "ck_model_vision_layers"]
out["read_path_last"] = MODEL_COLUMNS[-1]
out["errors"] = [input_error("vision_layers", v) for v in (0, 1001, "34 layers", 34, None)]
row = dict(name="Tower-8B", layers=32, attention_heads=32, kv_heads=8, head_dim=128, params_total=8 * 10**9,
           max_position_embeddings=131072)
for value in (0, 1001):
    try:
        validate_model(None, {**row, "vision_layers": value})
    except Exception as exc:
        out.setdefault("model_error", []).append(str(exc))
help_text = CliRunner().invoke(cli, ["model", "add", "--help"], terminal_width=200).output
out["help"] = [" ".join(line.split()) for line in help_text.splitlines() if "--vision-layers" in line]
ctx = model_add.make_context("add", ["Tower-8B", "--layers", "32", "--head-dim", "128", "--params-b", "8",
                                     "--vision-layers", "34"])
out["parsed"] = ctx.params["vision_layers"]
column = xlsx.input_column("vision_layers")
out["workbook"] = ["vision_layers" in xlsx._MODEL_INPUTS, column.unit, column.kind, column.meaning]

# The deployment input: plan's and scenario's column and CHECK, plan add/set and the web form's plan add.
out["plan_columns"] = [[str(t.__table__.c.draft_tokens.type), t.__table__.c.draft_tokens.nullable] for t in (Plan, Scenario)]
out["plan_checks"] = [str(c.sqltext) for t in (Plan, Scenario) for c in t.__table__.constraints
                      if c.name in ("ck_plan_draft_tokens", "ck_scenario_draft_tokens")]
# The workload input too: plan add/set wear it after the plan's latency options; the plan form lists it.
for words in (["plan", "add", "--help"], ["plan", "set", "--help"]):
    text = CliRunner().invoke(cli, words, terminal_width=200).output
    for key, flag in (("plan_help", "--draft-tokens"), ("workload_help", "--prefix-hit-rate")):
        out.setdefault(key, []).extend(" ".join(l.split()) for l in text.splitlines() if flag in l)
params = options.parse(options.PLAN_ADD, [("model", "Llama-3.1-8B"), ("gpu", "H100-SXM"), ("draft-tokens", "4"),
                                          ("prefix-hit-rate", "0.5")], ("chat",))
spec = spec_from_options(params, partial=False)
out["plan_spec"] = spec["draft_tokens"]
out["workload_spec"] = spec["prefix_hit_rate"]
out["plan_form"] = [[f.name, f.label, options.form_defaults(options.PLAN_ADD)[f.name]]
                    for f in map(options.form_field, options.declared_inputs(options.PLAN_ADD))]
out["plan_set_clears"] = spec_from_options({"draft_tokens": "none"}, partial=True)
out["plan_error"] = input_error("draft_tokens", "0")
out["plan_sheet"] = "draft_tokens" in xlsx._SETTINGS
from kvreg.db.read import PLAN_KEYS
out["plan_file_keys"] = PLAN_KEYS[-7:]

# kvreg capacity and the what-if page's form: the deployment input is an option of capacity and a form field.
text = CliRunner().invoke(cli, ["capacity", "--help"], terminal_width=200).output
out["capacity_help"] = [" ".join(l.split()) for l in text.splitlines() if "--draft-tokens" in l]
out["capacity_form"] = [[f.name, f.label, options.form_defaults(options.CAPACITY)[f.name]]
                        for f in map(options.form_field, options.declared_inputs(options.CAPACITY))]
from kvreg.app.capacity import DECLARED, question_from_options
question = question_from_options(**options.parse(options.CAPACITY, [("draft-tokens", "4")]))
out["capacity_question"] = [DECLARED == tuple(options.declared_inputs(options.CAPACITY)), DECLARED,
                            question.draft_tokens]

# The engine setting: an option of capacity and of plan add, read by its unit (a token count), a field of the what-if
# page shown under its rule alone.
text = CliRunner().invoke(cli, ["capacity", "--help"], terminal_width=200).output
out["engine_help"] = [" ".join(l.split()) for l in text.splitlines() if "--chunked-prefill-size" in l]
out["engine_field"] = options.form_field("chunked_prefill_size")

# The GPU input: gpu add and gpu set wear it, gpu set may change it.
from kvreg.app.registry import GPU_SETTABLE
for words in (["gpu", "add", "--help"], ["gpu", "set", "--help"]):
    text = CliRunner().invoke(cli, words, terminal_width=200).output
    out.setdefault("gpu_help", []).extend(" ".join(l.split()) for l in text.splitlines() if "--tdp-watts" in l)
out["gpu_settable"] = "tdp_watts" in GPU_SETTABLE

url = f"sqlite:///{tempfile.mkdtemp()}/registry.db"
engine = make_engine(url)
with engine.begin() as conn:
    command.upgrade(alembic_config(url, conn), "head")
with engine.connect() as conn:
    drift = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
out["drift"] = [[d[0], d[2], d[3].name] for d in drift if isinstance(d, tuple)]

# With the migration the test cannot write done by hand, the what-if page shows the new field, and gpu set sets it.
from sqlalchemy import text as sql
with engine.begin() as conn:
    for table, column, kind in (("model", "vision_layers", "INTEGER"), ("plan", "draft_tokens", "INTEGER"),
                                ("scenario", "draft_tokens", "INTEGER"), ("gpu", "tdp_watts", "INTEGER"),
                                ("plan", "prefix_hit_rate", "REAL"), ("scenario", "prefix_hit_rate", "REAL"),
                                ("plan", "chunked_prefill_size", "INTEGER"),
                                ("scenario", "chunked_prefill_size", "INTEGER")):
        conn.execute(sql(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))
done = CliRunner().invoke(cli, ["--db", url, "gpu", "add", "H100-SXM", "--memory", "80GiB"])
done = CliRunner().invoke(cli, ["--db", url, "gpu", "set", "H100-SXM", "--tdp-watts", "700"])
out["gpu_set"] = [done.exit_code, done.output.strip()]
with engine.connect() as conn:
    out["gpu_row"] = conn.execute(sql("SELECT tdp_watts FROM gpu WHERE name = 'H100-SXM'")).scalar()
# plan add --prefix-hit-rate stores it on the plan row, plan set keeps it through another change and changes it; a
# value out of its bounds is refused in one line and writes nothing.
def plan_rows():
    with engine.connect() as conn:
        return [list(r) for r in conn.execute(sql("SELECT name, tp, prefix_hit_rate, draft_tokens FROM plan"
                                                  " WHERE name IN ('chat', 'other') ORDER BY name"))]
added = ["--db", url, "plan", "add", "chat", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1"]
done = CliRunner().invoke(cli, added + ["--prefix-hit-rate", "0.5", "--draft-tokens", "4"])
out["workload_add"] = [done.exit_code, done.stderr, plan_rows()]
done = CliRunner().invoke(cli, ["--db", url, "plan", "set", "chat", "--tp", "1", "--notes", "kept"])
out["workload_set"] = [done.exit_code, plan_rows()]
done = CliRunner().invoke(cli, ["--db", url, "plan", "set", "chat", "--prefix-hit-rate", "0.25"])
out["workload_set"] += [done.exit_code, plan_rows()]
# The workbook: Plan detail's prefix_hit_rate and the GPUs sheet's tdp_watts are input columns `kvreg apply` reads
# back; finance's 0.75 and 1000 are written.
from openpyxl import load_workbook
folder = tempfile.mkdtemp()
done = CliRunner().invoke(cli, ["--db", url, "report", "--format", "xlsx", "--out", folder, "--quarter", "2026Q4"])
book = pathlib.Path(folder, "2026-Q4", "capacity.xlsx")
wb = load_workbook(book)
ws = wb["Plan detail"]
column = next(c.column for c in ws[2] if c.value == "prefix_hit_rate")
row = next(r for r in range(3, ws.max_row + 1) if ws.cell(r, 1).value == "chat")
out["workbook_cell"] = [done.exit_code, ws.cell(row, column).value]
ws.cell(row, column).value = 0.75
ws = wb["GPUs"]
column = next(c.column for c in ws[2] if c.value == "tdp_watts")
row = next(r for r in range(3, ws.max_row + 1) if ws.cell(r, 1).value == "H100-SXM")
out["workbook_cell"].append(ws.cell(row, column).value)
ws.cell(row, column).value = 1000
wb.save(book)
done = CliRunner().invoke(cli, ["--db", url, "apply", str(book), "--quarter", "2026Q4"])
with engine.connect() as conn:
    tdp = conn.execute(sql("SELECT tdp_watts FROM gpu WHERE name = 'H100-SXM'")).scalar()
out["workbook_apply"] = [done.exit_code, done.stdout.splitlines(), plan_rows(), tdp]
out["folder"], out["gpu_cell"] = folder, wb["GPUs"].cell(row, column).coordinate
# A bad tdp_watts is refused in one line naming it, through every writer of a GPU row, and writes nothing: the
# workbook's cell ("abc", 0), a TOML file's [[gpu]] ("abc", 0), gpu add (-3: no GPU Test-GPU) and gpu set (0:
# H100-SXM keeps 1000).
def gpu_rows():
    with engine.connect() as conn:
        return [list(r) for r in conn.execute(sql("SELECT name, tdp_watts, typeof(tdp_watts) FROM gpu"
                                                  " WHERE name IN ('H100-SXM', 'Test-GPU') ORDER BY name"))]
for value in ("abc", 0):
    wb = load_workbook(book)
    ws = wb["GPUs"]
    ws.cell(row, column).value = value
    wb.save(book)
    # (--take workbook: the registry's 1000 has moved from the workbook's 700 since; the cell is to be written)
    done = CliRunner().invoke(cli, ["--db", url, "apply", str(book), "--quarter", "2026Q4", "--take", "workbook"])
    out.setdefault("gpu_refused", []).append([done.exit_code, done.stdout, done.stderr, gpu_rows()])
for value in ('"abc"', "0"):
    declared = pathlib.Path(folder, "gpu.toml")
    declared.write_text(f'[[gpu]]\\nname = "H100-SXM"\\nmemory_bytes = "80GiB"\\ntdp_watts = {value}\\n')
    done = CliRunner().invoke(cli, ["--db", url, "apply", str(declared)])
    out["gpu_refused"].append([done.exit_code, done.stdout, done.stderr, gpu_rows()])
for words in (["gpu", "add", "Test-GPU", "--memory", "192GiB", "--tdp-watts", "-3"],
              ["gpu", "set", "H100-SXM", "--tdp-watts", "0"]):
    done = CliRunner().invoke(cli, ["--db", url, *words])
    out["gpu_refused"].append([done.exit_code, done.stdout, done.stderr, gpu_rows()])
done = CliRunner().invoke(cli, ["--db", url, "plan", "set", "chat", "--prefix-hit-rate", "0.25"])
for words in (added[:4] + ["other"] + added[5:] + ["--prefix-hit-rate", "1.5"],
              ["--db", url, "plan", "set", "chat", "--prefix-hit-rate", "-0.1"]):
    done = CliRunner().invoke(cli, words)
    out.setdefault("workload_refused", []).append([done.exit_code, done.stdout, done.stderr, plan_rows()])
# kvreg capacity --draft-tokens: the value reaches the scenario rows the what-if binds in place of the scenario
# table (kvreg.db.read.bound_rows), which the views read; a bad value is refused in one line, nothing printed.
import kvreg.db.read
bound = []
bind = kvreg.db.read.bound_rows
kvreg.db.read.bound_rows = lambda table, rows: (bound.append((table, [r.get("draft_tokens") for r in rows]))
                                                or bind(table, rows))
asked = ["--db", url, "capacity", "--model", "Llama-3.1-8B", "--context", "8K,32K", "--format", "json"]
done = CliRunner().invoke(cli, asked + ["--draft-tokens", "3"])
out["capacity"] = [done.exit_code, [r["context_tokens"] for r in json.loads(done.stdout)], list(bound)]
bound.clear()
for value in ("0", "-2"):
    done = CliRunner().invoke(cli, asked + ["--draft-tokens", value])
    out.setdefault("capacity_refused", []).append([done.exit_code, done.stdout, done.stderr, list(bound)])
# --chunked-prefill-size 8k under SGLang's rule binds 8,000 tokens; under vLLM's, or 0, it is refused in one line.
bound.clear()
kvreg.db.read.bound_rows = lambda table, rows: (bound.append((table, [r.get("chunked_prefill_size") for r in rows]))
                                                or bind(table, rows))
for extra in (["--rule", "sglang", "--chunked-prefill-size", "8k"], ["--rule", "vllm", "--chunked-prefill-size", "8k"],
              ["--rule", "sglang", "--chunked-prefill-size", "0"]):
    done = CliRunner().invoke(cli, asked + extra)
    out.setdefault("engine_capacity", []).append([done.exit_code, done.stderr, list(bound)])
    bound.clear()
kvreg.db.read.bound_rows = bind
# plan add stores it under SGLang's rule; plan set --rule vllm clears it, as it does every setting the new rule does
# not read; plan set may not give it under vLLM's.
def engine_row():
    with engine.connect() as conn:
        return list(conn.execute(sql("SELECT p.rule, p.chunked_prefill_size, v.chunked_prefill_size FROM plan p"
                                     " JOIN plan_capacity v ON v.plan = p.name WHERE p.name = 'sgl'")).one())
for words in (added[:4] + ["sgl"] + added[5:] + ["--rule", "sglang", "--chunked-prefill-size", "4K"],
              ["--db", url, "plan", "set", "sgl", "--rule", "vllm"],
              ["--db", url, "plan", "set", "sgl", "--chunked-prefill-size", "2k"]):
    done = CliRunner().invoke(cli, words)
    out.setdefault("engine_plan", []).append([done.exit_code, done.stderr, engine_row()])
from starlette.testclient import TestClient
from kvreg.web.app import create_app
client = TestClient(create_app(url), base_url="http://127.0.0.1")
page = client.get("/?draft-tokens=4").text
out["whatif_field"] = [" ".join(l.split()) for l in page.splitlines() if 'name="draft-tokens"' in l]
lines = page.splitlines()
out["engine_row"] = [" ".join(lines[i - 1].split()) for i, l in enumerate(lines) if 'name="chunked-prefill-size"' in l]
# The plan form (a server that takes writes): the two inputs' fields, after the fields laid out, before the notes.
page = TestClient(create_app(url, allow_writes=True), base_url="http://127.0.0.1").get("/plans/new").text
names = re.findall(r'<(?:input|select) name="([^"]+)"', page)
out["plan_form_fields"] = names[names.index("rule"):]
from kvreg.app.engine import ENGINE_FIELDS, engine_flag
out["engine_flags"] = [engine_flag(n)[2:] for n in ENGINE_FIELDS if n not in ("rule", "engine_release")]
out["plan_form_field"] = [" ".join(l.split()) for l in page.splitlines() if 'name="draft-tokens"' in l]
api = client.get("/api/capacity?model=Llama-3.1-8B&draft-tokens=0")
out["api_refused"] = [api.status_code, api.json()]
print(json.dumps(out))
'''


def _declared() -> dict:
    done = subprocess.run([sys.executable, "-c", DECLARE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_declared_input_reaches_the_table_validator_cli_and_workbook():
    out = _declared()
    # The table: a nullable INTEGER column, its CHECK from positive and at_most, read last (a migration adds it last).
    assert out["column"] == ["INTEGER", True]
    assert out["check"] == ["vision_layers IS NULL OR (vision_layers > 0 AND vision_layers <= 1000)"]
    assert out["read_path_last"] == "vision_layers"
    # The validator: positive is at least 1 for a whole number, at_most 1,000, one line each; 34 and NULL pass.
    assert out["errors"] == ["vision_layers must be at least 1, not 0",
                             "vision_layers must be at most 1,000, not 1,001",
                             "vision_layers must be a whole number, not '34 layers'", None, None]
    # validate_model checks it as declared too (model add, a TOML file, the importers): at_most 1,000 as well.
    assert out["model_error"] == ["vision_layers must be at least 1, not 0",
                                  "vision_layers must be at most 1,000, not 1,001"]
    # The CLI: model add wears --vision-layers with the declared help, and passes it on under its column's name.
    assert out["help"] == ["--vision-layers INTEGER Layers of the vision tower (Llama 4: 34)."]
    assert out["parsed"] == 34
    # The workbook: a Models input column with the declared unit, kind and meaning.
    assert out["workbook"] == [True, "layers", "int", "layers of the vision tower (NULL: no tower)"]
    # The deployment input: a column on plan and scenario with its CHECK, an option of plan add and plan set
    # (the web form parses plan add's), read as typed and checked as declared; "none" clears it on plan set.
    assert out["plan_columns"] == [["INTEGER", True], ["INTEGER", True]]
    assert out["plan_checks"] == ["draft_tokens IS NULL OR draft_tokens > 0"] * 2
    assert out["plan_help"] == ["--draft-tokens INTEGER Speculative tokens proposed per step."] * 2
    assert out["plan_spec"] == 4
    # the web page's plan form: name, label, placeholder; the workload input's field first (plan_latency_options, the
    # inner bundle, generates it before deployment_options does the deployment input's)
    assert out["plan_form"] == [["prefix-hit-rate", "prefix_hit_rate", ""], ["draft-tokens", "draft_tokens", ""]]
    assert out["plan_set_clears"] == {"draft_tokens": None}
    assert out["plan_error"] == "draft_tokens must be at least 1, not 0"
    assert out["plan_sheet"] is True
    # A [[plan]] key of `kvreg export` and `kvreg apply`, after the settings declared before it, the three inputs (the
    # deployment's, then the workload's, each in declaration order), before notes and the plan's allowances and mix.
    assert out["plan_file_keys"] == ["draft_tokens", "chunked_prefill_size", "prefix_hit_rate", "notes",
                                     "allow_gpus", "allow_kv_dtypes", "workload"]
    # The workload input: an option of plan add and plan set (a FLOAT, as a real input is typed) with the declared
    # help, passed on under its column's name.
    assert out["workload_help"] == [
        "--prefix-hit-rate FLOAT Share of the prompt tokens the prefix cache holds, in [0, 1]."] * 2
    assert out["workload_spec"] == 0.5
    # kvreg capacity wears it too, and the what-if page's form lists it (after its settings, placeholder blank: no
    # default). The question has a field for it (a setting read by its generated option, checked as declared).
    assert out["capacity_help"] == ["--draft-tokens INTEGER Speculative tokens proposed per step."]
    # (both inputs declared since, in declaration order: the workload input reaches capacity too)
    assert out["capacity_form"] == [["draft-tokens", "draft_tokens", ""], ["prefix-hit-rate", "prefix_hit_rate", ""]]
    # read by the options capacity generates, in the question's order
    assert out["capacity_question"] == [True, ["draft_tokens", "prefix_hit_rate"], 4]
    # --draft-tokens 3 over two contexts: two scenarios, each bound with draft_tokens 3 in place of a scenario row.
    assert out["capacity"] == [0, [8192, 32768], [["scenario", [3, 3]]]]
    # positive, so at least 1: 0 and -2 are refused in one line naming the option, exit 1, nothing printed or bound;
    # the web page's API refuses the same way.
    assert out["capacity_refused"] == [[1, "", f"Error: --draft-tokens must be at least 1, not {v}\n", []]
                                       for v in (0, -2)]
    assert out["api_refused"] == [400, {"error": "--draft-tokens must be at least 1, not 0"}]
    assert out["whatif_field"] == ['<input name="draft-tokens" value="4" placeholder="" data-default="" autocomplete="off">']
    # The page's plan form lists both, after the fields it lays out (the rule the last of them), before the notes;
    # a field as the what-if page's, placeholder blank (no default), its name the option plan add parses.
    # after the rule, every engine setting's field, the throwaway SGLang one among them (shown under its rule alone),
    # then the inputs declared since and the notes
    assert out["engine_flags"][-1] == "chunked-prefill-size"
    assert out["plan_form_fields"] == ["rule", *out["engine_flags"], "prefix-hit-rate", "draft-tokens", "notes"]
    assert out["plan_form_field"] == ['<input name="draft-tokens" value="" placeholder="" data-default="" autocomplete="off">']
    # The engine setting: an option of capacity (text, read by its unit: tokens) with the declared help, and a field of
    # the what-if page's engine row shown under SGLang's rule alone (name, label, tooltip, rules).
    assert out["engine_help"] == ["--chunked-prefill-size TEXT SGLang: tokens per prefill chunk."]
    assert out["engine_field"] == ["chunked-prefill-size", "chunked_prefill_size", "", "sglang"]
    assert out["engine_row"] == ['<label data-rule="sglang">chunked_prefill_size']
    # capacity --rule sglang --chunked-prefill-size 8k binds 8,000 tokens (8k = 8 x 1,000) in both scenarios; under
    # vLLM's rule, and 0 (declared positive), it is refused in one line, nothing bound.
    assert out["engine_capacity"] == [
        [0, "", [["scenario", [8000, 8000]]]],
        [1, "Error: --chunked-prefill-size is a SGLang setting but the rule is vllm: add --rule sglang, or leave "
            "--chunked-prefill-size out\n", []],
        [1, "Error: --chunked-prefill-size: token count '0' must be at least 1\n", []]]
    # plan add --rule sglang --chunked-prefill-size 4K stores 4,096 (4K = 4 x 1,024); plan set --rule vllm clears it;
    # plan set --chunked-prefill-size under vLLM's rule is refused and writes nothing. The plan_capacity view shows
    # it after the deployment's other inputs (kvreg.figures.views: a deployment input declared since).
    assert out["engine_plan"] == [
        [0, "", ["sglang", 4096, 4096]], [0, "", ["vllm", None, None]],
        [1, "Error: --chunked-prefill-size is a SGLang setting but the rule is vllm: add --rule sglang, or leave "
            "--chunked-prefill-size out\n", ["vllm", None, None]]]
    # The GPU input: an option of gpu add and gpu set, which may change it (GPU_SETTABLE) and stores 700 as given.
    assert out["gpu_help"] == ["--tdp-watts INTEGER Board power in watts (H100 SXM: 700)."] * 2
    assert out["gpu_settable"] is True
    assert out["gpu_set"] == [0, "changed gpu H100-SXM"]
    assert out["gpu_row"] == 700
    # plan add --prefix-hit-rate 0.5 --draft-tokens 4 stores both on the plan row (name, tp, prefix_hit_rate,
    # draft_tokens); plan set --tp 1 --notes kept leaves 0.5 as stored, plan set --prefix-hit-rate 0.25 changes it.
    assert out["workload_add"] == [0, "", [["chat", 1, 0.5, 4]]]
    assert out["workload_set"] == [0, [["chat", 1, 0.5, 4]], 0, [["chat", 1, 0.25, 4]]]
    # The workbook's Plan detail shows the workload input (0.25 as stored) and its GPUs sheet the GPU input (700), and
    # `kvreg apply` reads finance's 0.75 and 1000 back into the plan and the GPU.
    assert out["workbook_cell"] == [0, 0.25, 700]
    assert out["workbook_apply"] == [0, ["~ plan chat prefix_hit_rate: 0.25 -> 0.75",
                                         "~ gpu H100-SXM tdp_watts: 700 -> 1000",
                                         "applied 2 change(s) in one transaction"], [["chat", 1, 0.75, 4]], 1000]
    # positive: a tdp_watts the declaration refuses is refused in one line naming it, exit 1, nothing printed, and
    # nothing written (H100-SXM keeps its 1000, stored as an integer; no GPU Test-GPU), through each writer of a GPU
    # row: `kvreg apply` of the workbook (a cell of text, then 0) and of a TOML file ("abc", then 0), gpu add -3 and
    # gpu set 0. (A validator written field by field left the input to the table: each but the text cell was written,
    # "abc" as text, here where the column is added without its CHECK; with it, a generic "breaks a registry rule".)
    kept = [["H100-SXM", 1000, "integer"]]
    toml = "Error: {}/gpu.toml: [[gpu]] #1 'H100-SXM': tdp_watts must be "
    assert [[code, stdout, stderr.replace(out["folder"], "{}").replace(out["gpu_cell"], "{cell}"), rows]
            for code, stdout, stderr, rows in out["gpu_refused"]] == [
        [1, "", "Error: GPUs!{cell} (tdp_watts) must be a number, not 'abc': type a number\n", kept],
        [1, "", "Error: GPUs!{cell} (tdp_watts): tdp_watts must be at least 1, not 0\n", kept],
        [1, "", toml + "a whole number, not 'abc'\n", kept],
        [1, "", toml + "at least 1, not 0\n", kept],
        [1, "", "Error: tdp_watts must be at least 1, not -3\n", kept],
        [1, "", "Error: tdp_watts must be at least 1, not 0\n", kept]]
    # at_most 1, minimum 0: plan add other --prefix-hit-rate 1.5 and plan set chat --prefix-hit-rate -0.1 are refused
    # in one line naming the input, exit 1, nothing printed, and nothing written (no plan other; chat's 0.25 kept).
    assert out["workload_refused"] == [
        [1, "", f"Error: prefix_hit_rate must be a finite number of at least 0 and at most 1, not {v}\n",
         [["chat", 1, 0.25, 4]]] for v in ("1.5", "-0.1")]
    # And the one thing a declaration cannot write: the migration. Without it the drift test fails.
    assert sorted(out["drift"]) == [["add_column", "gpu", "tdp_watts"], ["add_column", "model", "vision_layers"],
                                    ["add_column", "plan", "chunked_prefill_size"],
                                    ["add_column", "plan", "draft_tokens"], ["add_column", "plan", "prefix_hit_rate"],
                                    ["add_column", "scenario", "chunked_prefill_size"],
                                    ["add_column", "scenario", "draft_tokens"],
                                    ["add_column", "scenario", "prefix_hit_rate"]]
