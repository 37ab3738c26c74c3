"""Deployment plans and their quarterly demand: validation, create/update/delete.

A plan is a saved deployment (model, GPU, parallelism, context, workload, memory settings);
demand is the target number of concurrent users of a plan in a quarter. Every figure comes
from the views compiled from kvreg/figures/declarations.py: `plan_capacity` (per plan),
`plan_quarter` (per plan and quarter) and `procurement` (per GPU type and quarter).

Beside it: unsaved plans evaluated through the views (kvreg.app.whatif), the reverse solvers
(kvreg.app.solve) and a plan's calibration from what its engine printed (kvreg.app.calibrate).
"""

from __future__ import annotations

import math

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from kvreg.app.capacity import (check_layout, check_pp_layers, check_request_fits, check_request_lengths,
                                check_reserve_rule, invalid_tp, parse_tp, valid_tps)
from kvreg.app.engine import check_engine_settings, check_release_engine, parse_engine_options
from kvreg.app.options import PLAN_LATENCY
from kvreg.app.registry import check_dtype, check_input, check_int, check_name, check_text, get_gpu, get_model
from kvreg.app.values import option_value
from kvreg.app.whatif import fewest_gpus, solver_tps
from kvreg.core.errors import AlreadyExists, KvregError
from kvreg.core.units import parse_fraction, parse_quarter, parse_size, parse_tokens
from kvreg.db.read import get_plan, list_demand, plan_capacity
from kvreg.db.tables import Demand, Gpu, Model, Plan, WorkloadClass
from kvreg.figures.inputs import DEPLOYMENT_DEFAULTS, ENGINE_SETTINGS, INPUTS, MAX_SHARE, inputs_of

# A spec names its model and GPU; a row (what the plan table stores) carries their ids. Its settings default to
# the deployment inputs' declared defaults; the weight dtype to the model's own (None).
SPEC_DEFAULTS = {**DEPLOYMENT_DEFAULTS, "kv_dtype": INPUTS["kv_dtype"].default, "weight_dtype": None, "notes": ""}
# What an engine printed for a plan (kvreg plan calibrate); it belongs to the settings it was measured with. The
# log it came from (calibration_source) is kept with the measured terms instead.
CALIBRATION_FIELDS = tuple(n for n in inputs_of("calibration") if n != "calibration_source")
# The memory terms a startup log measured (kvreg plan calibrate --log), kept as the plan's inputs while the
# plan stays on the same model, GPU, layout, weights, batch and release; other contexts, utilizations and
# KV dtypes reuse them. MEASURED_BY lists the settings they depend on.
MEASURED_TERMS = ("weights_measured_bytes", "activation_bytes", "non_torch_bytes", "cuda_graph_bytes")
MEASURED_BY = ("tp", "pp", "dp_attention", "weight_dtype", "max_num_batched_tokens", "max_num_seqs", "engine_version",
               "rule")
# The workload a plan's latency is held to (migration 0018's plan columns): request lengths and targets, each its
# option of plan add/set (kvreg.app.options.plan_latency_options). Not the concurrency: a plan's users per replica
# are what its figures solve for (users_per_replica), so the column stays NULL. Changing them changes what the plan
# serves, not what the engine allocates: the calibration stays.
LATENCY_FIELDS = PLAN_LATENCY
# The latency fields of a workload class (migration 0019), with the option text that names each in an error.
CLASS_LATENCY_FIELDS = LATENCY_FIELDS
# A workload input declared since: an option of plan add/set generated from its declaration
# (kvreg.app.options.declared_options), read as typed and checked as declared (kvreg.app.registry.check_input), stored
# on the plan beside its latency workload. None today; an input declared since lands here with no edit.
DECLARED_WORKLOAD = tuple(n for n in inputs_of("workload") if n not in (*LATENCY_FIELDS, "concurrency"))
# The workload columns a plan stores: its latency workload, then the workload inputs declared since.
PLAN_WORKLOAD = (*LATENCY_FIELDS, *(INPUTS[n].column for n in DECLARED_WORKLOAD))
SPEC_FIELDS = ["name", "model", "gpu", *SPEC_DEFAULTS, *PLAN_WORKLOAD]

