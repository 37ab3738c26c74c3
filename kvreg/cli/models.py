"""`kvreg model ...`: add by hand, import config.json files, list, show, remove."""

from __future__ import annotations

import click

from kvreg.app.options import declared_options, input_option
from kvreg.cli.common import emit, emit_record, format_option, open_db, read, user_errors
from kvreg.core.rules import RULES
from kvreg.figures.inputs import DEFAULT_GPU, DEPLOYMENT_DEFAULTS, INPUTS, KV_GROUPS

LIST_COLUMNS = ["name", "family", "layers", "full_layers", "sliding_layers", "linear_layers", "attention_heads",
                "kv_heads", "head_dim", "kv_lora_rank", "params_total", "weight_dtype", "max_position_embeddings",
                "source"]


@click.group("model")
def model_group():
    """Add, import, list, show and remove models."""


# What model add gives by options of its own shape rather than one generated per input (--params-b, --max-context,
# --tied-embeddings, --kv-head-group, --tower-params-b), or derives (full_layers); and the vision tower's shape,
# which only `model import` reads (config.json's vision_config).
_MODEL_ADD_HANDLED = ("full_layers", "params_total", "params_active", "max_position_embeddings", "embedding_matrices",
                      *[f"kv_{what}_{n}" for n in KV_GROUPS for what in ("heads", "layers")], "tower_params",
                      "vision_num_hidden_layers", "vision_hidden_size")


@model_group.command("add")
# Every other model input (the layer kinds, MLA, MoE, the rotary width, the architecture and any declared later) is
# an option generated from its declaration and reaches the row under its column's name: adding an input to
# kvreg.figures.inputs adds its option here with no edit (docs/ARCHITECTURE.md, "Adding an input").
@declared_options(("model",), handled=_MODEL_ADD_HANDLED)
@click.argument("name")
# Placed by hand, first: the two every model needs, and the three the command reads (kv_heads and attention_heads
# stand in for each other; v_head_dim left out is the registry's default, kvreg.catalog.defaults).
@input_option("layers", required=True)
@input_option("kv_heads")
@input_option("attention_heads")
@input_option("head_dim", required=True)
@input_option("v_head_dim")
@click.option("--params-b", type=float, required=True, help="Total parameters in billions (all experts).")
@click.option("--active-params-b", type=float, help="Active parameters per token in billions (MoE).")
@click.option("--weight-dtype", default="bf16", show_default=True, help="Native weight dtype.")
@click.option("--max-context", default="128K", show_default=True, help="Claimed context (max_position_embeddings): 128K, 1m.")
@click.option("--linear-state-dtype", help="Dtype of the linear state (default: the weight dtype).")
@click.option("--kv-head-group", "kv_head_groups", multiple=True, metavar="HEADSxLAYERS",
              help="Per-layer kv heads: LAYERS of the full layers hold HEADS kv heads, not --kv-heads (DeciLM "
              "n_heads_in_group varying by layer); up to 3 times, e.g. --kv-head-group 4x10 --kv-head-group 2x4.")
@click.option("--tied-embeddings/--untied-embeddings", default=None,
              help="Whether the lm_head is the input embedding matrix (config.json tie_word_embeddings). With "
              "--vocab-size and --hidden-size, the engine rules keep these matrices at 16 bits when the weights are "
              "quantized.")
@click.option("--tower-params-b", type=float, help="A multimodal model's vision/audio towers and projectors, in "
              "billions of parameters, apart from --params-b (the language model): the engine rules load them on "
              "every GPU at 16 bits, split over TP (Qwen2.5-VL-7B: 0.677).")
