"""Benchmark `kvreg serve`: start-up, and the what-if answer time over many requests.

    python bench/serve.py [--requests 200] [--starts 5] [--db URL] [--out docs/performance.md]

On a newly seeded registry (or --db), measures:
- start-up: from starting `kvreg serve` to its first answered page, the median of --starts runs,
  beside `python -c pass` measured in the same run (target: under 1 s);
- what-if answers: --requests questions to /api/capacity (the JSON the page's chart reads) and as
  many to /whatif/answer (the part the page swaps in as inputs change), cycling through models,
  GPUs, contexts, KV dtypes and --tp auto. Server-side time is the Server-Timing header the server
  sets around its answer; the client's round trip is reported beside it. Target: p95 server-side
  within 50 ms.

The results replace the "kvreg serve" section of --out (bench/run.py keeps that section when it
rewrites the rest of the file). Exit status 1 if the server failed to answer.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEGIN = "<!-- kvreg serve: written by bench/serve.py -->"
END = "<!-- end of the kvreg serve section -->"
TARGET_MS = 50.0
TARGET_START_S = 1.0

MODELS = ["Llama-3.1-8B", "Llama-3.1-70B", "Qwen3-8B", "Qwen3-235B-A22B", "DeepSeek-V3", "gpt-oss-120b",
          "Qwen3-Next-80B-A3B", "Mistral-Large-2411"]
GPUS = ["H100-SXM", "H200", "B200", "MI300X", "A100-80GB"]
CONTEXTS = ["8K", "32K", "128K"]


def kvreg_command() -> list[str]:
    exe = Path(sys.executable).parent / "kvreg"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from kvreg.cli import main; sys.argv[0] = 'kvreg'; main()"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(url: str) -> tuple[subprocess.Popen, str, float]:
    """Start `kvreg serve`; returns the process, its base URL and the seconds until / answered."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([*kvreg_command(), "--db", url, "serve", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while True:
        try:
            with urllib.request.urlopen(base + "/", timeout=30) as r:
                r.read()
            return proc, base, time.perf_counter() - t0
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"kvreg serve exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.005)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def questions(n: int) -> list[str]:
    out = []
    for i in range(n):
        items = [("model", MODELS[i % len(MODELS)]), ("gpu", GPUS[(i // 2) % len(GPUS)]),
                 ("context", CONTEXTS[i % len(CONTEXTS)])]
        if i % 3 == 0:
            items.append(("tp", "auto"))
        if i % 4 == 1:
            items.append(("kv-dtype", "fp8"))
        out.append(urllib.parse.urlencode(items))
    return out


def timed_get(url: str) -> tuple[float, float]:
    """(server-side ms from Server-Timing, round-trip ms) of one GET that must answer 200."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
        header = r.headers.get("Server-Timing", "")
    wall = (time.perf_counter() - t0) * 1000
    m = re.search(r"dur=([0-9.]+)", header)
    if not m:
        raise SystemExit(f"no Server-Timing header on {url}")
    return float(m.group(1)), wall


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def python_pass(runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--db", help="registry URL (default: a newly seeded SQLite registry in a temporary folder)")
    ap.add_argument("--out", default=str(REPO / "docs" / "performance.md"))
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="kvreg-bench-serve-") as work:
        # Every process keeps the modules it compiles (as bench/run.py does): with PYTHONDONTWRITEBYTECODE
        # set, each start compiled kvreg's modules from source, which an installed kvreg never does.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(Path(work) / "pycache")
        url = args.db or f"sqlite:///{Path(work) / 'registry.db'}"
        env_cmd = [*kvreg_command(), "--db", url, "init"]
        subprocess.run(env_cmd, check=True, stdout=subprocess.DEVNULL)

        proc, _, _ = start(url)  # untimed: compiles modules once, as an installed kvreg has them
        stop(proc)
        starts = []
        for _ in range(args.starts):
            proc, _, seconds = start(url)
            stop(proc)
            starts.append(seconds)
            print(f"start-up to the first page: {seconds:.3f} s", flush=True)
        baseline = python_pass(args.starts)

        proc, base, _ = start(url)
        try:
            qs = questions(args.requests)
            for q in qs[:10]:  # warm: the first answer of each kind loads the templates
                timed_get(f"{base}/api/capacity?{q}")
                timed_get(f"{base}/whatif/answer?{q}")
            results = {}
            for label, path in (("/api/capacity", "/api/capacity?"), ("/whatif/answer", "/whatif/answer?")):
                server, wall = zip(*(timed_get(base + path + q) for q in qs))
                results[label] = (list(server), list(wall))
                print(f"{label}: p50 {statistics.median(server):.1f} ms, p95 {p95(server):.1f} ms server-side; "
                      f"round trip p95 {p95(wall):.1f} ms", flush=True)
        finally:
            stop(proc)

    start_s = statistics.median(starts)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        BEGIN,
        "## kvreg serve",
        "",
        f"Written by `python bench/serve.py --requests {args.requests} --starts {args.starts}` on "
        f"{dt.datetime.now().strftime('%Y-%m-%d %H:%M')}, on a newly seeded SQLite registry"
        f"{' (' + args.db.split('://')[0] + ')' if args.db else ''}. Server-side time is the Server-Timing header "
        "the server sets around each answer (parsing the options, asking the capacity view, rendering); the round "
        "trip adds HTTP on loopback. Questions cycle through 8 models, 5 GPUs, 8K/32K/128K, fp8 KV on every "
        f"fourth and --tp auto on every third. Load average at the end: {load} on {os.cpu_count()} CPUs "
        "(start-up on a loaded machine is best read as its ratio to `python -c pass`).",
        "",
        "| target | measured | result |",
        "| --- | --- | --- |",
    ]
    api_p95 = p95(results["/api/capacity"][0])
    page_p95 = p95(results["/whatif/answer"][0])
    lines.append(f"| what-if answer within {TARGET_MS:.0f} ms server-side (p95 over {args.requests} requests) | "
                 f"/api/capacity {api_p95:.1f} ms, /whatif/answer {page_p95:.1f} ms | "
                 f"{'PASS' if max(api_p95, page_p95) <= TARGET_MS else 'MISS'} |")
    lines.append(f"| starts in under {TARGET_START_S:.0f} s (to the first page answered) | {start_s:.3f} s "
                 f"(median of {args.starts}; {start_s / baseline:.1f}x `python -c pass`, {baseline:.3f} s) | "
                 f"{'PASS' if start_s < TARGET_START_S else 'MISS'} |")
    lines += ["", "| request | p50 ms | p95 ms | max ms | round trip p95 ms |", "| --- | --- | --- | --- | --- |"]
    for label, (server, wall) in results.items():
        lines.append(f"| {label} | {statistics.median(server):.1f} | {p95(server):.1f} | {max(server):.1f} | "
                     f"{p95(wall):.1f} |")
    lines += ["", END]
    section = "\n".join(lines)

    out = Path(args.out)
    text = out.read_text() if out.exists() else "# Performance\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    out.write_text(text)
    print(f"wrote the kvreg serve section of {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
