"""Benchmark kvreg as whole processes, each figure beside a baseline measured in the same run.

    python bench/run.py [--sizes 100,1000,10000] [--repeat 5] [--repeat-at 10000=1,seeded=3] [--imports 1000]
                        [--out docs/performance.md]

Builds synthetic registries (bench/synth.py: N models and N plans with two quarters of demand
for each size N), then times, as separate processes started the way a user starts them:
start-up (`kvreg --help`, `kvreg capacity`) against `python -c pass`; `kvreg plan list --format
json` against a bare sqlite3 query of the same view; `kvreg report` (md and xlsx) against a bare
XlsxWriter write of the same cells and stored values; `kvreg model import` of many config files;
the seeded registry's full report. Each figure is the median of --repeat runs (--repeat-at: other
counts at some sizes, or on the seeded registry); peak memory is
the child's ru_maxrss (os.wait4: the RUSAGE_CHILDREN figure of that one process). Results are
printed as they come and written, with the machine and the targets (PASS/MISS), to --out.

A command kvreg does not have yet is reported as "not available" and skipped. The exit status
is 1 if any command that exists failed or timed out: CI runs the smallest size so this script
cannot rot (tests/test_bench_smoke.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import synth  # noqa: E402  (beside this script, not a package)

GIB = 1024**3

BARE_QUERY = """\
import json, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
cur = conn.execute("SELECT * FROM plan_capacity ORDER BY plan")
names = [d[0] for d in cur.description]
sys.stdout.write(json.dumps([dict(zip(names, r)) for r in cur], indent=2))  # one write, as kvreg prints
"""

# Every cell of the report's workbook: (formula or value, stored result), read with openpyxl.
DUMP_CELLS = """\
import pickle, sys
from openpyxl import load_workbook
forms = load_workbook(sys.argv[1], read_only=True)
vals = load_workbook(sys.argv[1], read_only=True, data_only=True)
sheets = []
for fs, vs in zip(forms.worksheets, vals.worksheets):
    rows = [[(f, v) for f, v in zip(fr, vr)] for fr, vr in zip(fs.iter_rows(values_only=True), vs.iter_rows(values_only=True))]
    sheets.append((fs.title, rows))
with open(sys.argv[2], "wb") as f:
    pickle.dump(sheets, f)
print(sum(f is not None for _, rows in sheets for r in rows for f, _v in r))
"""

# The same cells written with bare XlsxWriter (constant_memory, as kvreg writes): each formula with its
# stored result, text as text, numbers as numbers; no formats, widths, charts or validation.
BARE_WORKBOOK = """\
import pickle, sys
import xlsxwriter
with open(sys.argv[1], "rb") as f:
    sheets = pickle.load(f)
wb = xlsxwriter.Workbook(sys.argv[2], {"constant_memory": True, "strings_to_formulas": False,
                                       "strings_to_numbers": False, "strings_to_urls": False})
for title, rows in sheets:
    ws = wb.add_worksheet(title)
    for r, row in enumerate(rows):
        for c, (f, v) in enumerate(row):
            if f is None:
                continue
            if isinstance(f, str) and f.startswith("="):
                ws.write_formula(r, c, f, None, "" if v is None else v)
            elif isinstance(f, str):
                ws.write_string(r, c, f)
            else:
                ws.write_number(r, c, f)
