"""Latency accuracy: kvreg's latency figures against public serving measurements.

Every [[run]] of tests/data/latency/measurements.toml is asked of the capacity view (kvreg.capacity.ask: the
same SQL `kvreg capacity --input-tokens ... --concurrency ...` reads) and its measured time per output token,
time to first token, output tokens per second and request latency are set against kvreg's. The rows marked
`role = "fit"` are the ones the efficiency factors of kvreg/figures/performance.py were fitted on; the
"holdout" rows were kept out of the fit. --write puts the table and the error summaries (by GPU, engine,
model family and concurrency, fitted and held-out apart) in docs/latency-accuracy.md.

--fit fits the factors on the "fit" rows and prints them (they are copied into EFFICIENCIES by hand, with
their source): coordinate descent on the mean squared log error, the declared figures evaluated in Python
with the candidate factors in place of the declared ones (kvreg.figures.expr.PythonEvaluator: the same
expression trees the views compile), one set per GPU family and engine with measurements, and one per
engine over all its rows (the fallback for GPUs without their own).

    python bench/latency_accuracy.py            # print the table
    python bench/latency_accuracy.py --write    # refresh docs/latency-accuracy.md
    python bench/latency_accuracy.py --fit      # fit the efficiency factors, print them
    python bench/latency_accuracy.py --check    # exit 1 when docs/latency-accuracy.md is stale (the tests)
"""

from __future__ import annotations

import argparse
import math
import pathlib
import statistics
import sys
import tempfile
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "latency" / "measurements.toml"
DOC = ROOT / "docs" / "latency-accuracy.md"

# measured key -> (kvreg's figure, how a replica's figure becomes the measured one, label)
METRICS = {
    "tpot_ms": ("tpot_ms", 1, "time per output token"),
    "ttft_ms": ("ttft_ms", 1, "time to first token"),
    "output_tokens_per_s": ("output_tokens_per_s_per_gpu", "tp", "output tokens/s (replica)"),
    "request_latency_s": ("request_latency_s", 1, "request latency"),
}
# The targets docs/latency-accuracy.md reports against (median absolute error on held-out rows).
TARGETS = {"tpot_ms": 0.10, "output_tokens_per_s": 0.10, "ttft_ms": 0.25}
FIT_FIELDS = ("bandwidth", "compute", "step_overhead_s", "request_overhead_s")
FIT_FIGURES = {"bandwidth": "bandwidth_efficiency", "compute": "compute_efficiency",
               "step_overhead_s": "step_overhead_s", "request_overhead_s": "request_overhead_s"}
GRIDS = {
    "bandwidth": [round(0.2 + 0.01 * i, 2) for i in range(81)],
    "compute": [round(0.1 + 0.01 * i, 2) for i in range(86)],
    "step_overhead_s": [round(0.0002 * i, 4) for i in range(76)],
    "request_overhead_s": [round(0.001 * i, 3) for i in range(101)],
}
FAMILIES = ("b200", "h200", "h100", "a100", "mi300x")
# The engine's fallback (GPUs without their own factors, all of them NVIDIA's but the M3 Ultra's) is fitted on
# the runs of the other vendors' GPUs left out: ROCm's kernels are not what a CUDA GPU gets.
NOT_IN_FALLBACK = ("mi300x",)
COMPUTE_BOUND_BATCH = 32
COMPUTE_BOUND_PROMPT = 2048


def load_runs() -> list[dict]:
    return tomllib.loads(DATA.read_text(encoding="utf-8"))["run"]


def family(gpu: str) -> str:
    name = gpu.lower()
    return next((f for f in FAMILIES if f in name), "")


def model_family(model: str) -> str:
    return model.split("-")[0] + ("-" + model.split("-")[1] if model.startswith("Llama") else "")


def concurrency_band(c: int) -> str:
    return "1" if c == 1 else "2-8" if c <= 8 else "9-64" if c <= 64 else "65+"


def question(run: dict):
    from kvreg.capacity import Question

    return Question(models=[run["model"]], gpus=[run["gpu"]], contexts=[run["input_tokens"] + run["output_tokens"]],
                    kv_dtypes=[run["kv_dtype"]], weight_dtype=run["weight_dtype"], tp=run["tp"], dp_attention=run.get("dp_attention", 1),
                    rule=run["engine"],
                    engine_version=run.get("engine_version"), input_tokens=run["input_tokens"],
                    output_tokens=run["output_tokens"], concurrency=run["concurrency"])


