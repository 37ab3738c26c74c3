"""An import never overwrites curated facts or duplicates a registry model (issue 13).

A config matches a registry model by name or by Hugging Face repo id (the `org__Model.json` file
name the catalog's rows were read from). Without --replace the import fails and says which model it
is; with it the model is updated from the config, keeping its name, family, notes and published
parameter counts, unless the import's counts are exact (a safetensors index beside config.json).
"""

from __future__ import annotations

import json
import shutil

from conftest import HF_CONFIGS
from test_cli_models import fails_cleanly

from conftest import CATALOG_CONFIGS as CONFIGS  # noqa: E402  (the configs the catalog was read from)


def test_a_catalog_model_under_its_hf_name_is_recognised(kv, state):
    kv("init")
    line = fails_cleanly(kv, state, "model", "import", HF_CONFIGS / "meta-llama__Meta-Llama-3-8B.json")
    assert line == ("Error: meta-llama__Meta-Llama-3-8B.json is the registry's model 'Llama-3-8B' (same Hugging Face "
                    "repo meta-llama/Meta-Llama-3-8B): pass --replace to update it from the config, or --name to add "
                    "it under a new name")


def test_replace_keeps_published_figures_and_adds_no_duplicates(kv):
    before = {m["name"]: m for m in kv.json("model", "list")}
    rollup = kv.json("plan", "rollup")
    result = kv("model", "import", *CONFIGS, "--replace", "--format", "json")
    after = {m["name"]: m for m in kv.json("model", "list")}
    assert sorted(after) == sorted(before) and len(after) == 24  # no Meta-Llama-3-8B beside Llama-3-8B
    assert [r["name"] for r in json.loads(result.stdout)].count("Llama-3-8B") == 1
    # GLM-4.5: the config alone estimates 352.8B; the published 355B / 32B stay
    assert (after["GLM-4.5"]["params_total"], after["GLM-4.5"]["params_active"]) == (355_000_000_000, 32_000_000_000)
    for name, m in before.items():
        assert (after[name]["family"], after[name]["notes"], after[name]["params_total"]) == (
            m["family"], m["notes"], m["params_total"]), name
    assert kv.json("plan", "rollup") == rollup  # the quarter's GPU need did not move
    # Meta-Llama-3-8B's config updated the catalog's Llama-3-8B (matched by its Hugging Face repo), no figure
    # changed: named once in the batch's one line, not in a line of its own.
    updated = [line for line in result.stderr.splitlines() if line.startswith("updated ")]
    assert len(updated) == 1 and "no figure changed" in updated[0] and "'Llama-3-8B'" in updated[0]
    assert "Meta-Llama-3-8B.json: updated" not in result.stderr
    # every catalog row read from a config holds what the config says: re-importing it changes no column
    # (the Qwen3-Next row once lacked linear_state_kind gated_deltanet and reported "changed linear_state_kind")
    assert "; changed " not in result.stderr
    assert f"updated {len(CONFIGS)} models already in the registry, no figure changed" in updated[0]


def test_exact_counts_from_a_safetensors_index_do_replace(kv, tmp_path):
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    shutil.copyfile(HF_CONFIGS / "meta-llama__Llama-3.1-8B.json", folder / "config.json")
    # 16,060,522,496 B of bf16 tensors / 2 B per parameter = 8,030,261,248 parameters
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}}))
    kv("model", "import", folder, "--replace")
    m = {r["name"]: r for r in kv.json("model", "list")}["Llama-3.1-8B"]
    assert m["params_total"] == 16_060_522_496 // 2 == 8_030_261_248  # the catalog had 8.05e9
    assert m["family"] == "Llama-3.1"