wb.close()
"""


# --------------------------------------------------------------------------- running processes


@dataclass
class Timing:
    """Runs of one command: wall seconds each, the largest peak RSS, and what went wrong if anything."""

    label: str
    runs: list[float] = field(default_factory=list)
    rss_kib: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else math.nan


def run_once(cmd: list[str], cwd: Path, timeout: float, stdout: Path, memory: int = 0) -> tuple[float, int, int, str]:
    """(wall seconds, peak RSS KiB, exit code, stderr tail) of one process; exit code -9: timed out.

    `memory` caps the process's address space (bytes; 0: no cap).
    """
    with open(stdout, "wb") as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=_child_env(), start_new_session=True)
        if memory:
            _limit(proc.pid, memory)
        timer = threading.Timer(timeout, lambda: _kill(proc.pid))
        timer.start()
        # wait4, not Popen.wait: it also returns this child's own rusage (peak RSS).
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    return elapsed, usage.ru_maxrss, proc.returncode, lines[-1][:300] if lines else ""


def _limit(pid: int, memory: int) -> None:
    """A runaway report fails with MemoryError instead of pushing the machine into swap."""
    try:
        resource.prlimit(pid, resource.RLIMIT_AS, (memory, memory))
    except OSError:  # already exited
        pass


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child_env() -> dict:
    """The environment of every timed process.

    Peak memory caveat: Linux starts a child's ru_maxrss from its parent's RSS at fork, so this
    process imports nothing heavy (registries are created and workbooks read in children).
    """
    env = {k: v for k, v in os.environ.items() if k != "KVREG_DB"}  # every command names its registry
    env.setdefault("MPLBACKEND", "Agg")
    return env


def measure(label: str, cmd: list[str], ctx: "Context", prepare=None, repeat: int | None = None) -> Timing:
    """Median of `repeat` runs; `prepare` (untimed) runs before each, e.g. to copy a fresh registry."""
    t = Timing(label)
    for _ in range(repeat or ctx.repeat):
        if prepare:
            prepare()
        secs, rss, rc, err = run_once(cmd, ctx.work, ctx.timeout, ctx.work / "stdout", ctx.memory)
        t.rss_kib = max(t.rss_kib, rss)
        if rc == -signal.SIGKILL:
            t.error = f"timed out after {ctx.timeout:.0f} s"
            break
        if rc != 0:
            t.error = f"exit {rc}: {err}"
            break
        t.runs.append(secs)
    ctx.show(t)
    return t


# --------------------------------------------------------------------------- context and results


@dataclass
class Context:
    work: Path
    repeat: int
    timeout: float
    kvreg: list[str]
    memory: int = 0
    repeat_at: dict[int | str, int] = field(default_factory=dict)  # size or SEEDED -> runs (--repeat-at)
    results: list[dict] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    failed: bool = False

    def runs(self, size: int | str) -> int:
        """Runs per figure for a registry of this size, or for the seeded registry (SEEDED)."""
        return self.repeat_at.get(size, self.repeat)

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def show(self, t: Timing) -> None:
        if t.ok:
            self.say(f"  {t.label:<52} {t.median:8.3f} s  (median of {len(t.runs)}, peak {t.rss_kib / 1024:.0f} MiB)")
        else:
            self.failed = True
            self.say(f"  {t.label:<52} FAILED: {t.error}")

    def record(self, what: str, size: int | None, t: Timing, base: Timing | None = None,
               paired: list[float] | None = None) -> dict:
        """`paired`: ratios of runs taken in turn with the baseline's (A B A B ...); their median is
        the figure's ratio, steadier than a ratio of medians when the machine's speed drifts."""
        row = {"what": what, "size": size, "timing": t, "baseline": base}
        if paired and t.ok:
            row["paired"] = statistics.median(paired)
            self.say(f"  {'':<52} = {row['paired']:.1f}x {base.label} (median of {len(paired)} paired ratios, "
                     f"{min(paired):.1f}x-{max(paired):.1f}x)")
        elif t.ok and base is not None and base.ok:
            self.say(f"  {'':<52} = {t.median / base.median:.1f}x {base.label}")
        self.results.append(row)
        return row

    def unavailable(self, what: str, why: str) -> None:
        self.say(f"  {what:<52} not available: {why}")
        self.results.append({"what": what, "size": None, "timing": None, "baseline": None, "unavailable": why})


def kvreg_command() -> list[str]:
    """The installed `kvreg` beside this Python, as a user runs it."""
    exe = Path(sys.executable).parent / "kvreg"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from kvreg.cli import main; sys.argv[0] = 'kvreg'; main()"]


def available(ctx: Context, *words: str) -> str | None:
    """None if `kvreg WORDS --help` works, else why not."""
    secs, _, rc, err = run_once([*ctx.kvreg, *words, "--help"], ctx.work, 60, ctx.work / "stdout")
    return None if rc == 0 else (err or f"`kvreg {' '.join(words)} --help` exited {rc}")


# --------------------------------------------------------------------------- the measurements


def bench_startup(ctx: Context, sizes: dict[int, dict]) -> None:
    ctx.say("\n== start-up")
    base = measure("python -c pass", [sys.executable, "-c", "pass"], ctx)
    ctx.record("python -c pass", None, base)
    ctx.record("kvreg --help", None, measure("kvreg --help", [*ctx.kvreg, "--help"], ctx), base)
    for n, reg in sizes.items():
        cmd = [*ctx.kvreg, "--db", reg["url"], "capacity", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM",
               "--format", "json"]
        ctx.record("kvreg capacity", n, measure(f"kvreg capacity ({reg['model']:,} models)", cmd, ctx,
                                                repeat=ctx.runs(n)), base)


# Every read command on the seeded registry (issue 20): each should answer within READS_TARGET times a
# bare `python -c pass`. A command kvreg does not have yet (fleet list) is reported as not available.
READS = [
    ("capacity", ["capacity", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--format", "json"]),
    ("plan list", ["plan", "list", "--format", "json"]),
    ("plan show", ["plan", "show", "chat-llama3-8b", "--format", "json"]),
    ("plan rollup", ["plan", "rollup", "--quarter", "2026Q4", "--format", "json"]),
    ("plan workload", ["plan", "workload", "mixed-llama3-8b", "--format", "json"]),
    ("model list", ["model", "list", "--format", "json"]),
    ("model show", ["model", "show", "Llama-3.1-8B", "--format", "json"]),
    ("gpu list", ["gpu", "list", "--format", "json"]),
    ("gpu show", ["gpu", "show", "H100-SXM", "--format", "json"]),
    ("dtype list", ["dtype", "list", "--format", "json"]),
    ("demand list", ["demand", "list", "--format", "json"]),
    ("fleet list", ["fleet", "list", "--format", "json"]),
    ("db current", ["db", "current", "--format", "json"]),
    ("export", ["export"]),
]
READS_TARGET = 4


def measure_paired(label: str, cmd: list[str], base_label: str, base_cmd: list[str], ctx: "Context",
                   repeat: int | None = None) -> tuple[Timing, Timing, list[float]]:
    """Runs of cmd and of its baseline taken in turn (B A B A ...); (cmd, baseline, cmd/baseline per pair)."""
    t, b, ratios = Timing(label), Timing(base_label), []
    for _ in range(repeat or ctx.repeat):
        bsecs, brss, brc, berr = run_once(base_cmd, ctx.work, ctx.timeout, ctx.work / "stdout")
        secs, rss, rc, err = run_once(cmd, ctx.work, ctx.timeout, ctx.work / "stdout", ctx.memory)
        t.rss_kib = max(t.rss_kib, rss)
        if rc != 0 or brc != 0:
            t.error = "timed out" if -signal.SIGKILL in (rc, brc) else f"exit {rc}: {err or berr}"
            break
        t.runs.append(secs)
        b.runs.append(bsecs)
        ratios.append(secs / bsecs)
    ctx.show(t)
    return t, b, ratios


def bench_reads(ctx: Context, template: Path) -> None:
    ctx.say("\n== read commands on the seeded registry (paired with python -c pass)")
    url = f"sqlite:///{template}"
    for name, words in READS:
        why = available(ctx, *name.split())
        if why:
            ctx.unavailable(f"kvreg {name}", why)
            continue
        run_once([*ctx.kvreg, "--db", url, *words], ctx.work, ctx.timeout, ctx.work / "stdout")  # untimed warm-up
        t, base, ratios = measure_paired(f"kvreg {' '.join(words)}"[:52], [*ctx.kvreg, "--db", url, *words],
                                         "python -c pass", [sys.executable, "-c", "pass"], ctx,
                                         repeat=ctx.runs(SEEDED))
        ctx.record(f"read: kvreg {name}", None, t, base, ratios)


def bench_plan_list(ctx: Context, sizes: dict[int, dict]) -> None:
    ctx.say("\n== plan list")
    why = available(ctx, "plan", "list")
    if why:
        ctx.unavailable("kvreg plan list", why)
        return
    for n, reg in sizes.items():
        base = measure(f"bare sqlite3 plan_capacity ({reg['plan']:,} plans)",
                       [sys.executable, "-c", BARE_QUERY, str(reg["path"])], ctx, repeat=ctx.runs(n))
        cmd = [*ctx.kvreg, "--db", reg["url"], "plan", "list", "--format", "json"]
        t = measure(f"kvreg plan list --format json ({reg['plan']:,} plans)", cmd, ctx, repeat=ctx.runs(n))
        if t.ok:
            listed = _count_json_list(ctx.work / "stdout")
            if listed != reg["plan"]:
                t.error = f"listed {listed} plans of {reg['plan']}"
                ctx.show(t)
        ctx.record("kvreg plan list", n, t, base)


ROLLUP_QUARTERS = 8


def bench_rollup(ctx: Context, sizes: dict[int, dict]) -> None:
    """`kvreg plan rollup` over an 8-quarter horizon, demand carried forward and a fleet: each
    registry's plans get entries in every other quarter (synth.add_procurement), on a copy."""
    ctx.say("\n== plan rollup (8 quarters, carry-forward, fleet)")
    why = available(ctx, "plan", "rollup")
    if why:
        ctx.unavailable("kvreg plan rollup", why)
        return
    for n, reg in sizes.items():
        path = ctx.work / f"rollup-{n}.db"
        shutil.copyfile(reg["path"], path)
        start = reg["quarter"]
        counts = synth.add_procurement(path, synth.horizon(start, ROLLUP_QUARTERS))
        url = f"sqlite:///{path}"
        cmd = [*ctx.kvreg, "--db", url, "plan", "rollup", "--from", start, "--quarters", str(ROLLUP_QUARTERS),
               "--format", "json"]
        t = measure(f"kvreg plan rollup --quarters {ROLLUP_QUARTERS} ({counts['plan']:,} plans, "
                    f"{counts['demand']:,} demand rows)", cmd, ctx, repeat=ctx.runs(n))
        ctx.record("kvreg plan rollup", n, t)