@click.option("--family", default="", help="e.g. llama.")
@click.option("--notes", default="")
@click.pass_context
@user_errors
def model_add(ctx, name, layers, kv_heads, attention_heads, head_dim, v_head_dim, params_b, active_params_b,
              weight_dtype, max_context, linear_state_dtype, kv_head_groups, tied_embeddings, tower_params_b, family,
              notes, **declared):
    """Add a model by hand.

    Example: kvreg model add My-8B --layers 32 --kv-heads 8 --attention-heads 32 --head-dim 128 --params-b 8
    """
    from kvreg.app.registry import add_model
    from kvreg.core.errors import KvregError
    from kvreg.core.units import parse_tokens

    if kv_heads is None and attention_heads is None:
        raise KvregError("give --kv-heads and/or --attention-heads")
    row = dict(
        name=name, layers=layers, kv_heads=attention_heads if kv_heads is None else kv_heads,
        attention_heads=kv_heads if attention_heads is None else attention_heads,
        head_dim=head_dim,
        params_total=_billions(params_b, "--params-b"),
        params_active=_billions(active_params_b, "--active-params-b") if active_params_b is not None else None,
        weight_dtype=weight_dtype, max_position_embeddings=parse_tokens(max_context),
        linear_state_dtype=linear_state_dtype, **_kv_head_groups(kv_head_groups),
        embedding_matrices=None if tied_embeddings is None else 1 if tied_embeddings else 2,
        tower_params=_billions(tower_params_b, "--tower-params-b") if tower_params_b is not None else None,
        family=family, notes=notes, source="manual",
        **declared,  # every input with a generated option, by its column (kvreg.app.options.declared_options)
    )
    if v_head_dim is not None:  # left out, it is the registry's default (kvreg.catalog.defaults)
        row["v_head_dim"] = v_head_dim
    with open_db(ctx).begin() as conn:
        add_model(conn, row)
    click.echo(f"added model {name}")


def _kv_head_groups(groups: tuple[str, ...]) -> dict:
    """--kv-head-group HEADSxLAYERS, repeated: the model's kv_heads_N / kv_layers_N columns, N from 2."""
    from kvreg.core.errors import KvregError
    from kvreg.figures.inputs import KV_GROUPS

    if len(groups) > len(KV_GROUPS):
        raise KvregError(f"--kv-head-group given {len(groups)} times; a model keeps at most {len(KV_GROUPS)} groups "
                         "beside --kv-heads")
    out = {}
    for n, text in zip(KV_GROUPS, groups):
        heads, _, layers = text.lower().partition("x")
        if not (heads.isdigit() and layers.isdigit()):
            raise KvregError(f"--kv-head-group {text!r} is not HEADSxLAYERS; e.g. 4x10 for 10 layers of 4 kv heads")
        out.update({f"kv_heads_{n}": int(heads), f"kv_layers_{n}": int(layers)})
    return out


def _billions(value: float, flag: str) -> int:
    import math

    from kvreg.core.errors import KvregError

    if value is None or not math.isfinite(value) or value <= 0 or value > 1e6:
        raise KvregError(f"{flag} must be a positive number of billions of parameters, not {value!r}")
    return round(value * 1e9)


@model_group.command("import")
@click.argument("paths", nargs=-1, required=True)
@click.option("--name", help="Model name (one path only; default: the folder or file name).")
@click.option("--params-b", type=float, help="Total parameters in billions, when no safetensors index is beside it.")
@click.option("--replace", is_flag=True, help="Update a model that is already in the registry (the same name, or "
              "the same Hugging Face repo as a catalog model's config) instead of failing; its name, family, "
              "notes and published parameter counts are kept.")
@click.option("--accept-unknown", is_flag=True,
              help="Import even when a config has a key that could change the KV cache and that kvreg does not "
                   "understand (it is named in a warning and ignored).")