# A workload mix: at most this many request classes per plan (shares at most kvreg.figures.inputs.MAX_SHARE).
MAX_CLASSES = 64


# What `kvreg plan optimize` may change in a plan beyond its own GPU type and KV dtype (plan columns,
# migration 0016): comma-separated names, NULL for none. TP is always free; PP is held (docs/plans.md).
ALLOWANCE_FIELDS = {"allow_gpus": "--allow-gpus", "allow_kv_dtypes": "--allow-kv-dtypes"}


# --------------------------------------------------------------------------- validation


def allowed_names(values, option: str) -> list[str] | None:
    """--allow-gpus / --allow-kv-dtypes as given (comma-separated text, or a list from a plans file) ->
    the names; None when not given; [] for none (clears a plan's allowance)."""
    if values is None:
        return None
    if isinstance(values, str):
        items = [v.strip() for v in values.split(",")]
    elif isinstance(values, (list, tuple)) and all(isinstance(v, str) for v in values):
        items = [v.strip() for v in values]
    else:
        raise KvregError(f"{option} takes names, comma-separated (H100-SXM,H200), not {values!r}")
    items = [v for v in items if v]
    if len(items) == 1 and items[0].lower() == "none":
        return []
    if any(v.lower() == "none" for v in items):
        raise KvregError(f"{option}: none clears the allowance on its own; give names (H100-SXM,H200) or none")
    return items


def check_allowed(conn, field: str, names: list[str]) -> list[str]:
    """The GPU types or KV dtypes named, as the registry spells them, each once, in the order given;
    an unknown name is a one-line error that suggests close ones."""
    if field == "allow_gpus":
        known = [get_gpu(conn, n)["name"] for n in names]
    else:
        known = [check_dtype(conn, n, "kv", "KV dtype") for n in names]
    return list(dict.fromkeys(known))


def validate_allowances(conn, spec: dict) -> dict:
    """The allowance columns a spec gives (ALLOWANCE_FIELDS; absent keys left out), checked and as the
    plan table stores them: 'H100-SXM,H200', or None for none."""
    out = {}
    for field, option in ALLOWANCE_FIELDS.items():
        if field in spec:
            names = allowed_names(spec[field], option)
            out[field] = ",".join(check_allowed(conn, field, names)) if names else None
    return out


# The deployment inputs neither validate_plan nor the engine settings (kvreg.app.engine) check by hand:
# each is read as its generated option gave it (kvreg.app.options.declared_options) and checked as declared
# (kvreg.app.registry.check_input). None today; an input declared since lands here with no edit.
_CHECKED_BY_HAND = {"tp", "pp", "dp_attention", "gpus_per_node", "context_tokens", "avg_tokens", "reserve",
                    "kv_cache_memory_bytes", "block_size", "rule", "engine_release", *ENGINE_SETTINGS}
DECLARED_SETTINGS = tuple(n for n in inputs_of("deployment") if n not in _CHECKED_BY_HAND)


def spec_from_options(opts: dict, *, partial: bool) -> dict:
    """A plan spec from the deployment options as given (`kvreg plan add/set/solve`, the web page's
    plan form): text as typed, keyed like the command's parameters; with `partial`, only those given."""
    check_reserve_rule(opts.get("reserve"), opts.get("rule"), opts.get("kv_cache_memory"))
    spec: dict = {}
    for key in ("model", "gpu", "gpus_per_node", "pp", "dp_attention", "kv_dtype", "block_size", "notes"):
        if opts.get(key) is not None:
            spec[key] = opts[key]
    if opts.get("tp") is not None:
        spec["tp"] = parse_tp(opts["tp"])
    if opts.get("weight_dtype") is not None:
        spec["weight_dtype"] = None if opts["weight_dtype"] == "native" else opts["weight_dtype"]
    if opts.get("context") is not None:
        spec["context_tokens"] = parse_tokens(opts["context"])
    if opts.get("avg_tokens") is not None:
        spec["avg_tokens"] = None if _is_none(opts["avg_tokens"]) else parse_tokens(opts["avg_tokens"])
    if opts.get("workload"):
        spec["workload"] = parse_workload(opts["workload"])
    if opts.get("reserve") is not None:
        spec["reserve"] = parse_fraction(opts["reserve"])
        spec["kv_cache_memory_bytes"] = None
    if opts.get("kv_cache_memory") is not None:
        pool = opts["kv_cache_memory"]
        spec["kv_cache_memory_bytes"] = None if _is_none(pool) else parse_size(pool)
    spec.update(parse_engine_options(opts))
    for name in (*DECLARED_SETTINGS, *DECLARED_WORKLOAD):  # as typed; validate_plan checks them as declared
        column = INPUTS[name].column
        if opts.get(column) is not None:
            # "none" clears a nullable one
            spec[column] = None if INPUTS[name].nullable and _is_none(str(opts[column])) else opts[column]
    spec.update(_latency_options(opts))
    if not partial:
        spec.setdefault("avg_tokens", None)
        spec.setdefault("kv_cache_memory_bytes", None)
    return spec