def _count_json_list(path: Path) -> int:
    """Items in a JSON list file, parsed in a child: 10,000 plans of JSON would otherwise grow this
    process, and every later child's peak memory with it (see _child_env)."""
    code = "import json, sys; print(len(json.load(open(sys.argv[1]))))"
    return int(subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                              check=True).stdout)


def bench_reports(ctx: Context, sizes: dict[int, dict]) -> None:
    ctx.say("\n== report")
    why = available(ctx, "report")
    if why:
        ctx.unavailable("kvreg report", why)
        return
    for n, reg in sizes.items():
        out = ctx.work / f"report-{n}"
        fresh = lambda out=out: shutil.rmtree(out, ignore_errors=True)  # noqa: E731
        cells = None
        for fmt in ("xlsx", "md"):
            cmd = [*ctx.kvreg, "--db", reg["url"], "report", "--quarter", reg["quarter"], "--out", str(out),
                   "--format", fmt]
            t = measure(f"kvreg report --format {fmt} ({reg['plan']:,} plans)", cmd, ctx, prepare=fresh,
                        repeat=ctx.runs(n))
            if fmt == "xlsx" and t.ok:
                cells = _workbook_cells(out, ctx.work / f"cells-{n}.pickle")
                base = _bare_workbook(ctx, cells, n)
            row = ctx.record(f"kvreg report {fmt}", n, t, base if cells else None)
            row["plans"] = reg["plan"]
            if cells:
                row["cells"] = cells[0]