def registry():
    from kvreg.app.registry import open_registry

    return open_registry(f"sqlite:///{tempfile.mkdtemp(prefix='kvreg-latency-')}/registry.db")


def predict(conn, run: dict) -> dict:
    """kvreg's figures for one run, read from the capacity view."""
    from kvreg.capacity import ask

    (row,) = ask(conn, question(run))
    return row


def compare(runs: list[dict]) -> list[dict]:
    """One row per run and measured metric: measured, predicted, error fraction."""
    engine = registry()
    out = []
    with engine.connect() as conn:
        for run in runs:
            row = predict(conn, run)
            for key, (figure, scale, _label) in METRICS.items():
                if key not in run:
                    continue
                value = row[figure]
                if value is None:
                    raise SystemExit(f"{run['source']}: kvreg gives no {figure} ({row['reason'] or 'no reason'})")
                predicted = value * (run["tp"] if scale == "tp" else scale)
                out.append({**run, "metric": key, "measured": run[key], "predicted": predicted,
                            "error": (predicted - run[key]) / run[key]})
    engine.dispose()
    return out


# --------------------------------------------------------------------------- fitting


def input_rows(runs: list[dict]) -> list[dict]:
    """The capacity view's inputs for each run (its grain's source query), to evaluate figures in Python."""
    from kvreg.capacity import SQL, _check_question, _through_view, _workload, runner
    from kvreg.figures.views import GRAIN

    engine = registry()
    rows = []
    with engine.connect() as conn:
        db = runner(conn)
        for run in runs:
            q = question(run)
            models, gpus, tps, settings = _check_question(db, q)
            scenario = dict(model_id=models[0]["id"], gpu_id=gpus[0]["id"], gpus_per_node=q.gpus_per_node, tp=q.tp,
                            pp=q.pp, dp_attention=q.dp_attention, kv_dtype=q.kv_dtypes[0], weight_dtype=q.weight_dtype,
                            context_tokens=q.contexts[0], avg_tokens=None, reserve=q.reserve,
                            kv_cache_memory_bytes=None, block_size=q.block_size, **settings, **_workload(q))
            (source,) = _through_view(db, [scenario], GRAIN["capacity"].source)
            rows.append(source)
    del SQL
    engine.dispose()
    return rows


def evaluate(source: dict, factors: dict, names: list[str]) -> dict:
    """The figures `names` for one source row with the efficiency figures replaced by `factors`."""
    from kvreg.figures.declarations import FIGURES
    from kvreg.figures.python import PythonEvaluator

    memo = {FIT_FIGURES[k]: v for k, v in factors.items()}

    def ref(name):
        if name not in memo:
            memo[name] = ev.eval(FIGURES[name].expr)
        return memo[name]

    ev = PythonEvaluator(lambda n: source[n], ref)
    return {n: ref(n) for n in names}


def loss(pairs: list[tuple[dict, dict]], factors: dict) -> float:
    total, n = 0.0, 0
    for run, source in pairs:
        got = evaluate(source, factors, [m[0] for m in METRICS.values()])
        for key, (figure, scale, _label) in METRICS.items():
            if key in run and got[figure]:
                total += math.log(got[figure] * (run["tp"] if scale == "tp" else scale) / run[key]) ** 2
                n += 1
    return total / max(n, 1)


def fit(pairs: list[tuple[dict, dict]]) -> tuple[dict, float]:
    """Coordinate descent over the grids, from the middle of each."""
    factors = {"bandwidth": 0.8, "compute": 0.5, "step_overhead_s": 0.002, "request_overhead_s": 0.03}
    # Nothing but a time to first token measures the request overhead: without one it keeps its start. The
    # FLOP/s share is fitted only where some run is bound by FLOPs (a batch of COMPUTE_BOUND_BATCH or more, or a
    # prompt of COMPUTE_BOUND_PROMPT tokens): short prompts at small batches cannot tell it from the request
    # overhead, and it keeps its start (0.5) there.
    fields = [f for f in FIT_FIELDS
              if (f != "request_overhead_s" or any("ttft_ms" in run for run, _ in pairs))
              and (f != "compute" or any(run["concurrency"] >= COMPUTE_BOUND_BATCH
                                         or run["input_tokens"] >= COMPUTE_BOUND_PROMPT for run, _ in pairs))]
    best = loss(pairs, factors)
    for _round in range(8):
        moved = False
        for field in fields:
            for value in GRIDS[field]:
                trial = {**factors, field: value}
                score = loss(pairs, trial)
                if score < best - 1e-12:
                    best, factors, moved = score, trial, True
        if not moved:
            break
    return factors, best


