"""Benchmark `kvreg plan optimize`: N plans x 8 quarters x the catalog's 10 GPU types, bf16 or fp8.

Targets (issue 43): 100 plans to optimality within 10 s and 1,000 plans within 60 s on a 2-core
machine. Each registry is built as bench/run.py builds its own (bench/synth.py: the catalog, N
synthetic plans over 20 models, demand over 8 quarters carried forward, a fleet per GPU type); the
optimizer runs in a fresh process, timed as a whole, and reports how long reading the candidates
through the views and solving the program each took.

    python bench/optimize.py                  # 100 and 1,000 plans
    python bench/optimize.py --sizes 100      # a quick look
    python bench/optimize.py --distinct       # every plan a deployment of its own (the worst case)

The optimizer evaluates each distinct deployment once (plans that share a model, layout, context and
memory settings share their candidates' rows). bench/synth.py cycles 5 layouts over 20 models, so its
1,000 plans share deployments; --distinct gives every plan its own reserve (0.12 + id x 1e-6), so no two
plans share one and every candidate is read through the views: the case a registry of unrelated
plans would be.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth  # noqa: E402  (bench/synth.py, beside this file)

QUARTERS = 8
TARGETS = {100: 10.0, 1000: 60.0}
# The 10 GPU types: the catalog's first ten (--all-gpus allows all 37).
TEN = ("H100-SXM", "H200", "A100-40GB", "A100-80GB", "L40S", "RTX-4090", "RTX-5090", "MI300X", "B200", "M3-Ultra")
# The child: the program built (candidates read through the views) and solved, each timed.
CHILD = """
import json, sys, time
from kvreg.app.access import open_registry
from kvreg.db.read import list_gpus
from kvreg.app.optimize import build_program
url, start, quarters, allowed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
t0 = time.perf_counter()
eng = open_registry(url)
with eng.connect() as conn:
    gpus = ",".join(g["name"] for g in list_gpus(conn) if allowed == [""] or g["name"] in allowed)
    t1 = time.perf_counter()
    program = build_program(conn, start, quarters, allow_gpus=gpus, allow_kv_dtypes="bf16,fp8")
    t2 = time.perf_counter()
    best = program.solve(600)
    t3 = time.perf_counter()
print(json.dumps({"open_s": t1 - t0, "candidates_s": t2 - t1, "solve_s": t3 - t2, "status": best["status"],
                  "gap": best["gap"], "cost": best["cost"], "plans": len(program.cands),
                  "columns": len(program.x) + len(program.k), "gpu_types": len(gpus.split(",")),
                  "deployments": len({c["spec"] for cs in program.cands.values() for c in cs})}))
"""


def run(n: int, work: Path, distinct: bool = False, gpus: tuple[str, ...] = TEN) -> dict:
    """Build a registry of n plans, then time the optimizer over `gpus` (empty: every catalog GPU type)."""
    path = work / f"optimize-{n}{'-distinct' if distinct else ''}.db"
    url = synth.create_registry(path)
    info = synth.fill(path, 20, n)
    start = info["quarter"]
    synth.add_procurement(path, synth.horizon(start, QUARTERS))
    if distinct:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE plan SET reserve = reserve + id * 1e-6")
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, url, start, str(QUARTERS), ",".join(gpus)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{n} plans: the optimizer failed: {out.stderr.strip().splitlines()[-1]}")
    wall = time.perf_counter() - t
    return {"size": n, "wall_s": wall, **json.loads(out.stdout.strip().splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000", help="plans per registry, comma-separated")
    ap.add_argument("--distinct", action="store_true", help="every plan a deployment of its own (no sharing)")
    ap.add_argument("--all-gpus", action="store_true", help="allow every catalog GPU type (37), not the issue's 10")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            r = run(n, Path(tmp), args.distinct, () if args.all_gpus else TEN)
            target = TARGETS.get(n)
            verdict = "" if target is None else ("PASS" if r["wall_s"] <= target and r["status"] == "optimal"
                                                 else "MISS") + f" (target {target:.0f} s)"
            print(f"{r['plans']:,} plans{' (distinct)' if args.distinct else ''} x {QUARTERS} quarters x {r['gpu_types']} GPU types: {r['wall_s']:.1f} s "
                  f"(views {r['candidates_s']:.1f} s, solve {r['solve_s']:.1f} s; {r['columns']:,} columns, "
                  f"{r['deployments']:,} distinct candidate deployments), "
                  f"{r['status']}, gap {r['gap']:.2g} {verdict}")


if __name__ == "__main__":
    main()
