"""Ad-hoc capacity questions, answered by the `capacity` view.

The question's scenarios are bound as parameters in place of the `scenario` table's rows and read
through the view's own SQL (kvreg.db.read.whatif): nothing is written to the registry, and every
figure comes from the same view SQL that plans and reports use.

The statements are plain SQL strings with named parameters, run through a small runner, so
the same code answers on a SQLAlchemy connection (any backend) and on a stdlib sqlite3
connection (kvreg.db.read: `kvreg capacity` without importing SQLAlchemy). This module
imports nothing heavy at load time for that reason.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass, replace

from kvreg.app.engine import ENGINE_FIELDS, check_engine_settings, check_release_engine, parse_engine_options
from kvreg.app.values import declared_value, option_value
from kvreg.core.errors import KvregError, suggest
from kvreg.core.units import format_tokens, parse_fraction, parse_size, parse_token_list, parse_tokens
from kvreg.db.read import runner, whatif
from kvreg.figures.inputs import DEFAULT_GPU, DEPLOYMENT_DEFAULTS, INPUTS, KV_GROUPS, MAX_GPUS_PER_NODE, inputs_of

# A context sweep (report and workbook) asks about at most this many model x GPU pairs: a
# 10,000-model registry would otherwise ask about millions of scenarios.
SWEEP_MAX_PAIRS = 400

JSON_COLUMNS = [
    "model", "gpu", "rule", "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens", "kv_dtype", "weight_dtype",
    "reserve", "block_size", "kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_bytes_per_token_full_per_gpu",
    "kv_heads_per_gpu",
    "kv_bytes_per_sequence_per_gpu", "kv_gib_per_sequence_per_gpu", "state_bytes_per_sequence_per_gpu",
    "weights_gib_per_gpu", "usable_gib_per_gpu", "kv_pool_gib_per_gpu", "kv_pool_tokens", "fits", "reason",
    "max_concurrency", "whole_sequences", "replicas_per_node", "node_concurrency", "decode_tokens_per_s_per_sequence",
    "context_within_claim",
]
TABLE_COLUMNS = ["model", "gpu", "tp", "context_tokens", "kv_dtype", "kv_bytes_per_token_per_gpu",
                 "kv_gib_per_sequence_per_gpu", "weights_gib_per_gpu", "kv_pool_gib_per_gpu", "max_concurrency",
                 "node_concurrency", "reason"]
# With request lengths (--input-tokens, --output-tokens): the latency a replica gives that workload at the
# question's concurrency, after node_concurrency; with a target (--tpot-ms, --ttft-ms) also the requests it
# serves within them and what binds.
LATENCY_COLUMNS = ["input_tokens", "output_tokens", "concurrency", "tpot_ms", "ttft_ms", "output_tokens_per_s_per_gpu",
                   "total_tokens_per_s_per_gpu"]
LATENCY_TABLE_COLUMNS = ["concurrency", "tpot_ms", "ttft_ms", "output_tokens_per_s_per_gpu"]
SLO_COLUMNS = ["tpot_target_ms", "ttft_target_ms", "max_concurrency_within_slo", "binding_constraint"]
SLO_TABLE_COLUMNS = ["max_concurrency_within_slo", "binding_constraint"]
# Under an engine rule, rows also carry what the engine allocates and prints (docs/engine-rules.md),
# next to max_concurrency: vLLM's num_blocks and "GPU KV cache size", SGLang's cell and max_total_num_tokens, the
# sequences the pool holds (vLLM's "Maximum concurrency" line) and the engine's cap on running requests.
ENGINE_COLUMNS = {
    "vllm": ["allocatable_gib_per_gpu", "kv_block_tokens", "page_bytes_per_gpu", "num_blocks", "blocks_per_request",
             "kv_cache_tokens", "sequences_per_rank", "max_running_requests"],
    "sglang": ["allocatable_gib_per_gpu", "cell_bytes_per_token_per_gpu", "sglang_state_slots", "kv_cache_tokens",
               "sequences_per_rank", "max_running_requests"],
}

# Every statement a capacity question runs, on either runner. Named parameters (:name) are
# understood by SQLAlchemy's text() and by sqlite3 alike. "capacity" and "valid_tps" read the
# question's own scenarios (kvreg.db.read.whatif).
SQL = {
    "model": "SELECT * FROM model WHERE name = :name",
    "model_names": "SELECT name FROM model ORDER BY name",
    "gpu": "SELECT * FROM gpu WHERE name = :name",
    "gpu_names": "SELECT name FROM gpu ORDER BY name",
    "first_gpu": "SELECT id FROM gpu ORDER BY id LIMIT 1",
    "dtype_names": "SELECT name FROM dtype WHERE kind IN (:kind, 'both') ORDER BY name",
    "capacity": "SELECT * FROM capacity ORDER BY id",
    "valid_tps": "SELECT tp FROM capacity WHERE tp_valid = 1 ORDER BY tp",
}


_D = DEPLOYMENT_DEFAULTS
# A question's settings: the inputs of one deployment and of the workload a latency is asked for
# (kvreg.figures.inputs, tables "deployment" and "workload"), each a field of Question with its declared
# default (a workload input's: None, not asked). Not the context and the average request, which the
# question lists (contexts) or leaves to the context. An input declared since is a setting with no edit.
SETTINGS = tuple(n for n in (*inputs_of("deployment"), *inputs_of("workload"))
                 if n not in ("context_tokens", "avg_tokens"))
# The settings question_from_options reads by options of their own (--tp auto, --reserve, the engine settings, the
# latency options); any other comes by the option generated from its declaration (kvreg.app.options.declared_options,
# which tests/test_input_lists.py holds to DECLARED) and is checked as declared (kvreg.app.values.declared_value).
_READ_BY_HAND = {"tp", "pp", "dp_attention", "gpus_per_node", "reserve", "kv_cache_memory_bytes", "block_size",
                 *ENGINE_FIELDS, "input_tokens", "output_tokens", "concurrency", "tpot_target_ms", "ttft_target_ms"}
DECLARED = tuple(n for n in SETTINGS if n not in _READ_BY_HAND)
_TYPES = {"int": int, "real": float, "text": str}


def _setting(name: str) -> tuple:
    decl = INPUTS[name]
    kind = _TYPES[decl.kind] | None if decl.nullable else _TYPES[decl.kind]
    if name == "tp":
        kind = int | str  # or "auto": the minimum TP
    return name, kind, field(default=decl.default)


# What a question asks about, written here: every model x GPU x context x KV dtype (x TP under --tp auto) is one
# scenario; then its settings, from the declarations.
Question = make_dataclass("Question", [
    ("models", list[str], field(default_factory=list)),  # empty: every model
    ("gpus", list[str], field(default_factory=lambda: [DEFAULT_GPU])),
    ("contexts", list[int], field(default_factory=lambda: [_D["context_tokens"]])),
    ("kv_dtypes", list[str], field(default_factory=lambda: [INPUTS["kv_dtype"].default])),
    ("weight_dtype", str | None, field(default=None)),  # None: the model's native weight dtype
    *map(_setting, SETTINGS),
], namespace={"__doc__": """A capacity question: every model x GPU x context x KV dtype (x TP under --tp auto) is one
    scenario. Its settings (SETTINGS) are the declared deployment and workload inputs, with their declared defaults
    (kvreg.figures.inputs): tp 1 or "auto", rule theoretical, the engine settings None (the engine's own default),
    the workload None (no latency asked)."""})
Question.__module__ = __name__


def columns(rule: str, table: bool = False, latency: bool = False, slo: bool = False) -> list[str]:
    """The columns `kvreg capacity` prints for a rule: JSON_COLUMNS (TABLE_COLUMNS), with the engine's
    own figures after max_concurrency under an engine rule; `latency` (request lengths given) adds the
    latency figures after node_concurrency, `slo` (a target given) the concurrency within it and what
    binds it (question_columns picks both from a question)."""
    base = TABLE_COLUMNS if table else JSON_COLUMNS
    extra = ENGINE_COLUMNS.get(rule, [])
    if table:
        extra = [c for c in extra if c == "kv_cache_tokens"]
    at = base.index("max_concurrency") + 1
    out = base[:at] + extra + base[at:]
    if latency:
        more = (LATENCY_TABLE_COLUMNS if table else LATENCY_COLUMNS) + (
            (SLO_TABLE_COLUMNS if table else SLO_COLUMNS) if slo else [])
        at = out.index("node_concurrency") + 1
        out = out[:at] + more + out[at:]
    return out


def question_columns(q: Question, table: bool = False) -> list[str]:
    """The columns printed for a question: its rule's, with the latency and target columns when it asks them."""
    return columns(q.rule, table=table, latency=q.input_tokens is not None,
                   slo=q.tpot_target_ms is not None or q.ttft_target_ms is not None)


# The latency workload's options, by input: their flags as messages name them.
_LATENCY_FLAG = {n: INPUTS[n].flag.split()[0]
                 for n in ("input_tokens", "output_tokens", "concurrency", "tpot_target_ms", "ttft_target_ms")}


def latency_from_options(input_tokens=None, output_tokens=None, concurrency=None, tpot_ms=None,
                         ttft_ms=None) -> dict:
    """The workload fields of a Question from the latency options as typed: request lengths go together, and a
    concurrency or a target needs them (check_request_lengths)."""
    f = _LATENCY_FLAG
    typed = dict(input_tokens=input_tokens, output_tokens=output_tokens, concurrency=concurrency,
                 tpot_target_ms=tpot_ms, ttft_target_ms=ttft_ms)
    out = {n: option_value(INPUTS[n], v, f[n]) for n, v in typed.items()}
    check_request_lengths(out["input_tokens"], out["output_tokens"],
                          needing=[f[k] for k in ("concurrency", "tpot_target_ms", "ttft_target_ms") if out[k] is not None])
    return out


def check_request_lengths(input_tokens, output_tokens, *, needing=(), clears: bool = False) -> None:
    """The latency workload's joint checks, for a capacity question and a plan alike (kvreg.app.plans.validate_latency):
    a request's prompt and output lengths go together, and whatever reads them (`needing`: the options given, or the
    plan's targets, in words) has them. `clears`: the command may clear both (plan set)."""
    f = _LATENCY_FLAG
    if (input_tokens is None) != (output_tokens is None):
        raise KvregError(f"{f['input_tokens']} and {f['output_tokens']} go together: give both (1024 and 1024, say)"
                         + (", or none to clear both" if clears else ""))
    if input_tokens is None and needing:
        raise KvregError(f"{needing[0]} needs the requests' lengths: add {f['input_tokens']} and {f['output_tokens']}")


def check_request_fits(who: str, input_tokens: int, output_tokens: int, context: int) -> None:
    """A request (`who`'s: "the requests", "the plan's requests", ...) holds its prompt and output in the context."""
    if input_tokens + output_tokens > context:
        raise KvregError(f"{who} hold {input_tokens:,} + {output_tokens:,} tokens, longer than the context "
                         f"({context:,} tokens, --context): raise --context or shorten them")


def _split(values) -> list[str]:
    """Names given repeatedly and/or comma-separated (--model a,b --model c), in order."""
    return [v.strip() for item in values for v in str(item).split(",") if v.strip()]


def parse_tp(tp: str | int) -> int | str:
    """--tp as typed (`kvreg capacity`, the plan commands, the web page): a whole number >= 1, or "auto"."""
    if str(tp) == "auto":
        return "auto"
    try:
        value = int(tp)
    except ValueError:
        raise KvregError(f"--tp {tp!r} is not understood: give a whole number or auto") from None
    if value < 1:
        raise KvregError("--tp must be at least 1")
    return value


def check_reserve_rule(reserve, rule, kv_cache_memory=None) -> None:
    """--reserve given where it changes nothing is an error: an engine's rule sizes its pool by the engine's own
    settings, and --kv-cache-memory sets the pool directly."""
    if reserve is None:
        return
    if kv_cache_memory is not None:
        raise KvregError("give --reserve or --kv-cache-memory, not both: --kv-cache-memory sets the KV pool directly")
    rule = str(rule or "theoretical").strip().lower()
    if rule in ("vllm", "sglang"):
        share = "--gpu-memory-utilization" if rule == "vllm" else "--mem-fraction-static"
        raise KvregError(f"--reserve is the theoretical rule's share held back, and the rule is {rule}: its pool "
                         f"follows {share} and the memory the engine measures; leave --reserve out")


def question_from_options(*, models=(), gpus=(), context=format_tokens(_D["context_tokens"]),
                          kv_dtype=INPUTS["kv_dtype"].default, weight_dtype="native", tp=str(_D["tp"]), pp=_D["pp"],
                          dp_attention=_D["dp_attention"], gpus_per_node=_D["gpus_per_node"], reserve=None,
                          kv_cache_memory=None, block_size=_D["block_size"], input_tokens=None, output_tokens=None,
                          concurrency=None, tpot_ms=None, ttft_ms=None, **engine) -> Question:
    """A Question from `kvreg capacity`'s options as given (text, as typed): the command and the web
    page's /api/capacity both build their question here. `engine`: --rule and the engine settings, and
    any other declared setting (DECLARED) under its column's name, as its generated option gave it (ask checks
    it); input_tokens ... ttft_ms: the latency options (latency_from_options). context None: the requests'
    input + output tokens when given, else the declared default."""
    declared = {n: engine.pop(INPUTS[n].column) for n in DECLARED if engine.get(INPUTS[n].column) is not None}
    check_reserve_rule(reserve, engine.get("rule"), kv_cache_memory)
    check_release_engine(engine.get("engine_version"), engine.get("rule"))
    workload = latency_from_options(input_tokens, output_tokens, concurrency, tpot_ms, ttft_ms)
    if context is None:
        context = (str(workload["input_tokens"] + workload["output_tokens"]) if workload["input_tokens"]
                   else format_tokens(_D["context_tokens"]))
    return Question(
        models=_split(models), gpus=_split(gpus) or [DEFAULT_GPU], contexts=parse_token_list(context),
        kv_dtypes=_split((kv_dtype,)), weight_dtype=None if weight_dtype == "native" else weight_dtype, tp=parse_tp(tp),
        pp=pp, dp_attention=dp_attention, gpus_per_node=gpus_per_node,
        reserve=parse_fraction(str(_D["reserve"]) if reserve is None else reserve),
        kv_cache_memory_bytes=parse_size(kv_cache_memory) if kv_cache_memory else None, block_size=block_size,
        **workload, **parse_engine_options(engine), **declared,
    )


# --------------------------------------------------------------------------- lookups


def _names(db, key: str, params: dict | None = None) -> list[str]:
    return [r["name"] for r in db.rows(SQL[key], params)]


def _model(db, name: str) -> dict:
    rows = db.rows(SQL["model"], {"name": name})
    if not rows:
        raise suggest(name, _names(db, "model_names"), "model")
    return rows[0]


def _gpu(db, name: str) -> dict:
    rows = db.rows(SQL["gpu"], {"name": name})
    if not rows:
        raise suggest(name, _names(db, "gpu_names"), "gpu")
    return rows[0]


def _check_dtype(db, name: str, kind: str, what: str) -> None:
    known = _names(db, "dtype_names", {"kind": kind})
    if name not in known:
        raise KvregError(f"unknown {what} {name!r}: use one of {', '.join(known)} (or add it with `kvreg dtype add`)")


def _through_view(db, rows: list[dict], sql: str) -> list[dict]:
    """The capacity view's rows for these scenarios (numbered in order: their id), nothing written."""
    return whatif(db, "capacity", {"scenario": [{**r, "id": i} for i, r in enumerate(rows, start=1)]}, sql)


# --------------------------------------------------------------------------- questions


def candidate_tps(gpus_per_node: int, pp: int) -> list[int]:
    """TPs SPEC considers within a node: 1, 2, 4, 8, ... up to gpus_per_node // pp."""
    out, tp = [], 1
    while tp * pp <= gpus_per_node:
        out.append(tp)
        tp *= 2
    return out


def check_pp_layers(pp: int, model: str, layers: int) -> None:
    """Every pipeline stage holds at least one layer: a PP above the model's layers cannot exist."""
    if pp > layers:
        raise KvregError(f"PP {pp} is more than {model}'s {layers} layers (every pipeline stage holds at least one): "
                         f"lower --pp to {layers} or less")


def check_layout(tp: int | str, pp: int, dp_attention: int, gpus_per_node: int) -> list[int]:
    """The one check of a deployment's layout, for a capacity question, a plan and a solver alike: the
    sizes are at least 1, the node holds TP x PP GPUs, DP-attention divides TP. Returns the TPs to try:
    tp itself, or under "auto" the candidate TPs of the node that DP-attention divides. Whether a TP
    suits the model's heads is the `tp_valid` figure's to say (invalid_tp words the error)."""
    if pp < 1 or dp_attention < 1 or gpus_per_node < 1:
        raise KvregError("--pp, --dp-attention and --gpus-per-node must be at least 1")
    if gpus_per_node > MAX_GPUS_PER_NODE:
        raise KvregError(f"--gpus-per-node {gpus_per_node} is more than a node holds (at most {MAX_GPUS_PER_NODE})")
    auto = tp == "auto"
    if not auto and tp * pp > gpus_per_node:
        raise KvregError(f"TP {tp} x PP {pp} needs {tp * pp} GPUs but a node has {gpus_per_node} (--gpus-per-node): "
                         "lower --tp or --pp, or raise --gpus-per-node")
    tps = candidate_tps(gpus_per_node, pp) if auto else [tp]
    if not tps:
        raise KvregError(f"PP {pp} does not fit in a node of {gpus_per_node} GPUs (--gpus-per-node)")
    check_dp_attention(dp_attention, tp, tps)
    # DP-attention splits a TP group into dp_attention ranks: a TP it does not divide cannot exist.
    return [t for t in tps if t % dp_attention == 0]


def invalid_tp(db, model: str, tp: int, pp: int, gpus_per_node: int, *, name_pp: bool = False) -> KvregError:
    """The error for a TP the `tp_valid` figure refuses for this model, naming the TPs it accepts; it names
    the PP when it is not 1, or always (name_pp: a plan's layout is stated whole)."""
    valid = valid_tps(db, model, gpus_per_node, pp)
    node = f"a {gpus_per_node}-GPU node" + (f" with PP {pp}" if pp > 1 or name_pp else "")
    return KvregError(f"TP {tp} is not valid for {model} (attention heads must divide by TP, and KV heads by TP or TP "
                      f"by KV heads): valid TPs in {node} are {', '.join(map(str, valid))}")


def check_dp_attention(dp_attention: int, tp, tps: list[int]) -> None:
    """DP-attention must divide TP (it splits one TP group's GPUs into ranks holding different
    sequences): refuse a layout that cannot exist instead of printing blank figures."""
    if dp_attention < 1:
        raise KvregError("--dp-attention must be at least 1")
    if tp != "auto" and tp % dp_attention:
        raise KvregError(f"--dp-attention {dp_attention} does not divide --tp {tp}: DP-attention splits a TP group "
                         f"into equal ranks, so give a TP that is a multiple of {dp_attention} (or --tp auto)")
    if tp == "auto" and not any(t % dp_attention == 0 for t in tps):
        raise KvregError(f"--dp-attention {dp_attention} divides none of the TPs a node allows "
                         f"({', '.join(map(str, tps))}): lower --dp-attention or raise --gpus-per-node")


def _check_question(db, q: Question) -> tuple[list[dict], list[dict], list[int], dict]:
    """Validate a question: its models, GPUs, dtypes, layout, engine settings and any setting declared since
    (DECLARED, checked as declared and named by its option). Returns models, GPUs, TPs to try and the settings
    of its scenarios: the question's, the engine's checked and normalised."""
    models = [_model(db, m) for m in (q.models or _names(db, "model_names"))]
    gpus = [_gpu(db, g) for g in q.gpus]
    for d in q.kv_dtypes:
        _check_dtype(db, d, "kv", "KV dtype")
    if q.weight_dtype:
        _check_dtype(db, q.weight_dtype, "weight", "weight dtype")
    if q.block_size < 0:
        raise KvregError("--block-size must be 0 (no rounding) or a positive number of tokens")
    tps = check_layout("auto" if q.tp == "auto" else int(q.tp), q.pp, q.dp_attention, q.gpus_per_node)
    for m in models:
        check_pp_layers(q.pp, m["name"], m["layers"])
    if q.input_tokens is not None and q.output_tokens is not None:
        for context in q.contexts:
            check_request_fits("the requests", q.input_tokens, q.output_tokens, context)
    settings = {n: getattr(q, n) for n in SETTINGS}
    settings.update(check_engine_settings({f: getattr(q, f) for f in ENGINE_FIELDS}, q.block_size, q.dp_attention))
    for n in DECLARED:
        settings[n] = declared_value(INPUTS[n], settings[n], INPUTS[n].flag.split()[0])
    return models, gpus, tps, settings


def _scenario(settings: dict, model: dict, gpu: dict, context: int, kv_dtype: str, tp: int,
              weight_dtype: str | None) -> dict:
    """One scenario of a question, as the what-if binds it in place of a scenario row: the question's settings
    with one model, GPU, context, KV dtype and TP (no average request: the context is the request)."""
    return {**settings, "model_id": model["id"], "gpu_id": gpu["id"], "context_tokens": context, "avg_tokens": None,
            "kv_dtype": kv_dtype, "weight_dtype": weight_dtype or model["weight_dtype"], "tp": tp}


def ask(conn, q: Question) -> list[dict]:
    """Answer a capacity question; returns view rows in question order.

    `conn` is a SQLAlchemy connection or a stdlib sqlite3 connection (isolation_level=None).
    """
    db = runner(conn)
    models, gpus, tps, settings = _check_question(db, q)
    rows = [_scenario(settings, m, g, ctx, kvd, tp, q.weight_dtype)
            for m in models for g in gpus for ctx in q.contexts for kvd in q.kv_dtypes for tp in tps]
    result = _through_view(db, rows, SQL["capacity"])

    if q.tp != "auto":
        for r in result:
            if not r["tp_valid"]:
                raise invalid_tp(db, r["model"], int(q.tp), q.pp, q.gpus_per_node)
        return result
    return _pick_auto_tp(result, len(tps))


def sweep(conn, q: Question) -> list[dict]:
    """A context sweep that keeps one layout along each model and GPU: the TP `--tp auto` picks at
    the shortest context (the smallest that holds the weights and one sequence), at every context
    of the question. Concurrency then only falls as the context grows; a context the layout cannot
    hold shows max_concurrency below 1 and fits 0 (a larger TP would, named in the row). A fixed
    `q.tp` is asked as it is. Rows in question order (model, GPU, context, KV dtype)."""
    if q.tp != "auto":
        return ask(conn, q)

    db = runner(conn)
    models, gpus, _tps, settings = _check_question(db, q)
    picked = ask(conn, replace(q, contexts=[min(q.contexts)]))
    tp_of = {(r["model"], r["gpu"], r["kv_dtype"]): r["tp"] for r in picked}
    rows = [_scenario(settings, m, g, ctx, kvd, tp_of[(m["name"], g["name"], kvd)], q.weight_dtype)
            for m in models for g in gpus for ctx in q.contexts for kvd in q.kv_dtypes]
    return _through_view(db, rows, SQL["capacity"])


def _pick_auto_tp(result: list[dict], n_tps: int) -> list[dict]:
    """--tp auto: per question, the smallest valid TP that fits (the declared `fits` figure: a replica
    holds one whole sequence), else the largest valid TP (so the row says why not), else the first row
    (no valid TP: its reason says so)."""
    picked = []
    for i in range(0, len(result), n_tps):
        group = [r for r in result[i:i + n_tps] if r["tp_valid"]]
        fitting = [r for r in group if r["fits"]]
        if fitting:
            picked.append(fitting[0])
        elif group:
            picked.append(group[-1])
        else:
            picked.append(result[i])
    return picked


def valid_tps(conn, model: str, gpus_per_node: int = 8, pp: int = 1) -> list[int]:
    """Every TP from 1 to gpus_per_node // pp that the `tp_valid` figure accepts for this model."""
    db = runner(conn)
    m = _model(db, model)
    first = db.rows(SQL["first_gpu"])
    g = first[0]["id"] if first else None
    rows = [{**DEPLOYMENT_DEFAULTS, **dict.fromkeys(inputs_of("workload")), "model_id": m["id"], "gpu_id": g, "gpus_per_node": gpus_per_node, "tp": tp,
             "pp": pp, "kv_dtype": INPUTS["kv_dtype"].default, "weight_dtype": m["weight_dtype"], "context_tokens": 1,
             "block_size": 0}
            for tp in range(1, gpus_per_node // pp + 1)]
    return [r["tp"] for r in _through_view(db, rows, SQL["valid_tps"])]


def model_context_figures(conn, model: str, gpu: str = DEFAULT_GPU, kv_dtype: str = INPUTS["kv_dtype"].default) -> list[dict]:
    """`kvreg model show`: the figures at 8K, 32K, 128K, 1m and the model's claimed context."""
    m = _model(runner(conn), model)
    contexts = sorted({8192, 32768, 131072, 1000000, int(m["max_position_embeddings"])})
    return ask(conn, Question(models=[model], gpus=[gpu], contexts=contexts, kv_dtypes=[kv_dtype], tp="auto"))


# `kvreg model show --layers`: one row per layer group, every number read from the model row or the capacity view.
LAYER_COLUMNS = ("kind", "layers", "layers_per_gpu", "kv_heads_per_gpu", "k_width", "v_width", "window",
                 "indexer_layers", "indexer_bytes_per_token_per_layer", "state_elements_per_layer", "state_dtype",
                 "bytes_per_token_per_gpu", "state_bytes_per_sequence_per_gpu")


def model_layer_groups(conn, model: str, tp: int = DEPLOYMENT_DEFAULTS["tp"], gpu: str = DEFAULT_GPU,
                       kv_dtype: str = INPUTS["kv_dtype"].default,
                       rule: str = DEPLOYMENT_DEFAULTS["rule"]) -> list[dict]:
    """The model's layer groups (full or MLA, sliding, chunked, linear, cache-less), each with its kind, count,
    heads and widths, window, state elements and dtype, and its KV bytes per token and state bytes per sequence on
    one GPU at `tp` under `rule`, read from the capacity view."""
    db = runner(conn)
    m = _model(db, model)
    (r,) = ask(conn, Question(models=[model], gpus=[gpu], contexts=[8192], kv_dtypes=[kv_dtype], tp=tp, rule=rule))
    mla = m["kv_lora_rank"] is not None
    none = dict.fromkeys(LAYER_COLUMNS)
    groups = []
    if m["full_layers"]:
        groups.append({**none, "kind": "mla" if mla else "full", "layers": m["full_layers"],
                       "layers_per_gpu": r["full_layers_per_gpu"],
                       **({} if mla else {"kv_heads_per_gpu": r["kv_heads_per_gpu"]}),
                       "k_width": f"{m['kv_lora_rank']} latent + {m['qk_rope_head_dim']} rope" if mla else m["head_dim"],
                       "v_width": None if mla else m["v_head_dim"],
                       "indexer_layers": (m["indexer_layers"] or m["full_layers"])
                       if m["indexer_bytes_per_token_per_layer"] else None,
                       "indexer_bytes_per_token_per_layer": m["indexer_bytes_per_token_per_layer"],
                       "bytes_per_token_per_gpu": r["kv_bytes_per_token_kv_heads_layers_per_gpu"]})
    # per-layer kv heads: the full layers holding kv_heads above, each other count a group of its own
    grouped = [n for n in KV_GROUPS if m[f"kv_layers_{n}"]]
    if grouped:
        groups[0].update(layers=m["full_layers"] - sum(m[f"kv_layers_{n}"] for n in grouped),
                         layers_per_gpu=r["kv_heads_layers_per_gpu"])
    for n in grouped:
        groups.append({**groups[0], "layers": m[f"kv_layers_{n}"], "layers_per_gpu": r[f"kv_layers_{n}_per_gpu"],
                       "kv_heads_per_gpu": r[f"kv_heads_{n}_per_gpu"],
                       "bytes_per_token_per_gpu": r[f"kv_bytes_per_token_kv_group_{n}_per_gpu"]})
    for kind, size in (("sliding", "sliding_window"), ("chunked", "attention_chunk_size")):
        if m[f"{kind}_layers"]:
            width = None if mla else (m[f"{kind}_head_dim"] or m["head_dim"])
            groups.append({**none, "kind": kind, "layers": m[f"{kind}_layers"],
                           "layers_per_gpu": r[f"{kind}_layers_per_gpu"],
                           **({} if mla else {"kv_heads_per_gpu": r[f"{kind}_kv_heads_per_gpu"]}),
                           "k_width": width, "v_width": width if m[f"{kind}_head_dim"] else (None if mla else m["v_head_dim"]),
                           "window": m[size], "bytes_per_token_per_gpu": r[f"kv_bytes_per_token_{kind}_per_gpu"]})
    if m["linear_layers"]:
        groups.append({**none, "kind": m["linear_state_kind"] or "linear", "layers": m["linear_layers"],
                       "layers_per_gpu": r["linear_layers_per_gpu"],
                       "state_elements_per_layer": m["linear_state_elements_per_layer"],
                       "state_dtype": m["linear_state_dtype"] or m["weight_dtype"], "bytes_per_token_per_gpu": 0,
                       "state_bytes_per_sequence_per_gpu": r["state_bytes_per_sequence_per_gpu"]})
    if m["no_cache_layers"]:
        groups.append({**none, "kind": "none", "layers": m["no_cache_layers"], "bytes_per_token_per_gpu": 0})
    return groups


__all__ = ["Question", "model_layer_groups", "LAYER_COLUMNS", "question_from_options", "ask", "valid_tps", "candidate_tps", "model_context_figures", "JSON_COLUMNS", "TABLE_COLUMNS",
           "ENGINE_COLUMNS", "columns", "question_columns", "SQL", "runner"]
