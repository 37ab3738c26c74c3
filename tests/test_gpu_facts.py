"""A GPU type's facts beyond its memory (issue 41): dense tensor FLOP/s per dtype through the CLI, the
declaration file and back.

FLOP/s are typed with a decimal unit (TFLOPS = 10^12, PFLOPS = 10^15) and kept as whole FLOP per second.
"""

from __future__ import annotations

import pytest

FLOPS = ("flops_bf16_per_s", "flops_fp8_per_s", "flops_fp4_per_s")


def _flops(kv, name: str) -> tuple:
    g = kv.json("gpu", "show", name)[0]
    return tuple(g[c] for c in FLOPS)


def fails(kv, state, *args) -> str:
    """A command that must fail: exit 1, one line, the registry unchanged."""
    kv("gpu", "show", "H100-SXM")  # the registry exists: its creation notice is not part of the error
    before = state()
    result = kv(*args, ok=False)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert state() == before
    return lines[0]


def test_the_catalog_gpus_carry_their_dense_flops(kv):
    # H100 SXM (Hopper whitepaper): BF16 989.4, FP8 1,978.9 TFLOPS dense; no FP4 units
    assert _flops(kv, "H100-SXM") == (989_400_000_000_000, 1_978_900_000_000_000, None)
    # A100 datasheet: 312 TFLOPS BF16; no FP8 or FP4 units
    assert _flops(kv, "A100-80GB") == (312 * 10**12, None, None)
    # HGX B200 datasheet: 144 PFLOPS FP4 with sparsity per 8 GPUs -> 144 / 8 / 2 = 9 PFLOPS dense per GPU
    assert _flops(kv, "B200")[2] == 144 * 10**15 // 8 // 2 == 9 * 10**15


def test_gpu_add_takes_flops_with_units(kv):
    # H100 PCIe datasheet: BF16 1,513 and FP8 3,026 TFLOPS with sparsity: 756.5 and 1,513 dense
    kv("gpu", "add", "Test-PCIe", "--memory", "80GiB", "--flops-bf16", "756.5TFLOPS", "--flops-fp8", "1.513PFLOPS")
    assert _flops(kv, "Test-PCIe") == (756_500_000_000_000, 1_513_000_000_000_000, None)
    csv = kv("gpu", "list", "--format", "csv").stdout.splitlines()
    head = csv[0].split(",")
    assert [head.index(c) for c in FLOPS] == [head.index("node_gpus") + 1 + i for i in range(3)]


def test_gpu_set_changes_flops_and_nothing_else(kv):
    before = kv.json("gpu", "show", "A100-40GB")[0]
    kv("gpu", "set", "A100-40GB", "--flops-bf16", "300TFLOPS")
    after = kv.json("gpu", "show", "A100-40GB")[0]
    assert after["flops_bf16_per_s"] == 300 * 10**12
    assert {k: v for k, v in after.items() if k != "flops_bf16_per_s"} == \
        {k: v for k, v in before.items() if k != "flops_bf16_per_s"}


@pytest.mark.parametrize("args, why", [
    (("gpu", "add", "X", "--memory", "24GiB", "--flops-bf16", "165"),
     "gpu 'X': flops_bf16_per_s '165' has no unit: write 165TFLOPS (10^12 per second)"),
    (("gpu", "add", "X", "--memory", "24GiB", "--flops-fp8", "0TFLOPS"),
     "gpu 'X': flops_fp8_per_s '0TFLOPS' must be greater than zero"),
    (("gpu", "set", "H100-SXM", "--flops-fp4", "9PB"),
     "gpu 'H100-SXM': flops_fp4_per_s '9PB' has an unknown unit 'PB': use GFLOPS, TFLOPS or PFLOPS"),
])
def test_bad_flops_are_one_line_and_write_nothing(kv, state, args, why):
    assert why in fails(kv, state, *args)


def test_flops_go_through_export_and_apply(kv, tmp_path):
    kv("gpu", "add", "Test-FP4", "--memory", "32GiB", "--flops-bf16", "209.5TFLOPS", "--flops-fp4", "1676TFLOPS")
    path = tmp_path / "registry.toml"
    kv("export", "--out", str(path))
    text = path.read_text()
    block = text[text.index('name = "Test-FP4"'):].split("[[", 1)[0]
    assert "flops_bf16_per_s = 209500000000000" in block and "flops_fp4_per_s = 1676000000000000" in block
    assert "flops_fp8_per_s" not in block  # NULL: TOML leaves the key out
    path.write_text(text.replace("flops_bf16_per_s = 209500000000000", 'flops_bf16_per_s = "200TFLOPS"'))
    kv("apply", str(path))
    assert _flops(kv, "Test-FP4") == (200 * 10**12, None, 1676 * 10**12)
