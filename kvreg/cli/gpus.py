"""`kvreg gpu ...` and `kvreg dtype ...`."""

from __future__ import annotations

import click

from kvreg.app.options import GPU_FIXED, declared_options, input_option
from kvreg.cli.common import emit, emit_record, format_option, open_db, read, user_errors
from kvreg.figures.inputs import INPUTS

# A GPU's dense tensor FLOP per second by dtype (0015), given with a unit (kvreg.core.units.parse_flops: 989.4TFLOPS).
GPU_FLOPS = tuple(n for n, d in INPUTS.items() if d.table == "gpu" and d.unit == "FLOP/s")

GPU_COLUMNS = ["name", "vendor", "memory_bytes", "memory_gib", "reported_memory_bytes", "reported_memory_estimated",
               "memory_bandwidth_bytes_per_s",
               "interconnect", "compute_capability", "fabric", "price_per_hour", "unit_price", "lead_time_quarters", "node_gpus",
               "flops_bf16_per_s", "flops_fp8_per_s", "flops_fp4_per_s", "notes"]


def _gpu_out(row: dict) -> dict:
    from kvreg.figures.python import with_gpu_figures  # the declarations: 30 ms, for the commands that list GPUs

    out = with_gpu_figures(row)
    return {k: out.get(k) for k in GPU_COLUMNS}


def _flops_options(fn):
    """--flops-bf16, --flops-fp8, --flops-fp4: dense tensor FLOP/s with a unit (gpu add and gpu set), as declared,
    each received by its column's name (flops_bf16_per_s)."""
    for name in reversed(GPU_FLOPS):
        fn = input_option(name, type=None)(fn)
        fn.__click_params__[-1].name = name
    return fn


@click.group("gpu")
def gpu_group():
    """Add, list, show and remove GPUs."""


# What gpu add gives by options of its own shape (a size with its unit, --fabric/--pcie-only) or as its argument.
# Every other GPU input (compute capability, prices, any declared later) is an option generated from its
# declaration, received by its column's name.
_GPU_ADD_HANDLED = ("gpu_name", "memory_bytes", "reported_memory_bytes", "memory_bandwidth_bytes_per_s", "fabric")


@gpu_group.command("add")
@declared_options(("gpu",), handled=_GPU_ADD_HANDLED)
@click.argument("name")
@click.option("--memory", required=True, help="HBM size with a unit: 80GiB, 141GiB, 24GB.")
@click.option("--reported-memory", help="What CUDA reports as the total (vLLM's log: total_gpu_memory (79.19GiB)); "
              "the vLLM and SGLang rules size from it. Default: estimated from --memory (NVIDIA: less 400 MiB and "
              "0.5%; AMD: less 16 MiB), and said so.")
@click.option("--gddr-ecc", is_flag=True,
              help="The card's GDDR memory runs with ECC on (data-centre GDDR cards: T4, A10, L4, L40S): ECC keeps "
                   "1/16 of it, so the estimated reported memory is 1/16 smaller. Only used for that estimate.")
@click.option("--bandwidth", help="Memory bandwidth per second: 3.35TB (bytes per second).")
@click.option("--vendor", default="", help="NVIDIA, AMD, Apple, ...")
@click.option("--interconnect", default="", help="NVLink 900 GB/s, PCIe Gen5, ...")
@click.option("--fabric/--pcie-only", default=None,
              help="Whether a node's GPUs share NVLink (or another GPU fabric) or talk over PCIe only: the engines' "
                   "communication buffers at TP > 1 are large on a fabric, small over PCIe. Default: not known (a "
                   "fabric).")
@input_option("lead_time_quarters", suffix=f". Default: {INPUTS['lead_time_quarters'].default}", default=None)
@input_option("node_gpus", suffix=f". Default: {INPUTS['node_gpus'].default}", default=None)
@_flops_options
@click.option("--notes", default="")
@click.pass_context
@user_errors
def gpu_add(ctx, name, memory, reported_memory, gddr_ecc, bandwidth, vendor, interconnect, fabric, lead_time, node_gpus,
            notes, **declared):
    """Add a GPU: kvreg gpu add RTX-4080 --memory 16GiB --bandwidth 716.8GB --compute-capability 8.9 --pcie-only
    --flops-bf16 97.5TFLOPS --flops-fp8 194.9TFLOPS. Without --reported-memory kvreg estimates what CUDA reports
    and says so; give the figure from your engine's log to override it (--reported-memory 79.19GiB)."""
    from kvreg.app.registry import add_gpu
    from kvreg.core.errors import KvregError

    if gddr_ecc and reported_memory is not None:
        raise KvregError("--gddr-ecc only shapes the estimate of the reported memory, and --reported-memory gives it: "
                         "leave one out")
    with open_db(ctx).begin() as conn:
        row = add_gpu(conn, dict(name=name, memory_bytes=memory, reported_memory_bytes=reported_memory,
                                 memory_bandwidth_bytes_per_s=bandwidth, vendor=vendor, interconnect=interconnect,
                                 fabric=fabric, lead_time_quarters=lead_time, node_gpus=node_gpus, notes=notes,
                                 **declared),  # the flops and every generated option, by column
                      estimate=True, gddr_ecc=gddr_ecc)
    click.echo(f"added gpu {name}")
    if row.get("reported_memory_estimated"):
        from kvreg.figures.python import figure_value  # the declarations: only when the memory was estimated

        gib = figure_value("memory_gib", row)
        reported_gib = figure_value("memory_gib", {**row, "memory_bytes": row["reported_memory_bytes"]})
        nominal = f"{gib:g} GiB"
        rule = (f"{nominal} less 16 MiB, as ROCm reports" if row["vendor"].strip().lower() == "amd" else
                f"15/16 of {nominal} (GDDR with ECC) less 400 MiB and 0.5%" if gddr_ecc else
                f"{nominal} less 400 MiB and 0.5%")
        click.echo(f"note: estimated the memory {name} reports as {reported_gib:.2f} GiB "
                   f"({rule}; docs/engine-rules.md); override with --reported-memory from your engine's log "
                   "(vLLM: total_gpu_memory)")