def _latency_options(opts: dict) -> dict:
    """--input-tokens, --output-tokens, --tpot-ms, --ttft-ms as given (none clears one), checked one by one;
    validate_latency checks them together once merged with the stored plan."""
    out = {}
    for field in LATENCY_FIELDS:
        flag = INPUTS[field].flag
        value = opts.get(flag[2:].replace("-", "_"))  # the command's parameter, named by its option
        if value is not None:
            out[field] = None if _is_none(str(value)) else option_value(INPUTS[field], value, flag)
    return out


def _checked_latency(values: dict, prefix: str = "") -> dict:
    """The latency fields of a plan or a class (None: not given), each read by its unit and checked as declared
    (kvreg.app.values.option_value), named by its declared flag (a workbook gives them typed)."""
    return {f: option_value(INPUTS[f], values.get(f), prefix + INPUTS[f].flag) for f in LATENCY_FIELDS}


def validate_latency(row: dict, classes: list[dict]) -> None:
    """A plan's latency workload as a whole: request lengths go together and fit the context, a target needs
    lengths (the plan's or its classes'), and the classes give lengths all or none, not beside the plan's."""
    lengths = (row.get("input_tokens"), row.get("output_tokens"))
    check_request_lengths(*lengths, clears=True)
    with_lengths = [c for c in classes if c.get("input_tokens") is not None]
    if with_lengths and len(with_lengths) != len(classes):
        raise KvregError(f"workload class {with_lengths[0]['name']!r} gives request lengths and "
                         f"{next(c['name'] for c in classes if c.get('input_tokens') is None)!r} does not: give "
                         "IN/OUT for every class or for none (the plan's --input-tokens then hold)")
    if with_lengths and lengths[0] is not None:
        raise KvregError("give --input-tokens/--output-tokens or the classes' lengths (--workload CLASS=TOKENS:SHARE"
                         ":IN/OUT), not both: a mix's request is its classes' weighted mean")
    for name, (i, o) in [("the plan", lengths)] + [(f"workload class {c['name']!r}", (c.get("input_tokens"),
                                                                                    c.get("output_tokens")))
                                                  for c in with_lengths]:
        if i is not None:
            check_request_fits(f"{name}'s requests", i, o, row["context_tokens"])
    targets = [row.get("tpot_target_ms"), row.get("ttft_target_ms")]
    targets += [c.get(k) for c in classes for k in ("tpot_target_ms", "ttft_target_ms")]
    if not with_lengths and any(t is not None for t in targets):
        check_request_lengths(*lengths, needing=["a latency target (--tpot-ms, --ttft-ms)"])


def _is_none(value: str) -> bool:
    return value.strip().lower() in ("none", "")


