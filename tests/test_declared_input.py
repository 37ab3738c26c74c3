"""Adding an input is its declaration (kvreg/figures/inputs.py), a migration and, for a model field, the
importer's key: the declaration alone reaches the table (column and CHECK), the read path's columns, the
validator and its one-line errors, the CLI option with its help (model add, gpu add/set, plan add/set,
capacity), the capacity question and the scenario rows it binds, the web forms (plan and what-if), and the
workbook's input columns.

Three throwaway inputs, a model's `vision_layers`, a deployment's `draft_tokens` and a GPU's `tdp_watts`, are added to the
declarations' source as one would edit the file, and kvreg is imported from it in a fresh interpreter (the
tables and options are built once, at import); nothing else is edited. Their migration is the one thing
missing, and the drift test's comparison says so.
"""

from __future__ import annotations

import json
import subprocess
import sys

DECLARE = '''
import importlib.util, json, pathlib, sys, tempfile
import kvreg.figures

# kvreg/figures/inputs.py with two more declarations at the end of _INPUTS, loaded as that module.
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
from kvreg.app.registry import input_error, validate_model
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
           max_position_embeddings=131072, vision_layers=0)
try:
    validate_model(None, row)
except Exception as exc:
    out["model_error"] = str(exc)
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
for words in (["plan", "add", "--help"], ["plan", "set", "--help"]):
    text = CliRunner().invoke(cli, words, terminal_width=200).output
    out.setdefault("plan_help", []).extend(" ".join(l.split()) for l in text.splitlines() if "--draft-tokens" in l)
params = options.parse(options.PLAN_ADD, [("model", "Llama-3.1-8B"), ("gpu", "H100-SXM"), ("draft-tokens", "4")],
                       ("chat",))
out["plan_spec"] = spec_from_options(params, partial=False)["draft_tokens"]
out["plan_form"] = options.declared_fields(options.PLAN_ADD)
out["plan_set_clears"] = spec_from_options({"draft_tokens": "none"}, partial=True)
out["plan_error"] = input_error("draft_tokens", "0")
out["plan_sheet"] = "draft_tokens" in xlsx._SETTINGS

# kvreg capacity and the what-if page's form: the deployment input is an option of capacity and a form field.
text = CliRunner().invoke(cli, ["capacity", "--help"], terminal_width=200).output
out["capacity_help"] = [" ".join(l.split()) for l in text.splitlines() if "--draft-tokens" in l]
out["capacity_form"] = options.declared_fields(options.CAPACITY)
from kvreg.app.capacity import DECLARED, question_from_options
question = question_from_options(**options.parse(options.CAPACITY, [("draft-tokens", "4")]))
out["capacity_question"] = [DECLARED == tuple(options.declared_inputs(options.CAPACITY)), DECLARED,
                            question.draft_tokens]

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
    for table, column in (("model", "vision_layers"), ("plan", "draft_tokens"), ("scenario", "draft_tokens"),
                          ("gpu", "tdp_watts")):
        conn.execute(sql(f"ALTER TABLE {table} ADD COLUMN {column} INTEGER"))
done = CliRunner().invoke(cli, ["--db", url, "gpu", "add", "H100-SXM", "--memory", "80GiB"])
done = CliRunner().invoke(cli, ["--db", url, "gpu", "set", "H100-SXM", "--tdp-watts", "700"])
out["gpu_set"] = [done.exit_code, done.output.strip()]
with engine.connect() as conn:
    out["gpu_row"] = conn.execute(sql("SELECT tdp_watts FROM gpu WHERE name = 'H100-SXM'")).scalar()
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
kvreg.db.read.bound_rows = bind
from starlette.testclient import TestClient
from kvreg.web.app import create_app
client = TestClient(create_app(url), base_url="http://127.0.0.1")
page = client.get("/?draft-tokens=4").text
out["whatif_field"] = [" ".join(l.split()) for l in page.splitlines() if 'name="draft-tokens"' in l]
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
    assert out["model_error"] == "vision_layers must be at least 1, not 0"
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
    assert out["plan_form"] == [["draft-tokens", "draft_tokens", ""]]  # the web page's plan form: name, label, placeholder
    assert out["plan_set_clears"] == {"draft_tokens": None}
    assert out["plan_error"] == "draft_tokens must be at least 1, not 0"
    assert out["plan_sheet"] is True
    # kvreg capacity wears it too, and the what-if page's form lists it (after its settings, placeholder blank: no
    # default). The question has a field for it (a setting read by its generated option, checked as declared).
    assert out["capacity_help"] == ["--draft-tokens INTEGER Speculative tokens proposed per step."]
    assert out["capacity_form"] == [["draft-tokens", "draft_tokens", ""]]
    assert out["capacity_question"] == [True, ["draft_tokens"], 4]  # read by the option capacity generates
    # --draft-tokens 3 over two contexts: two scenarios, each bound with draft_tokens 3 in place of a scenario row.
    assert out["capacity"] == [0, [8192, 32768], [["scenario", [3, 3]]]]
    # positive, so at least 1: 0 and -2 are refused in one line naming the option, exit 1, nothing printed or bound;
    # the web page's API refuses the same way.
    assert out["capacity_refused"] == [[1, "", f"Error: --draft-tokens must be at least 1, not {v}\n", []]
                                       for v in (0, -2)]
    assert out["api_refused"] == [400, {"error": "--draft-tokens must be at least 1, not 0"}]
    assert out["whatif_field"] == ['<input name="draft-tokens" value="4" placeholder="" data-default="" autocomplete="off">']
    # The GPU input: an option of gpu add and gpu set, which may change it (GPU_SETTABLE) and stores 700 as given.
    assert out["gpu_help"] == ["--tdp-watts INTEGER Board power in watts (H100 SXM: 700)."] * 2
    assert out["gpu_settable"] is True
    assert out["gpu_set"] == [0, "changed gpu H100-SXM"]
    assert out["gpu_row"] == 700
    # And the one thing a declaration cannot write: the migration. Without it the drift test fails.
    assert sorted(out["drift"]) == [["add_column", "gpu", "tdp_watts"], ["add_column", "model", "vision_layers"],
                                    ["add_column", "plan", "draft_tokens"], ["add_column", "scenario", "draft_tokens"]]