def _workbook_cells(out: Path, pickle_path: Path) -> tuple[int, Path] | None:
    """Every cell value of the report's workbook, pickled for the bare baseline; (cells, path).

    Read in a child process so openpyxl and the workbook never enlarge this one (see _child_env).
    """
    books = sorted(out.rglob("*.xlsx"))
    if not books:
        return None
    proc = subprocess.run([sys.executable, "-c", DUMP_CELLS, str(books[0]), str(pickle_path)],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout.strip()), pickle_path


def _bare_workbook(ctx: Context, cells: tuple[int, Path], n: int) -> Timing:
    count, path = cells
    cmd = [sys.executable, "-c", BARE_WORKBOOK, str(path), str(ctx.work / "bare.xlsx")]
    return measure(f"bare XlsxWriter constant_memory ({count:,} cells)", cmd, ctx, repeat=ctx.runs(n))


def bench_import(ctx: Context, template: Path, n: int) -> None:
    ctx.say("\n== model import")
    files = synth.write_configs(ctx.work / "configs", n)
    db = ctx.work / "import.db"
    fresh = lambda: shutil.copyfile(template, db)  # noqa: E731  (each run imports into a new registry)
    cmd = [*ctx.kvreg, "--db", f"sqlite:///{db}", "model", "import", *map(str, files), "--format", "json"]
    ctx.record("kvreg model import", n, measure(f"kvreg model import ({n:,} config files)", cmd, ctx, prepare=fresh,
                                                repeat=ctx.runs(SEEDED)))


def bench_seeded_report(ctx: Context, template: Path) -> None:
    ctx.say("\n== seeded registry, full report")
    if available(ctx, "report"):
        ctx.unavailable("kvreg report (seeded)", "no `kvreg report` yet")
        return
    out = ctx.work / "report-seeded"
    cmd = [*ctx.kvreg, "--db", f"sqlite:///{template}", "report", "--out", str(out)]
    t = measure("kvreg report (seeded registry, every format)", cmd, ctx,
                prepare=lambda: shutil.rmtree(out, ignore_errors=True), repeat=ctx.runs(SEEDED))
    ctx.record("kvreg report seeded", None, t)


# --------------------------------------------------------------------------- scaling and targets


def loglog_exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y against log x: 1 is linear growth, below 1 is less than linear."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept seconds, seconds per item) of y = a + b x."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((a - mx) * (c - my) for a, c in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)
    return my - b * mx, b


def scaling(ctx: Context) -> list[dict]:
    """Per report format, time against plans: the log-log exponent and the linear fit over the
    sizes that completed, and the sizes that did not (a failure there is the steepest growth)."""
    out = []
    for fmt in ("md", "xlsx"):
        rows = [r for r in ctx.results if r["what"] == f"kvreg report {fmt}" and r["timing"]]
        if not rows:
            continue
        pts = [(r["plans"], r["timing"].median) for r in rows if r["timing"].ok]
        s = {"format": fmt, "points": pts, "failed": [(r["plans"], r["timing"].error) for r in rows if not r["timing"].ok]}
        if len(pts) >= 2:
            xs, ys = zip(*pts)
            a, b = linear_fit(xs, ys)
            s.update(exponent=loglog_exponent(xs, ys), intercept=a, slope=b)
        out.append(s)
    if out:
        ctx.say("\n== report time against plans")
        for s in out:
            ctx.say(f"  {s['format']:<5} {_scale_text(s)}")
    return out


def _scale_text(s: dict) -> str:
    text = ", ".join(f"{n:,} plans {t:.2f} s" for n, t in s["points"]) or "no size completed"
    if "exponent" in s:
        text += (f"; log-log exponent {s['exponent']:.2f}; linear fit {s['intercept']:.2f} s + "
                 f"{s['slope'] * 1000:.2f} s per 1,000 plans")
    for n, err in s["failed"]:
        text += f"; failed at {n:,} plans ({err})"
    return text


def _scale_verdict(s: dict) -> tuple[str, str]:
    if s["failed"]:
        return _scale_text(s), "MISS"
    if "exponent" not in s:
        return "needs two sizes", "not measured"
    return _scale_text(s), "PASS" if s["exponent"] <= 1.1 else "MISS"