def validate_plan(conn, spec: dict, *, named: bool = True, users: int | None = None, choose_tp: bool = True) -> dict:
    """Check a plan spec and return the row the plan table stores (model and GPU as ids).

    `spec["tp"]` may be "auto": the layout that serves `users` (the plan's peak demand; 1 without
    demand) with the fewest GPUs, found by the same function as `plan solve gpus` (ties: the smaller
    TP); when no valid TP fits, the largest valid one, so the views say why. A plan that does not
    fit is valid: it is stored, and the views say why it does not fit. With choose_tp=False an "auto"
    TP is left as None for a solver to choose.
    """
    s = {**SPEC_DEFAULTS, **{k: v for k, v in spec.items() if v is not None}}
    if named:
        check_name(s.get("name"), "plan")
    if not s.get("model"):
        raise KvregError("a plan needs a model (--model)")
    if not s.get("gpu"):
        raise KvregError("a plan needs a GPU (--gpu)")
    m = get_model(conn, s["model"])
    g = get_gpu(conn, s["gpu"])
    for f in ("gpus_per_node", "pp", "dp_attention", "context_tokens"):
        s[f] = check_int(s[f], f)
    s["block_size"] = check_int(s["block_size"], "block_size", minimum=0)
    s["avg_tokens"] = check_int(s["avg_tokens"], "avg_tokens", allow_none=True)
    s["kv_cache_memory_bytes"] = check_int(s["kv_cache_memory_bytes"], "kv_cache_memory_bytes", allow_none=True)
    s["reserve"] = parse_fraction(s["reserve"])
    s.update(check_engine_settings(s, s["block_size"], s["dp_attention"]))
    for name in DECLARED_SETTINGS:
        s[name] = check_input(name, s[name])
    check_dtype(conn, s["kv_dtype"], "kv", "KV dtype")
    s["weight_dtype"] = check_dtype(conn, s["weight_dtype"] or m["weight_dtype"], "weight", "weight dtype")
    auto = s["tp"] == "auto"
    if not auto:
        s["tp"] = check_int(s["tp"], "tp")
    check_layout(s["tp"], s["pp"], s["dp_attention"], s["gpus_per_node"])
    check_pp_layers(s["pp"], m["name"], m["layers"])
    if not auto and s["tp"] not in valid_tps(conn, m["name"], s["gpus_per_node"], s["pp"]):
        raise invalid_tp(conn, m["name"], s["tp"], s["pp"], s["gpus_per_node"], name_pp=True)
    if s["avg_tokens"] is not None and s["avg_tokens"] > s["context_tokens"]:
        raise KvregError(f"--avg-tokens {s['avg_tokens']:,} is longer than the context ({s['context_tokens']:,} "
                         "tokens, --context): a request cannot hold more than max_model_len; lower one or raise --context")
    row = {k: s[k] for k in SPEC_DEFAULTS}
    row.update(_checked_latency(s))
    row.update({c: check_input(c, s.get(c)) for c in (INPUTS[n].column for n in DECLARED_WORKLOAD)})
    row.update(model_id=m["id"], gpu_id=g["id"], notes=check_text(str(s.get("notes") or ""), "notes"))
    if auto and not choose_tp:
        row["tp"] = None
    elif auto:
        workload = validate_workload(spec.get("workload"), row["context_tokens"], row["avg_tokens"])
        row["tp"] = _auto_tp(conn, row, m["name"], workload, users or 1)
    if named:
        row["name"] = s["name"]
    return row


def validate_workload(classes, context_tokens: int, avg_tokens=None) -> list[dict]:
    """Check a workload mix: [{"class": name, "avg_tokens": n, "share": x}, ...] -> the rows to store.

    Shares are relative weights (0.8 and 0.2, or 4 and 1): the views divide by their sum."""
    classes = list(classes or [])
    if not classes:
        return []
    if avg_tokens is not None:
        raise KvregError("give --avg-tokens or --workload, not both: a mix's average is its classes' weighted mean")
    if len(classes) > MAX_CLASSES:
        raise KvregError(f"a workload has {len(classes)} classes: at most {MAX_CLASSES} are allowed")
    out, seen = [], set()
    for c in classes:
        name = check_name(c.get("class"), "workload class")
        if name in seen:
            raise KvregError(f"workload class {name!r} is given twice: give each class once")
        seen.add(name)
        tokens = check_int(c.get("avg_tokens"), f"tokens of workload class {name!r}")
        if tokens > context_tokens:
            raise KvregError(f"workload class {name!r} holds {tokens:,} tokens, longer than the context "
                             f"({context_tokens:,} tokens, --context): raise --context or shorten the class")
        share = c.get("share")
        if (isinstance(share, bool) or not isinstance(share, (int, float)) or not math.isfinite(share)
                or not 0 < share <= MAX_SHARE):
            raise KvregError(f"share of workload class {name!r} must be a number above 0 and at most {MAX_SHARE:,.0f}"
                             f" (such as 0.8, 80% or 4), not {share!r}")
        latency = _checked_latency(c, prefix=f"workload class {name!r}: ")
        out.append({"name": name, "avg_tokens": tokens, "share": float(share), **latency})
    return out


