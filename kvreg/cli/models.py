"""`kvreg model ...`: add by hand, import config.json files, list, show, remove."""

from __future__ import annotations

import click

from kvreg.cli.common import emit, emit_record, format_option, open_db, user_errors

LIST_COLUMNS = ["name", "family", "layers", "full_layers", "sliding_layers", "linear_layers", "attention_heads",
                "kv_heads", "head_dim", "kv_lora_rank", "params_total", "weight_dtype", "max_position_embeddings",
                "source"]


@click.group("model")
def model_group():
    """Add, import, list, show and remove models."""


@model_group.command("add")
@click.argument("name")
@click.option("--layers", type=int, required=True, help="Transformer layers (all kinds).")
@click.option("--kv-heads", type=int, help="KV heads (default: --attention-heads, i.e. MHA).")
@click.option("--attention-heads", type=int, help="Query heads (default: --kv-heads).")
@click.option("--head-dim", type=int, required=True, help="Key head dimension.")
@click.option("--v-head-dim", type=int, help="Value head dimension (default: --head-dim).")
@click.option("--params-b", type=float, required=True, help="Total parameters in billions (all experts).")
@click.option("--active-params-b", type=float, help="Active parameters per token in billions (MoE).")
@click.option("--weight-dtype", default="bf16", show_default=True, help="Native weight dtype.")
@click.option("--max-context", default="128K", show_default=True, help="Claimed context (max_position_embeddings): 128K, 1m.")
@click.option("--sliding-layers", type=int, default=0, help="Layers with sliding-window attention.")
@click.option("--sliding-window", type=int, help="Sliding window in tokens.")
@click.option("--chunked-layers", type=int, default=0, help="Layers with chunked attention.")
@click.option("--attention-chunk-size", type=int, help="Chunk size in tokens.")
@click.option("--linear-layers", type=int, default=0, help="Linear-attention / state-space layers.")
@click.option("--linear-state-elements", type=int, help="State elements per sequence per linear layer at TP1.")
@click.option("--linear-state-heads", type=int, help="Heads the linear state shards by under TP.")
@click.option("--linear-state-dtype", help="Dtype of the linear state (default: the weight dtype).")
@click.option("--kv-lora-rank", type=int, help="MLA latent rank (DeepSeek: 512).")
@click.option("--qk-rope-head-dim", type=int, help="MLA RoPE key dimension (DeepSeek: 64).")
@click.option("--indexer-bytes-per-token-per-layer", type=int,
              help="MLA models with a sparse-attention indexer cache (DeepSeek-V3.2: 132).")
@click.option("--architecture", default="", help="e.g. LlamaForCausalLM.")
@click.option("--family", default="", help="e.g. llama.")
@click.option("--notes", default="")
@click.pass_context
@user_errors
def model_add(ctx, name, layers, kv_heads, attention_heads, head_dim, v_head_dim, params_b, active_params_b,
              weight_dtype, max_context, sliding_layers, sliding_window, chunked_layers, attention_chunk_size,
              linear_layers, linear_state_elements, linear_state_heads, linear_state_dtype, kv_lora_rank,
              qk_rope_head_dim, indexer_bytes_per_token_per_layer, architecture, family, notes):
    """Add a model by hand.

    Example: kvreg model add My-8B --layers 32 --kv-heads 8 --attention-heads 32 --head-dim 128 --params-b 8
    """
    from kvreg.errors import KvregError
    from kvreg.registry import add_model
    from kvreg.units import parse_tokens

    if kv_heads is None and attention_heads is None:
        raise KvregError("give --kv-heads and/or --attention-heads")
    row = dict(
        name=name, layers=layers, kv_heads=attention_heads if kv_heads is None else kv_heads,
        attention_heads=kv_heads if attention_heads is None else attention_heads,
        head_dim=head_dim, v_head_dim=head_dim if v_head_dim is None else v_head_dim,
        params_total=_billions(params_b, "--params-b"),
        params_active=_billions(active_params_b, "--active-params-b") if active_params_b is not None else None,
        weight_dtype=weight_dtype, max_position_embeddings=parse_tokens(max_context), sliding_layers=sliding_layers,
        sliding_window=sliding_window, chunked_layers=chunked_layers, attention_chunk_size=attention_chunk_size,
        linear_layers=linear_layers, linear_state_elements_per_layer=linear_state_elements,
        linear_state_heads=linear_state_heads, linear_state_dtype=linear_state_dtype, kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=qk_rope_head_dim, indexer_bytes_per_token_per_layer=indexer_bytes_per_token_per_layer,
        architecture=architecture, family=family, notes=notes, source="manual",
    )
    with open_db(ctx).begin() as conn:
        add_model(conn, row)
    click.echo(f"added model {name}")


def _billions(value: float, flag: str) -> int:
    import math

    from kvreg.errors import KvregError

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
@format_option()
@click.pass_context
@user_errors
def model_import(ctx, paths, name, params_b, replace, fmt):
    """Import Hugging Face config.json files: a file, a folder holding one, or - for stdin.

    Several paths are imported in one transaction: all of them or none.
    """
    import sys

    from kvreg.errors import KvregError
    from kvreg.importers.hf import import_path, import_text
    from kvreg.registry import import_model

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
                row, warns = import_text(sys.stdin.buffer.read(), name=name, params_b=params_b)
            else:
                row, warns = import_path(p, name=name, params_b=params_b)
            rows.append(row)
            exact.append(params_b is not None or (p != "-" and _has_index(p)))
            warnings += [f"{row['name']}: {w}" for w in warns]
    notes = []
    with open_db(ctx).begin() as conn:
        for i, (row, is_exact) in enumerate(zip(rows, exact)):
            rows[i], note = import_model(conn, row, replace=replace, exact_params=is_exact, named=bool(name))
            notes += [note] if note else []
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    for note in notes:
        click.echo(note, err=True)
    emit([{k: r.get(k) for k in LIST_COLUMNS} for r in rows], fmt, LIST_COLUMNS)


def _has_index(path: str) -> bool:
    """A model.safetensors.index.json beside the config: the import's parameter count is exact."""
    import pathlib

    from kvreg.importers.hf import INDEX_FILE

    p = pathlib.Path(path)
    config = p / "config.json" if p.is_dir() else p
    return config.name == "config.json" and (config.parent / INDEX_FILE).is_file()


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
    from kvreg.registry import list_models

    with open_db(ctx).connect() as conn:
        rows = list_models(conn)
    emit(rows, fmt, LIST_COLUMNS if fmt == "table" else None)


@model_group.command("show")
@click.argument("name")
@click.option("--gpu", default="H100-SXM", show_default=True, help="GPU for the context figures.")
@click.option("--kv-dtype", default="bf16", show_default=True)
@format_option()
@click.pass_context
@user_errors
def model_show(ctx, name, gpu, kv_dtype, fmt):
    """Show a model and its figures at 8K, 32K, 128K, 1m and its claimed context (minimum TP in a node)."""
    from kvreg.capacity import JSON_COLUMNS, TABLE_COLUMNS, model_context_figures
    from kvreg.registry import get_model

    with open_db(ctx).connect() as conn:
        model = get_model(conn, name)
        figures = model_context_figures(conn, name, gpu, kv_dtype)
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
    emit(figures, fmt, TABLE_COLUMNS)


@model_group.command("remove")
@click.argument("name")
@click.pass_context
@user_errors
def model_remove(ctx, name):
    """Remove a model that no plan uses."""
    from kvreg.registry import remove_model

    with open_db(ctx).begin() as conn:
        remove_model(conn, name)
    click.echo(f"removed model {name}")