@format_option()
@click.pass_context
@user_errors
def model_import(ctx, paths, name, params_b, replace, accept_unknown, fmt):
    """Import Hugging Face config.json files: a file, a model folder holding one (with its *.safetensors
    files or index, read for exact weight bytes), a Hugging Face cache folder (models--org--name), or -
    for stdin.

    Several paths are imported in one transaction: all of them or none. A key that could change the
    cache and that kvreg does not understand stops the import, naming the key; see what an import
    would store first with `kvreg model check PATH`.

    Example: kvreg model import ~/.cache/huggingface/hub/models--Qwen--Qwen3-8B
    """
    import sys

    from kvreg.app.registry import import_model
    from kvreg.core.errors import KvregError
    from kvreg.interchange.hf.messages import batch_warnings
    from kvreg.core.limits import MAX_CONFIG_BYTES
    from kvreg.interchange.hf.row import import_path, import_text

    if name is not None and not name.strip():
        raise KvregError("--name is empty: give the model's name, or leave --name out to name it after the file")
    if name and len(paths) > 1:
        raise KvregError("--name works with one path only")
    rows, warnings, exact = [], [], []
    items = list(paths)
    show_progress = len(items) > 1 and sys.stderr.isatty()
    with click.progressbar(items, label="reading configs", file=sys.stderr) if show_progress else _nullbar(items) as bar:
        for p in bar:
            if p == "-":
                if not name:
                    raise KvregError("reading a config from stdin needs --name")
                # At most one byte past the importer's own limit, which then refuses it in words.
                row, warns = import_text(sys.stdin.buffer.read(MAX_CONFIG_BYTES + 1), name=name, params_b=params_b,
                                         accept_unknown=accept_unknown)
            else:
                row, warns = import_path(p, name=name, params_b=params_b, accept_unknown=accept_unknown)
            rows.append(row)
            exact.append(params_b is not None or (p != "-" and _has_index(p)))
            warnings.append(warns)
    notes, imported = [], []
    with open_db(ctx).begin() as conn:
        for i, (row, is_exact, warns) in enumerate(zip(rows, exact, warnings)):
            rows[i], note = import_model(conn, row, replace=replace, exact_params=is_exact, named=bool(name))
            notes += [note] if note else []
            # an update (a note) from an estimate keeps the registry's counts: the estimate was not stored
            imported.append((rows[i]["name"], warns, note is not None and not is_exact))
    for w in batch_warnings(imported):
        click.echo(f"warning: {w}", err=True)
    unchanged = [n for n in notes if n.endswith("; no figure changed")]
    if len(unchanged) > 1:  # one line for the batch; a model whose figures changed keeps its own
        notes = [n for n in notes if n not in unchanged]
        notes.append(f"updated {len(unchanged)} models already in the registry, no figure changed: "
                     + ", ".join(n.split(": updated the registry's model ", 1)[1].split(" (matched", 1)[0]
                                 for n in unchanged)
                     + " (what an update keeps: --replace in `kvreg model import --help`)")
    for note in notes:
        click.echo(note, err=True)
    emit([{k: r.get(k) for k in LIST_COLUMNS} for r in rows], fmt, LIST_COLUMNS)


def _has_index(path: str) -> bool:
    """Safetensors beside the config (the shards, whose headers are read, or their index): the import's
    parameter count is exact."""
    import pathlib

    from kvreg.interchange.hf.read import INDEX_FILE

    p = pathlib.Path(path)
    config = p / "config.json" if p.is_dir() else p
    return config.name == "config.json" and ((config.parent / INDEX_FILE).is_file()
                                             or any(config.parent.glob("*.safetensors")))


@model_group.command("check")
@click.argument("paths", nargs=-1, required=True)
@click.option("--params-b", type=float, help="Total parameters in billions, as for import.")
@click.option("--accept-unknown", is_flag=True, help="Explain the import as --accept-unknown would do it.")
@format_option()
@user_errors
def model_check(paths, params_b, accept_unknown, fmt):
    """Explain what importing each config would store, without writing anything: layer kinds, heads and
    head widths per kind, state, parameters (exact or estimated, and from what), KV bytes per token
    (bf16, one GPU) and every assumption. A config that cannot be imported prints why; the exit code is
    then 1.

    Example: kvreg model check config.json ~/models/Llama-3_3-Nemotron-Super-49B-v1
    """
    from kvreg.core.errors import KvregError
    from kvreg.interchange.check import explain
    from kvreg.interchange.hf.config import ConfigError
    from kvreg.interchange.hf.row import explain_path

    records, failed = [], 0
    for p in paths:
        try:
            row, warns, details = explain_path(p, params_b=params_b, accept_unknown=accept_unknown)
        except ConfigError as exc:
            failed += 1
            records.append({"model": None, "source": p, "error": str(exc)})
            continue
        records.append(explain(row, warns, details))
    if fmt == "json":
        import json

        click.echo(json.dumps(records, indent=2, ensure_ascii=False))
    elif fmt == "csv":
        flat = [{k: "; ".join(v) if isinstance(v, list) else v for k, v in r.items()} for r in records]
        keys = list(dict.fromkeys(k for r in flat for k in r))
        emit(flat, fmt, keys)
    else:
        for i, r in enumerate(records):
            if i:
                click.echo("")
            _echo_check(r)
    if failed:
        raise KvregError(f"{failed} of {len(paths)} config(s) cannot be imported (see above)")