def parse_workload(values) -> list[dict]:
    """--workload chat=1500:0.8 (repeated, or comma-separated) -> [{"class", "avg_tokens", "share"}, ...];
    a single none -> [] (no mix). Tokens take the --context units (13K); a share may be a percentage.
    Two optional parts give the class's latency workload: :IN/OUT, its requests' prompt and output tokens,
    and :TPOT/TTFT, its targets in ms (- for none): chat=1500:0.8:1000/500:50/2000."""
    items = [part.strip() for v in values for part in str(v).split(",") if part.strip()]
    if len(items) == 1 and items[0].lower() == "none":
        return []
    out = []
    for item in items:
        name, eq, rest = item.rpartition("=")
        tokens, colon, share = rest.partition(":")
        share, _, latency = share.partition(":")
        lengths, _, targets = latency.partition(":")
        if not eq or not colon or not name.strip():
            raise KvregError(f"--workload {item!r} is not understood: write CLASS=TOKENS:SHARE, such as chat=1500:0.8")
        share = share.strip()
        try:
            value = float(share[:-1]) / 100 if share.endswith("%") else float(share)
        except ValueError:
            raise KvregError(f"--workload {item!r}: share {share!r} is not a number (0.8 or 80%)") from None
        c = {"class": name.strip(), "avg_tokens": parse_tokens(tokens.strip()), "share": value}
        for part, keys, example in ((lengths, ("input_tokens", "output_tokens"), "1000/500"),
                                    (targets, ("tpot_target_ms", "ttft_target_ms"), "50/2000 or 50/-")):
            if not part.strip() or part.strip() == "-":
                continue
            first, slash, second = part.partition("/")
            if not slash:
                raise KvregError(f"--workload {item!r}: {part!r} is not understood: write two values with a slash, "
                                 f"such as {example}")
            for key, text_ in zip(keys, (first.strip(), second.strip())):
                if text_ and text_ != "-":
                    c[key] = text_
        out.append(c)
    return out


def get_workload(conn, plan_id: int) -> list[dict]:
    """A plan's workload classes as a spec list (empty: no mix), in the order they were given."""
    rows = conn.execute(select(WorkloadClass.name, WorkloadClass.avg_tokens, WorkloadClass.share,
                               *[getattr(WorkloadClass, k) for k in CLASS_LATENCY_FIELDS])
                        .where(WorkloadClass.plan_id == plan_id).order_by(WorkloadClass.id)).all()
    return [{"class": n, "avg_tokens": t, "share": sh, **dict(zip(CLASS_LATENCY_FIELDS, rest))}
            for n, t, sh, *rest in rows]


def write_workload(conn, plan_id: int, classes: list[dict]) -> None:
    conn.execute(delete(WorkloadClass).where(WorkloadClass.plan_id == plan_id))
    if classes:
        conn.execute(insert(WorkloadClass), [{**c, "plan_id": plan_id} for c in classes])


def _auto_tp(conn, row: dict, model: str, workload: list[dict], users: int) -> int:
    """`plan add/set --tp auto`: the TP of fewest_gpus (what `plan solve gpus` answers) for `users`;
    the largest valid TP when none fits (the stored plan's reason then says why)."""
    tps = solver_tps(conn, row, model, "auto")
    best, _results = fewest_gpus(conn, {**row, "workload": workload}, tps, users)
    return best["tp"] if best is not None else tps[-1]


