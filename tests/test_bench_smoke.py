"""The benchmark runs end to end at its smallest size, so it cannot rot. No timing is asserted:
timings belong in docs/performance.md, written by a full run of bench/run.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_benchmark_runs_once_at_the_smallest_size(tmp_path):
    out = tmp_path / "performance.md"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--sizes", "10", "--repeat", "2",
         "--repeat-at", "10=1,seeded=1",
         "--imports", "10", "--timeout", "120", "--out", str(out), "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = out.read_text()
    for heading in ("## Machine", "## Targets", "## Measurements", "CPU model", "python -c pass", "kvreg capacity",
                    "kvreg model import"):
        assert heading in doc
    # Every target has a verdict; a command kvreg lacks is named as such, not silently dropped.
    targets = doc.split("## Targets")[1].split("##")[0]
    rows = [ln for ln in targets.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert rows and all(ln.rstrip(" |").endswith(("PASS", "MISS", "not measured")) for ln in rows)
    # The registries were built with the sizes asked for: 10 synthetic models and plans on top of the catalog.
    # 24 + 10 models, 6 + 10 plans, 12 + 2 x 10 demand rows; synthetic plans 0, 4 and 8 carry a
    # two-class mix beside the catalog's mixed plan: 2 + 3 x 2 = 8 workload classes.
    assert "| 10 | 34 | 16 | 32 | 8 |" in doc
    # --repeat-at 10=1,seeded=1: one run per figure at size 10 and on the seeded registry (read commands,
    # model import, its full report); the start-up figures keep --repeat 2.
    assert "--repeat 2 --repeat-at 10=1,seeded=1 " in doc
    assert "| kvreg capacity | 10 | " in doc and "(median of 1," in doc and "(median of 2," in doc
    assert re.search(r"^\| kvreg report seeded \| +\| [0-9.]+ \| 1 \|", doc, re.M)  # seeded=1: one run


def test_benchmark_configs_come_from_the_repository(tmp_path):
    """bench/synth.py reads the configs vendored under tests/data/hf-configs (a fresh clone has no
    folder beside it), and an empty source folder is a clear error, not a division by zero."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import synth
    finally:
        sys.path.remove(str(REPO / "bench"))
    assert synth.HF_CONFIGS == REPO / "tests" / "data" / "hf-configs"
    n = len(list(synth.HF_CONFIGS.glob("*.json")))
    assert n >= 17
    files = synth.write_configs(tmp_path / "out", n + 1)
    # the vendored configs, cycled: file n+1 is the first config (sorted by name) again under a new name
    first = sorted(p.name for p in synth.HF_CONFIGS.glob("*.json"))[0].removesuffix(".json").split("__", 1)[1]
    assert [p.name for p in files[:1] + files[n:]] == [f"bench__{first}-v0000.json", f"bench__{first}-v{n:04d}.json"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no \\*.json config files in"):
        synth.write_configs(tmp_path / "out2", 3, source=empty)