def _find(ctx: Context, what: str, size: int | None = None, largest: bool = False) -> dict | None:
    rows = [r for r in ctx.results if r["what"] == what and r.get("timing") and (size is None or r["size"] == size)]
    if not rows:
        return None
    return max(rows, key=lambda r: r["size"] or 0) if largest else rows[0]


def targets(ctx: Context, sizes: dict[int, dict], scale: list[dict]) -> list[tuple[str, str, str]]:
    """(target, measured, PASS / MISS / not measured) for each target of issue 8."""
    out = []

    def add(target: str, row: dict | None, measured, passed, missing: str = "not measured"):
        if row is None or not row["timing"].ok:
            why = row["timing"].error if row and row["timing"] else missing
            out.append((target, why, "MISS" if row else "not measured"))
        else:
            out.append((target, measured(row), "PASS" if passed(row) else "MISS"))

    ratio = lambda r: r["timing"].median / r["baseline"].median  # noqa: E731
    caps = [r for r in ctx.results if r["what"] == "kvreg capacity" and r["timing"]]
    worst = max(caps, key=lambda r: ratio(r) if r["timing"].ok else math.inf) if caps else None
    add("`kvreg capacity` within 10x `python -c pass`", worst,
        lambda r: f"{ratio(r):.1f}x ({r['timing'].median:.3f} s vs {r['baseline'].median:.3f} s, "
                  f"{sizes[r['size']]['model']:,} models)", lambda r: ratio(r) <= 10)
    big = 10000 if 10000 in sizes else None
    reads = [r for r in ctx.results if r["what"].startswith("read: ") and r.get("timing")]
    worst_read = max(reads, key=lambda r: r.get("paired", math.inf)) if reads else None
    add(f"every read command within {READS_TARGET}x `python -c pass` on the seeded registry (median of paired ratios)",
        worst_read, lambda r: f"worst {r['what'][6:]}: {r['paired']:.1f}x ({r['timing'].median:.3f} s); "
        + ", ".join(f"{x['what'][12:]} {x['paired']:.1f}x" for x in reads if x.get("paired")),
        lambda r: r["paired"] <= READS_TARGET)
    add("`kvreg plan list --format json` of 10,000 plans within 1.5 s",
        _find(ctx, "kvreg plan list", big) if big else None,
        lambda r: f"{r['timing'].median:.2f} s ({ratio(r):.1f}x the bare query)", lambda r: r["timing"].median <= 1.5,
        "needs --sizes with 10000")
    add(f"`kvreg plan rollup` of 10,000 plans over {ROLLUP_QUARTERS} quarters within 2 s",
        _find(ctx, "kvreg plan rollup", big) if big else None,
        lambda r: f"{r['timing'].median:.2f} s", lambda r: r["timing"].median <= 2, "needs --sizes with 10000")
    xl = _find(ctx, "kvreg report xlsx", largest=True)
    xl_text = lambda r: (f"{ratio(r):.2f}x at {r['plans']:,} plans ({r['timing'].median:.2f} s vs "  # noqa: E731
                         f"{r['baseline'].median:.2f} s)" if r["baseline"] else "no baseline")
    add("xlsx report within 1.3x a bare XlsxWriter write of the same cells and values", xl, xl_text,
        lambda r: r["baseline"] is not None and ratio(r) <= 1.3)
    smaller = [r for r in ctx.results if r["what"] == "kvreg report xlsx" and r is not xl and r["timing"]
               and r["timing"].ok and r["baseline"] and r["baseline"].ok]
    if xl and xl["timing"].ok and smaller:  # the verdict is at the largest size; say what the others gave
        target, why, verdict = out[-1]
        others = ", ".join(f"{ratio(r):.2f}x at {r['plans']:,}" for r in sorted(smaller, key=lambda r: -r["size"]))
        out[-1] = (target, f"{why}; smaller registries, where start-up and reading the registry weigh more: "
                   f"{others}", verdict)
    done = [r for r in ctx.results if r["what"] == "kvreg report xlsx" and r["timing"] and r["timing"].ok]
    if xl and not xl["timing"].ok and done:  # say how far it got
        target, why, verdict = out[-1]
        out[-1] = (target, f"{why}; {xl_text(max(done, key=lambda r: r['size']))}", verdict)
    imp = _find(ctx, "kvreg model import")
    add("1,000 config imports within 5 s", imp if imp and imp["size"] >= 1000 else None,
        lambda r: f"{r['timing'].median:.2f} s for {r['size']:,} files",
        lambda r: r["timing"].median * 1000 / r["size"] <= 5, "needs --imports 1000")
    add("seeded registry's full report within 3 s", _find(ctx, "kvreg report seeded"),
        lambda r: f"{r['timing'].median:.2f} s", lambda r: r["timing"].median <= 3)
    peaks = [r for r in ctx.results
             if big and r["what"] in ("kvreg report md", "kvreg report xlsx") and r["size"] == big and r["timing"]]
    peak = max(peaks, key=lambda r: r["timing"].rss_kib) if peaks else None
    add("peak memory of the 10,000-plan report under 1 GiB", peak,
        lambda r: f"{r['timing'].rss_kib / 1024:.0f} MiB ({r['what'].split()[-1]})",
        lambda r: r["timing"].rss_kib * 1024 < GIB, "needs --sizes with 10000")
    if peak and not peak["timing"].ok:  # a failed run still reached its peak before failing
        out[-1] = (out[-1][0], f"{peak['timing'].rss_kib / 1024:.0f} MiB or more ({peak['what'].split()[-1]}), "
                   f"then {peak['timing'].error}", "MISS")
    for s in scale:
        out.append((f"{s['format']} report time grows at most linearly with plans (log-log exponent <= 1.1)",
                    *_scale_verdict(s)))
    return out