@gpu_group.command("set")
@declared_options(("gpu",), handled=GPU_FIXED, defaults=False)
@click.argument("name")
@input_option("lead_time_quarters", default=None,
              help="Quarters from placing an order to the GPUs serving: plan rollup's order_by is the quarter a "
                   "purchase lands in less this many")
@input_option("node_gpus", default=None,
              help="GPUs in one node as bought: plan rollup --whole-nodes rounds purchases up to whole nodes")
@_flops_options
@click.pass_context
@user_errors
def gpu_set(ctx, name, lead_time, node_gpus, **declared):
    """Change a GPU type's procurement facts or dense FLOP/s: kvreg gpu set H100-SXM --lead-time 2 --node-gpus 8;
    kvreg gpu set H100-SXM --flops-bf16 989.4TFLOPS --flops-fp8 1978.9TFLOPS."""
    from kvreg.app.registry import set_gpu

    with open_db(ctx).begin() as conn:
        set_gpu(conn, name, dict(lead_time_quarters=lead_time, node_gpus=node_gpus, **declared))
    click.echo(f"changed gpu {name}")


@gpu_group.command("list")
@format_option()
@click.pass_context
@user_errors
def gpu_list(ctx, fmt):
    """List GPUs."""
    from kvreg.db.read import list_gpus

    rows = [_gpu_out(r) for r in read(ctx, list_gpus)]
    emit(rows, fmt, GPU_COLUMNS if fmt != "table" else ["name", "vendor", "memory_gib", "memory_bandwidth_bytes_per_s",
                                                        "price_per_hour", "unit_price"])


@gpu_group.command("show")
@click.argument("name")
@format_option()
@click.pass_context
@user_errors
def gpu_show(ctx, name, fmt):
    """Show one GPU."""
    from kvreg.db.read import get_gpu

    emit_record(_gpu_out(read(ctx, lambda conn: get_gpu(conn, name))), fmt)


@gpu_group.command("remove")
@click.argument("name")
@click.pass_context
@user_errors
def gpu_remove(ctx, name):
    """Remove a GPU that no plan uses."""
    from kvreg.app.registry import remove_gpu

    with open_db(ctx).begin() as conn:
        remove_gpu(conn, name)
    click.echo(f"removed gpu {name}")


@click.group("dtype")
def dtype_group():
    """List and add number formats. A new format is a row, not code."""


@dtype_group.command("list")
@format_option()
@click.pass_context
@user_errors
def dtype_list(ctx, fmt):
    """List dtypes with their exact bytes per element."""
    from kvreg.db.read import list_dtypes

    emit(read(ctx, list_dtypes), fmt, ["name", "bytes_per_element", "kind", "mla_bytes_per_token_per_layer",
                                       "scale_bytes_per_token_per_head", "notes"])


@dtype_group.command("add")
@click.argument("name")
@click.option("--bytes-per-element", type=float, required=True, help="Exact bytes per element: 0.5 for int4.")
@click.option("--kind", type=click.Choice(["kv", "weight", "both"]), default="both", show_default=True)
@click.option("--mla-bytes-per-token-per-layer", type=int, help="A format's own MLA layout (fp8_ds_mla: 656).")
@click.option("--scale-bytes-per-token-per-head", type=click.IntRange(min=0),
              help="Scale bytes per token per KV head, K and V together (int8_per_token_head: 8).")
@click.option("--notes", default="")
@click.pass_context
@user_errors
def dtype_add(ctx, name, bytes_per_element, kind, mla_bytes_per_token_per_layer, scale_bytes_per_token_per_head,
              notes):
    """Add a dtype."""
    from kvreg.app.registry import add_dtype, check_bytes_per_element

    check_bytes_per_element(bytes_per_element, "--bytes-per-element")
    with open_db(ctx).begin() as conn:
        add_dtype(conn, dict(name=name, bytes_per_element=bytes_per_element, kind=kind,
                             mla_bytes_per_token_per_layer=mla_bytes_per_token_per_layer,
                             scale_bytes_per_token_per_head=scale_bytes_per_token_per_head, notes=notes))
    click.echo(f"added dtype {name}")