def _integrity(exc: IntegrityError, name: str) -> KvregError:
    msg = str(exc.orig).lower()
    if "unique" in msg or "duplicate" in msg:
        return _exists(name)
    return KvregError(f"plan {name!r} breaks a registry rule: {str(exc.orig).splitlines()[0]}")


def _exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"plan {name!r} already exists: choose another name, or change it with `kvreg plan set`")


# --------------------------------------------------------------------------- plans


def plan_spec(conn, name: str) -> dict:
    """A stored plan as a spec: model and GPU by name."""
    row = get_plan(conn, name)
    spec = {k: row[k] for k in SPEC_FIELDS if k in row}
    spec["model"] = conn.execute(select(Model.name).where(Model.id == row["model_id"])).scalar_one()
    spec["gpu"] = conn.execute(select(Gpu.name).where(Gpu.id == row["gpu_id"])).scalar_one()
    spec["workload"] = get_workload(conn, row["id"])
    return spec


def plan_solver_spec(conn, name: str) -> dict:
    """A stored plan as a solver's deployment spec (no name, notes or calibration)."""
    spec = plan_spec(conn, name)
    for key in ("name", "notes", *CALIBRATION_FIELDS):
        spec.pop(key, None)
    return spec


def plan_demand_users(conn, name: str, quarter: str) -> int:
    """A plan's users in force in a quarter (carry-forward); no demand then is an error."""
    rows = list_demand(conn, plan=name, quarter=quarter)
    if not rows or not rows[0]["users"]:
        raise KvregError(f"plan {name!r} has no demand in {parse_quarter(quarter)}: give --users, or add it with "
                         f"`kvreg demand set {name} {parse_quarter(quarter)} USERS`")
    return rows[0]["users"]


def add_plan(conn, spec: dict) -> dict:
    """Validate and store a new plan; returns its plan_capacity row."""
    row = validate_plan(conn, spec)
    check_release_engine(row["engine_version"], row["rule"])
    row.update(validate_allowances(conn, spec))
    classes = validate_workload(spec.get("workload"), row["context_tokens"], row["avg_tokens"])
    validate_latency(row, classes)
    if conn.execute(select(Plan.id).where(Plan.name == row["name"])).first() is not None:
        raise _exists(row["name"])
    try:
        plan_id = conn.execute(insert(Plan).values(**row)).inserted_primary_key[0]
    except IntegrityError as exc:
        raise _integrity(exc, row["name"]) from None
    write_workload(conn, plan_id, classes)
    return plan_capacity(conn, row["name"])