# --------------------------------------------------------------------------- the document


def machine() -> list[tuple[str, str]]:
    def cpu_model() -> str:
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return platform.processor() or "unknown"

    def memory() -> str:
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
        except OSError:
            pass
        return "unknown"

    from importlib.metadata import PackageNotFoundError, version

    def ver(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    return [
        ("load average (1, 5, 15 min) when the run started", " / ".join(f"{x:.1f}" for x in LOAD_AT_START)),
        ("CPUs (nproc)", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())),
        ("CPU model", cpu_model()),
        ("memory", memory()),
        ("OS", f"{platform.system()} {platform.release()}"),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("SQLite", sqlite3.sqlite_version),
        ("kvreg", ver("kvreg")),
        ("SQLAlchemy / XlsxWriter / openpyxl / matplotlib",
         f"{ver('sqlalchemy')} / {ver('xlsxwriter')} / {ver('openpyxl')} / {ver('matplotlib')}"),
    ]


def write_doc(path: Path, ctx: Context, args, sizes: dict[int, dict], goals, scale) -> None:
    lines = [
        "# Performance",
        "",
        f"Written by `python bench/run.py --sizes {','.join(map(str, sizes))} --repeat {args.repeat} "
        f"{_repeat_at_text(args)}--imports {args.imports}{_only_text(args)}` on {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}. Every figure is a whole "
        "process, timed from start to exit, the median of the runs; each is set beside a baseline measured in "
        "the same run on the same machine. Re-run it after a change that could matter; see bench/README.md.",
        "",
        "## Machine",
        "",
        "| | |",
        "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in machine()],
        "",
        "## Targets",
        "",
        "| target | measured | result |",
        "| --- | --- | --- |",
        *[f"| {t} | {m} | {r} |" for t, m, r in goals],
        "",
        "## Read commands",
        "",
        "Every read command takes one read path (kvreg/db/read.py). A SQLite registry at the newest schema, "
        "seeded, whose views were compiled from this kvreg's declarations (the one test: "
        "`kvreg.db.fastpath.eligibility`) is read with the standard library's sqlite3 and never imports "
        "SQLAlchemy, SQLModel or Alembic (about 0.3 s); any other registry is opened the full way. Both ways "
        "run the same queries and print through the same formatter, so the output is identical byte for byte "
        "(tests/test_read_path.py compares them in table, json and csv; `KVREG_FULL_PATH=1` forces the full "
        "way). What is left is Python with click (importing click costs about as much as `python -c pass` "
        "itself) plus SQLite: every connection parses the views' text when it first reads the schema, "
        "and each query prepares the views it names, copying their expression trees; a plan command "
        "prepares `plan_capacity` (with `plan_class` inside it) or `plan_quarter` (with both inside), "
        "so the commands over plans cost the most. Under callgrind on the seeded registry, `plan show` is "
        "about 441 million instructions: 88 million are `python -c pass`, about 100 million importing "
        "click, and about 200 million SQLite and its allocations (41 million of them parsing the views' "
        "text at the first statement). The SQLite compiler keeps that text short: a condition is an SQL "
        "condition, not a 0/1 value tested against 0; min/max of two operands that can never be NULL is "
        "SQLite's own min()/max() (kvreg.figures.facts.never_null_in_sql), not a CASE that repeats them; "
        "each layer carries only the columns read above it. Running a prepared query again takes about "
        "a millisecond.",
        "",
        "## Registries",
        "",
        "| size | models | plans | demand rows | workload classes | quarter |",
        "| --- | --- | --- | --- | --- | --- |",
        *[f"| {n:,} | {r['model']:,} | {r['plan']:,} | {r['demand']:,} | {r['workload_class']:,} | {r['quarter']} |"
          for n, r in sizes.items()],
        "",
        "Synthetic models are the catalog's architectures under new names; plans cycle through TP 1-8,",
        "contexts 8K-128K, bf16/fp8 KV and every catalog GPU; each plan has demand in two quarters, and",
        "every fourth plan a two-class workload mix (chat 80%, half-context documents 20%).",
        "",
        "## Measurements",
        "",
        "| command | size | median s | runs | peak MiB | baseline | baseline s | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *_measurement_rows(ctx),
    ]
    if scale:
        lines += ["", "## Report time against plans", ""]
        lines += [f"- {s['format']}: {_scale_text(s)}" for s in scale]
        lines += ["", "An exponent near 1 is linear growth; start-up cost pulls it below 1 at small sizes, so the "
                  "linear fit's slope (seconds per 1,000 plans) is the cost per plan."]
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines += ["", "## Method", "",
              "- Wall time of a whole process (start to exit), median of the runs; first one untimed run of each "
              "kind of work (compiling modules, matplotlib's font cache). Processes keep their bytecode in the "
              "work folder (PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE unset), as an installed kvreg has it.",
              "- Baselines run in the same session: `python -c pass` for start-up; the same view read with the bare "
              "sqlite3 module and dumped with json for listings; a bare XlsxWriter (constant_memory) write of the "
              "report workbook's own cells, each formula with its stored value (read back from it), for reports.",
              f"- Peak memory is the child's ru_maxrss from wait4. Linux starts it from the parent's size at fork, "
              f"so {floor:.0f} MiB (this script's own peak) is a floor under every figure.",
              "- Read commands (issue 20's target) run on the seeded registry, each run paired with a run of "
              "`python -c pass` just before it (B A B A ...); the figure is the median of the per-pair ratios, "
              "which stays meaningful when the machine's speed drifts during the run.",
              "- `kvreg model import` imports into a fresh copy of a seeded registry each run; reports write into "
              "an empty folder each run."]
    lines += ["", "## Log", "", "```", *[ln for ln in ctx.lines if ln.strip()], "```", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + _kept_section(path))