def run_fit(runs: list[dict]) -> None:
    fitted = [r for r in runs if r["role"] == "fit"]
    pairs = list(zip(fitted, input_rows(fitted)))
    groups: dict[tuple[str, str], list] = {}
    for run, source in pairs:
        groups.setdefault((family(run["gpu"]), run["engine"]), []).append((run, source))
        if family(run["gpu"]) not in NOT_IN_FALLBACK:
            groups.setdefault(("", run["engine"]), []).append((run, source))
    for (fam, eng), members in sorted(groups.items(), key=lambda kv: (kv[0][0] == "", kv[0])):
        factors, score = fit(members)
        rms = math.sqrt(score)
        print(f'Efficiency("{fam}", "{eng}", {factors["bandwidth"]}, {factors["compute"]}, '
              f'{factors["step_overhead_s"]}, {factors["request_overhead_s"]}, "..."),  '
              f"# {len(members)} runs, rms log error {rms:.3f}")


# --------------------------------------------------------------------------- the table


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _summary(rows: list[dict], key) -> list[str]:
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((key(r), r["metric"], r["role"]), []).append(abs(r["error"]))
    out = ["| group | metric | role | runs | median abs error | mean abs error |", "|---|---|---|---:|---:|---:|"]
    for (group, metric, role), errs in sorted(groups.items()):
        out.append(f"| {group} | {metric} | {role} | {len(errs)} | {100 * statistics.median(errs):.1f}% |"
                   f" {100 * statistics.fmean(errs):.1f}% |")
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "# Latency accuracy",
        "",
        "Generated by `python bench/latency_accuracy.py --write` from tests/data/latency/measurements.toml (each",
        "run with its public source); do not edit by hand. kvreg's figures are read from the capacity view, as",
        "`kvreg capacity --input-tokens ... --output-tokens ... --concurrency ...` prints them, with the engine's",
        "rule (`--rule vllm` or `sglang`) and the run's TP, dtypes and engine release. Efficiency factors",
        "(kvreg/figures/performance.py) were fitted on the rows marked fit (`--fit`); held-out rows were kept out",
        "of the fit. Error = (kvreg - measured) / measured. The offline-batch rows (vLLM's benchmark_latency: a",
        "batch sent together) are set against the closed-loop figures of the same concurrency: the whole batch's",
        "latency against request_latency_s, its throughput against output_tokens_per_s_per_gpu x TP.",
        "",
        "## Targets on held-out rows",
        "",
        "| metric | target (median abs error) | held-out runs | median abs error | mean abs error | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for metric, target in TARGETS.items():
        errs = [abs(r["error"]) for r in rows if r["metric"] == metric and r["role"] == "holdout"]
        if not errs:
            lines.append(f"| {metric} | {100 * target:.0f}% | 0 | - | - | no held-out measurement |")
            continue
        med = statistics.median(errs)
        lines.append(f"| {metric} | {100 * target:.0f}% | {len(errs)} | {100 * med:.1f}% |"
                     f" {100 * statistics.fmean(errs):.1f}% | {'yes' if med <= target else 'no'} |")
    lines += ["", "## Every measurement", "",
              "| source | model | GPU | engine | TP | in/out | C | role | metric | measured | kvreg | error |",
              "|---|---|---|---|---:|---|---:|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['source']} | {r['model']} | {r['gpu']} | {r['engine']} | {r['tp']} |"
                     f" {r['input_tokens']}/{r['output_tokens']} | {r['concurrency']} | {r['role']} | {r['metric']} |"
                     f" {r['measured']:.4g} | {r['predicted']:.4g} | {_pct(r['error'])} |")
    for title, key in (("GPU", lambda r: r["gpu"]), ("engine", lambda r: r["engine"]),
                       ("model family", lambda r: model_family(r["model"])),
                       ("concurrency", lambda r: concurrency_band(r["concurrency"]))):
        lines += ["", f"## By {title}", ""] + _summary(rows, key)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write docs/latency-accuracy.md")
    parser.add_argument("--fit", action="store_true", help="fit the efficiency factors on the fit rows")
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/latency-accuracy.md is stale")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    runs = load_runs()
    if args.fit:
        run_fit(runs)
        return 0
    text = table(compare(runs))
    if args.check:
        if DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC.relative_to(ROOT)} is stale: run python bench/latency_accuracy.py --write", file=sys.stderr)
            return 1
        return 0
    if args.write:
        DOC.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