def set_plan(conn, name: str, changes: dict) -> dict:
    """Change some fields of a plan (`rename` renames it); the whole result is validated again.

    Changing the model without a weight dtype keeps an explicitly chosen weight dtype but
    follows the new model's native dtype when the plan used the old model's native one. Changing
    the rule clears the old engine's settings that the new rule does not read (unless given), and
    any change but notes, name or workload (avg_tokens, the mix) clears the calibration: it was
    measured with the old settings, and what the engine prints does not depend on the workload.
    """
    changes = dict(changes)
    if not changes:
        raise KvregError(f"nothing to change for plan {name!r}: give at least one option, such as --tp 2")
    allowances = validate_allowances(conn, {k: changes.pop(k) for k in ALLOWANCE_FIELDS if k in changes})
    if not changes:  # only what the optimizer may change: the deployment stays as it is
        conn.execute(update(Plan).where(Plan.id == get_plan(conn, name)["id"]).values(**allowances))
        return plan_capacity(conn, name)
    old = plan_spec(conn, name)
    new_name = changes.pop("rename", None)
    new_name = name if new_name is None else check_name(new_name, "plan")  # --rename "" is refused, not ignored
    if "model" in changes and "weight_dtype" not in changes:
        if old["weight_dtype"] == get_model(conn, old["model"])["weight_dtype"]:
            changes["weight_dtype"] = None
    if changes.get("rule", old["rule"]) != old["rule"]:
        for setting, decl in ENGINE_SETTINGS.items():
            if changes["rule"] not in decl.rules:
                changes.setdefault(setting, None)
    if changes.get("workload"):  # a mix replaces an average, and an average a mix
        changes.setdefault("avg_tokens", None)
    elif changes.get("avg_tokens") is not None:
        changes.setdefault("workload", [])
    if "reserve" in changes:
        check_reserve_rule(changes["reserve"], changes.get("rule", old["rule"]))
    spec = {**old, **changes, "name": new_name}
    # --tp auto sizes for the plan's peak demand (1 user without demand), as `plan solve gpus` would
    peak = conn.execute(select(func.max(Demand.users)).where(Demand.plan_id == get_plan(conn, name)["id"])).scalar()
    row = validate_plan(conn, spec, users=peak)
    if (row["engine_version"], row["rule"]) != (old["engine_version"], old["rule"]):
        check_release_engine(row["engine_version"], row["rule"])
    classes = validate_workload(spec.get("workload"), row["context_tokens"], row["avg_tokens"])
    validate_latency(row, classes)
    if new_name != name and conn.execute(select(Plan.id).where(Plan.name == new_name)).first() is not None:
        raise _exists(new_name)
    settings = [k for k in SPEC_DEFAULTS if k not in ("notes", "avg_tokens")]
    same_hardware = (spec["model"], spec["gpu"]) == (old["model"], old["gpu"])
    if any(row[k] != old[k] for k in settings) or not same_hardware:
        row.update(dict.fromkeys(CALIBRATION_FIELDS))
    if get_plan(conn, name)["calibration_source"] is not None:
        measured_changed = any(row[k] != old[k] for k in MEASURED_TERMS if k not in changes)
        if not same_hardware or measured_changed or any(row[k] != old[k] for k in MEASURED_BY):
            # the log measured another deployment: its terms go, unless given again in this change
            row.update({k: None for k in MEASURED_TERMS if k not in changes}, calibration_source=None)
    try:
        conn.execute(update(Plan).where(Plan.name == name).values(**row, **allowances))
    except IntegrityError as exc:
        raise _integrity(exc, new_name) from None
    if "workload" in changes:
        write_workload(conn, get_plan(conn, new_name)["id"], classes)
    return plan_capacity(conn, new_name)


def remove_plan(conn, name: str) -> None:
    """Remove a plan, its demand and its workload classes."""
    plan = get_plan(conn, name)
    conn.execute(delete(Demand).where(Demand.plan_id == plan["id"]))
    conn.execute(delete(WorkloadClass).where(WorkloadClass.plan_id == plan["id"]))
    conn.execute(delete(Plan).where(Plan.id == plan["id"]))


# --------------------------------------------------------------------------- demand


def set_demand(conn, plan: str, quarter: str, users) -> dict:
    """Set a plan's target concurrent users in a quarter; returns the quarter and users as stored
    and whether a row was added (rather than changed)."""
    plan_id = get_plan(conn, plan)["id"]
    quarter = parse_quarter(quarter)
    users = check_input("users", users)
    existing = conn.execute(
        select(Demand.id).where(Demand.plan_id == plan_id, Demand.quarter == quarter)
    ).scalar()
    try:
        if existing is None:
            conn.execute(insert(Demand).values(plan_id=plan_id, quarter=quarter, users=users))
        else:
            conn.execute(update(Demand).where(Demand.id == existing).values(users=users))
    except IntegrityError:  # another writer set the same quarter between our read and write
        raise KvregError(f"demand of {plan!r} in {quarter} was changed by someone else meanwhile: "
                         "run it again") from None
    return dict(quarter=quarter, users=users, added=existing is None)


def remove_demand(conn, plan: str, quarter: str) -> None:
    """Remove a plan's demand in one quarter; a quarter without demand is an error."""
    plan_id = get_plan(conn, plan)["id"]
    quarter = parse_quarter(quarter)
    gone = conn.execute(delete(Demand).where(Demand.plan_id == plan_id, Demand.quarter == quarter)).rowcount
    if not gone:
        raise KvregError(f"plan {plan!r} has no demand in {quarter}: see `kvreg demand list --plan {plan}`")