# Sections written by other means, kept when this rewrites the rest: bench/serve.py's, the test
# suite's times and the what-ifs before and after issue 39 (measured by hand, see each section).
KEPT_SECTIONS = [
    ("<!-- kvreg serve: written by bench/serve.py -->", "<!-- end of the kvreg serve section -->"),
    ("<!-- test suite: measured by hand -->", "<!-- end of the test suite section -->"),
    ("<!-- what-ifs that only read: measured by hand -->", "<!-- end of the what-if section -->"),
    ("<!-- plan optimize: measured with bench/optimize.py -->", "<!-- end of the plan optimize section -->"),
]


def _kept_section(path: Path) -> str:
    """The sections of the document this does not write (KEPT_SECTIONS), kept when it rewrites the rest."""
    old = path.read_text() if path.exists() else ""
    kept = ""
    for begin, end in KEPT_SECTIONS:
        if begin in old and end in old:
            kept += "\n" + old[old.index(begin):old.index(end) + len(end)] + "\n"
    return kept


def _only_text(args) -> str:
    return "" if list(args.only) == list(SECTIONS) else " --only " + ",".join(args.only)


def _repeat_at_text(args) -> str:
    if not args.repeat_at:
        return ""
    keys = sorted(n for n in args.repeat_at if n != SEEDED) + [SEEDED] * (SEEDED in args.repeat_at)
    return "--repeat-at " + ",".join(f"{n}={args.repeat_at[n]}" for n in keys) + " "


def _measurement_rows(ctx: Context) -> list[str]:
    rows = []
    for r in ctx.results:
        if r.get("unavailable"):
            rows.append(f"| {r['what']} | | not available | | | | | |")
            continue
        t, b = r["timing"], r["baseline"]
        size = f"{r['size']:,}" if r["size"] else ""
        if not t.ok:
            rows.append(f"| {r['what']} | {size} | {t.error} | | | | | |")
            continue
        ratio = r.get("paired", t.median / b.median if b and b.ok else None)
        base = (b.label, f"{b.median:.3f}", f"{ratio:.1f}x" + (" (paired)" if "paired" in r else "")) \
            if b and b.ok else ("", "", "")
        rows.append(f"| {r['what']} | {size} | {t.median:.3f} | {len(t.runs)} | {t.rss_kib / 1024:.0f} | "
                    f"{base[0]} | {base[1]} | {base[2]} |")
    return rows


# --------------------------------------------------------------------------- main