def _echo_check(record: dict) -> None:
    """One check as aligned `key: value` lines; lists one item a line."""
    width = max(len(k) for k in record)
    for key, value in record.items():
        if isinstance(value, list):
            click.echo(f"{key:<{width}}  {'(none)' if not value else ''}".rstrip())
            for item in value:
                click.echo(f"  - {item}")
        elif value is not None:
            click.echo(f"{key:<{width}}  {value:,}" if isinstance(value, int) and not isinstance(value, bool)
                       else f"{key:<{width}}  {value}")


class _nullbar:
    def __init__(self, items):
        self.items = items

    def __enter__(self):
        return self.items

    def __exit__(self, *exc):
        return False


@model_group.command("list")
@format_option()
@click.pass_context
@user_errors
def model_list(ctx, fmt):
    """List models (json/csv carry every field)."""
    from kvreg.db.read import list_models

    rows = read(ctx, list_models)
    emit(rows, fmt, LIST_COLUMNS if fmt == "table" else None)


@model_group.command("show")
@click.argument("name")
@click.option("--gpu", default=DEFAULT_GPU, show_default=True, help="GPU for the context figures.")
@click.option("--kv-dtype", default=INPUTS["kv_dtype"].default, show_default=True)
@click.option("--layers", "layers", is_flag=True,
              help="List the model's layer groups instead: kind (full, mla, sliding, chunked, mamba2, gated_deltanet, "
              "kda, lightning, short_conv, linear, none), count, heads and widths, window, indexer, state elements and "
              "dtype, KV bytes per token and state bytes per sequence on one GPU at --tp.")
@click.option("--tp", type=int, default=DEPLOYMENT_DEFAULTS["tp"], show_default=True,
              help="With --layers: tensor parallelism of the per-GPU bytes.")
@click.option("--rule", type=click.Choice(RULES), default=DEPLOYMENT_DEFAULTS["rule"], show_default=True,
              help="With --layers: whose reading of the cache (vllm and sglang count an MLA model's indexer cache).")
@format_option()
@click.pass_context
@user_errors
def model_show(ctx, name, gpu, kv_dtype, layers, tp, rule, fmt):
    """Show a model and its figures at 8K, 32K, 128K, 1m and its claimed context (minimum TP in a node).

    With --layers, the layer groups the import read, one line each, and what each holds on one GPU at --tp.

    Example: kvreg model show Kimi-Linear-48B-A3B-Instruct --layers --tp 4 --rule vllm
    """
    from kvreg.app.capacity import JSON_COLUMNS, LAYER_COLUMNS, TABLE_COLUMNS, model_context_figures, model_layer_groups
    from kvreg.db.read import get_model

    if layers:
        groups = read(ctx, lambda conn: model_layer_groups(conn, name, tp, gpu, kv_dtype, rule))
        emit(groups, fmt, LAYER_COLUMNS)
        return

    model, figures = read(ctx, lambda conn: (get_model(conn, name), model_context_figures(conn, name, gpu, kv_dtype)))
    if fmt == "json":
        import json

        from kvreg.cli.common import normalise

        model.pop("id", None)
        click.echo(json.dumps({"model": normalise([model])[0],
                               "figures": [{c: r.get(c) for c in JSON_COLUMNS} for r in normalise(figures)]},
                              indent=2, ensure_ascii=False))
        return
    if fmt == "csv":
        emit(figures, fmt, JSON_COLUMNS)
        return
    model.pop("id", None)
    emit_record(model, fmt)
    click.echo("")
    columns = list(TABLE_COLUMNS)
    if model["sliding_layers"] or model["chunked_layers"] or model["linear_layers"]:
        # Hybrid: per token inside every window, and per token past the windows (full layers only).
        at = columns.index("kv_bytes_per_token_per_gpu") + 1
        columns[at:at] = ["kv_bytes_per_token_full_per_gpu"]
    emit(figures, fmt, columns)


@model_group.command("remove")
@click.argument("name")
@click.pass_context
@user_errors
def model_remove(ctx, name):
    """Remove a model that no plan uses."""
    from kvreg.app.registry import remove_model

    with open_db(ctx).begin() as conn:
        remove_model(conn, name)
    click.echo(f"removed model {name}")