def _bytecode(folder: Path) -> None:
    """Let every process keep the modules it compiles, in `folder` (PYTHONPYCACHEPREFIX), so a
    timed run loads bytecode as an installed kvreg does. An environment with
    PYTHONDONTWRITEBYTECODE=1 would otherwise compile kvreg's modules from source in every run."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)


def warm_up(ctx: Context, template: Path, reports: bool = True) -> None:
    """One untimed run of each kind of work: compiling modules and building matplotlib's font cache
    are a first-run cost, not the cost of a question. On a copy of the seeded registry, the smallest
    there is: the same modules load for any registry, and the full report of the smallest synthetic
    size (10) took 17.6 s of CPU in the smoke test, compiling included (the seeded one's: 5-6 s once
    compiled)."""
    scratch = ctx.work / "warm-up"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    db = scratch / "import.db"
    shutil.copyfile(template, db)
    url = f"sqlite:///{db}"
    configs = synth.write_configs(scratch / "configs", 2)
    for cmd in ([*ctx.kvreg, "--db", url, "capacity"],
                [*ctx.kvreg, "--db", url, "plan", "list", "--format", "json"],
                *([[*ctx.kvreg, "--db", url, "report", "--out", str(scratch / "reports")]] if reports else []),
                [*ctx.kvreg, "--db", url, "model", "import", *map(str, configs)],
                [sys.executable, "-c", "import json, pickle, sqlite3, matplotlib.pyplot, xlsxwriter"]):
        run_once(cmd, ctx.work, ctx.timeout, ctx.work / "stdout")
    shutil.rmtree(scratch, ignore_errors=True)


def build(ctx: Context, sizes: list[int]) -> tuple[Path, dict[int, dict]]:
    """The seeded template registry and one synthetic registry per size."""
    ctx.say("== building registries")
    template = ctx.work / "seeded.db"
    synth.create_registry(template)
    regs = {}
    for n in sizes:
        path = ctx.work / f"registry-{n}.db"
        shutil.copyfile(template, path)
        start = time.perf_counter()
        counts = synth.fill(path, n, n)
        regs[n] = {"path": path, "url": f"sqlite:///{path}", **counts}
        ctx.say(f"  {n:>6,} models: {counts['model']:,} models, {counts['plan']:,} plans, "
                f"{counts['demand']:,} demand rows, {counts['workload_class']:,} workload classes"
                f" in {time.perf_counter() - start:.1f} s")
    return template, regs


LOAD_AT_START = os.getloadavg()
# The --repeat-at key of the figures on the seeded registry itself (read commands, model import into
# a copy of it, its full report), which have no size.
SEEDED = "seeded"
SECTIONS = ("startup", "reads", "plan-list", "rollup", "report", "import", "seeded-report")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100,1000,10000", help="registry sizes: models and plans (default %(default)s)")
    p.add_argument("--repeat", type=int, default=5, help="runs per figure; the median is reported")
    p.add_argument("--repeat-at", default="", metavar="SIZE=RUNS[,...]",
                   help="runs per figure at some sizes instead of --repeat (e.g. 10000=1 for long reports); "
                        f"SIZE {SEEDED}: the read commands, model import and full report on the seeded registry")
    p.add_argument("--imports", type=int, default=1000, help="config files for `kvreg model import`")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "performance.md", help="the document to write")
    p.add_argument("--timeout", type=float, default=300, help="seconds before a run is killed and counted a miss")
    p.add_argument("--memory-limit", type=float, default=8,
                   help="GiB of address space each timed process may take; beyond it the run fails (0: no limit)")
    p.add_argument("--workdir", type=Path, help="keep registries and outputs here (default: a temporary folder)")
    p.add_argument("--only", default=",".join(SECTIONS), metavar="SECTION[,...]",
                   help="run only these sections (default: all): " + ", ".join(SECTIONS)
                   + "; targets of the others read 'not measured'")
    args = p.parse_args(argv)
    args.sizes = sorted({int(s.replace(",", "").replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    try:
        args.repeat_at = {n.strip() if n.strip() == SEEDED else int(n.replace("_", "")): int(k)
                          for n, k in (item.split("=") for item in args.repeat_at.split(",") if item.strip())}
    except ValueError:
        p.error(f"--repeat-at takes SIZE=RUNS pairs separated by commas (SIZE a number or {SEEDED}): 10000=1")
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(args.only) - set(SECTIONS))
    if unknown or not args.only:
        p.error(f"--only takes sections among {', '.join(SECTIONS)}, not {', '.join(unknown) or 'nothing'}")
    if (not args.sizes or min(args.sizes) < 1 or args.repeat < 1 or args.imports < 1
            or any(k < 1 for k in args.repeat_at.values())):
        p.error("sizes, --repeat, --repeat-at and --imports must be positive")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kvreg-bench-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ctx = Context(work=work.resolve(), repeat=args.repeat, timeout=args.timeout, kvreg=kvreg_command(),
                      memory=int(args.memory_limit * GIB), repeat_at=args.repeat_at)
        _bytecode(ctx.work / "pycache")
        template, sizes = build(ctx, args.sizes)
        warm_up(ctx, template, reports="report" in args.only)
        sections = {
            "startup": lambda: bench_startup(ctx, sizes),
            "reads": lambda: bench_reads(ctx, template),
            "plan-list": lambda: bench_plan_list(ctx, sizes),
            "rollup": lambda: bench_rollup(ctx, sizes),
            "report": lambda: bench_reports(ctx, sizes),
            "import": lambda: bench_import(ctx, template, args.imports),
            "seeded-report": lambda: bench_seeded_report(ctx, template),
        }
        for name, run in sections.items():
            if name in args.only:
                run()
        scale = scaling(ctx)
        goals = targets(ctx, sizes, scale)
        ctx.say("\n== targets")
        for t, m, r in goals:
            ctx.say(f"  {r:<13} {t}: {m}")
        write_doc(args.out, ctx, args, sizes, goals, scale)
        print(f"\nwrote {args.out}")
    return 1 if ctx.failed else 0


if __name__ == "__main__":
    sys.exit(main())
