"""the catalog's notes name the claim or its public source, not the documents kvreg was written from

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 13:00:00

Data only, no schema change. Catalog rows are inserted once, when a registry is first seeded
(kvreg.catalog.load.seed_if_empty), so the 27 notes the catalog rewrote (16 models, 4 GPUs, 6 plans,
1 dtype: "Seed 002's chat service", "reproduces seed 000's 16.1 GB", "(SPEC errata)" became what the claim
is and where it is published) reached new registries only; users read notes in `kvreg model show/list`,
`kvreg plan list`, the workbook and the web page. The upgrade gives each of those rows, found by its
catalog name, the catalog's new notes only where its notes are still exactly the old catalog text: a note
its owner edited is left alone. Every figure the notes quote is unchanged, and no other column moves.

The texts are copied here from kvreg/catalog/*.toml as they were just before and after the rewrite
(commit 9bbaff4), not read from those files, which go on changing after this revision. A row that still
has an earlier catalog's wording (a registry seeded before that note last changed) is left as it is.

Downgrading puts the old text back where a row still has the new text.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0022'
down_revision: Union[str, None] = '0021'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# (table, the row's catalog name, the catalog's notes before this revision, its notes from this revision on)
NOTES = (
    # model
    ("model", "Llama-3.1-8B",
     "from tests/data/hf-configs/meta-llama__Llama-3.1-8B.json. Dense GQA (32 query / 8 KV heads). params_total "
     "8.05e9 reproduces seed 000's 16.1 GB of bf16 weights (Meta's card says 8.03B).",
     "from tests/data/hf-configs/meta-llama__Llama-3.1-8B.json. Dense GQA (32 query / 8 KV heads). params_total "
     "8.05e9 reproduces the 16.1 GB of bf16 weights a published long-context sizing table gives (Meta's card says "
     "8.03B)."),
    ("model", "Llama-3.1-70B",
     "from tests/data/hf-configs/meta-llama__Llama-3.1-70B.json. Dense GQA (64 query / 8 KV heads). params_total "
     "70.6e9 reproduces seed 000's 141.2 GB of bf16 weights.",
     "from tests/data/hf-configs/meta-llama__Llama-3.1-70B.json. Dense GQA (64 query / 8 KV heads). params_total "
     "70.6e9 reproduces the 141.2 GB of bf16 weights a published long-context sizing table gives."),
    ("model", "Llama-3.1-405B",
     "from tests/data/hf-configs/meta-llama__Llama-3.1-405B.json. Dense GQA (128 query / 8 KV heads). "
     "params_total 405.9e9 reproduces seed 000's 811.8 GB of bf16 weights.",
     "from tests/data/hf-configs/meta-llama__Llama-3.1-405B.json. Dense GQA (128 query / 8 KV heads). "
     "params_total 405.9e9 reproduces the 811.8 GB of bf16 weights a published long-context sizing table gives."),
    ("model", "Qwen2.5-7B",
     "from tests/data/hf-configs/Qwen__Qwen2.5-7B.json (base model). Dense GQA (28 query / 4 KV heads). The "
     "config's sliding_window 131072 is inert (use_sliding_window false): every layer is full attention. "
     "params_total 7.6e9 reproduces seed 000's 15.2 GB.",
     "from tests/data/hf-configs/Qwen__Qwen2.5-7B.json (base model). Dense GQA (28 query / 4 KV heads). The "
     "config's sliding_window 131072 is inert (use_sliding_window false): every layer is full attention. "
     "params_total 7.6e9 reproduces the 15.2 GB of bf16 weights a published long-context sizing table gives."),
    ("model", "Qwen2.5-7B-Instruct-1M",
     "Same geometry as Qwen2.5-7B (seed 000: 'identical geometry'); max_position_embeddings 1,010,000 from the "
     "published Qwen/Qwen2.5-7B-Instruct-1M config.json. Its dual-chunk attention changes compute, not the KV "
     "bytes per token.",
     "Same geometry as Qwen2.5-7B ('identical geometry', as a published long-context sizing table puts it); "
     "max_position_embeddings 1,010,000 from the published Qwen/Qwen2.5-7B-Instruct-1M config.json. Its "
     "dual-chunk attention changes compute, not the KV bytes per token."),
    ("model", "Qwen2.5-72B",
     "from tests/data/hf-configs/Qwen__Qwen2.5-72B.json (base model). Dense GQA (64 query / 8 KV heads); "
     "sliding_window 131072 inert (use_sliding_window false). params_total 72.7e9 reproduces seed 000's 145.4 GB.",
     "from tests/data/hf-configs/Qwen__Qwen2.5-72B.json (base model). Dense GQA (64 query / 8 KV heads); "
     "sliding_window 131072 inert (use_sliding_window false). params_total 72.7e9 reproduces the 145.4 GB of bf16 "
     "weights a published long-context sizing table gives."),
    ("model", "Qwen3-8B",
     "from tests/data/hf-configs/Qwen__Qwen3-8B.json. Dense GQA (32 query / 8 KV heads). Config claims 40,960 "
     "positions; Qwen documents 131,072 with YaRN rope scaling. params_total 8.2e9 reproduces seed 000's 16.4 GB.",
     "from tests/data/hf-configs/Qwen__Qwen3-8B.json. Dense GQA (32 query / 8 KV heads). Config claims 40,960 "
     "positions; Qwen documents 131,072 with YaRN rope scaling. params_total 8.2e9 reproduces the 16.4 GB of bf16 "
     "weights a published long-context sizing table gives."),
    ("model", "Qwen3-235B-A22B",
     "from tests/data/hf-configs/Qwen__Qwen3-235B-A22B.json. MoE (128 experts, 8 active), GQA with only 4 KV "
     "heads: at TP8 the cache is replicated, not sharded (SPEC errata). Config claims 40,960 positions (131,072 "
     "with YaRN). 235B total / 22B active as published.",
     "from tests/data/hf-configs/Qwen__Qwen3-235B-A22B.json. MoE (128 experts, 8 active), GQA with only 4 KV "
     "heads: at TP8 the cache is replicated, not sharded: a common sizing shortcut divides it by 8; kvreg keeps a "
     "whole KV head per GPU, as vLLM and SGLang do. Config claims 40,960 positions (131,072 with YaRN). 235B "
     "total / 22B active as published."),
    ("model", "Mistral-Large-2411",
     "Published architecture of mistralai/Mistral-Large-Instruct-2411 (config.json and model card): 88 layers, "
     "hidden 12288, 96 query / 8 KV heads, head_dim 128, 131,072 positions, bf16, 123B parameters (seed 000: "
     "246.0 GB).",
     "Published architecture of mistralai/Mistral-Large-Instruct-2411 (config.json and model card): 88 layers, "
     "hidden 12288, 96 query / 8 KV heads, head_dim 128, 131,072 positions, bf16, 123B parameters (246.0 GB of "
     "bf16 weights in a published long-context sizing table)."),
    ("model", "Command-R-plus-0824",
     "Published architecture of CohereForAI/c4ai-command-r-plus-08-2024 (config.json and model card): 64 layers, "
     "hidden 12288, 96 query / 8 KV heads, head_dim 128, 131,072 positions, 104B parameters (seed 000: 208.0 GB). "
     "Hub checkpoints are float16 (transformers Cohere docs).",
     "Published architecture of CohereForAI/c4ai-command-r-plus-08-2024 (config.json and model card): 64 layers, "
     "hidden 12288, 96 query / 8 KV heads, head_dim 128, 131,072 positions, 104B parameters (208.0 GB of 16-bit "
     "weights in a published long-context sizing table). Hub checkpoints are float16 (transformers Cohere docs)."),
    ("model", "Yi-34B-200K",
     "Published architecture of 01-ai/Yi-34B-200K (Llama-style config.json): 60 layers, hidden 7168, 56 query / 8 "
     "KV heads, head_dim 128, 200,000 positions, bf16. params_total 34.8e9 reproduces seed 000's 69.6 GB.",
     "Published architecture of 01-ai/Yi-34B-200K (Llama-style config.json): 60 layers, hidden 7168, 56 query / 8 "
     "KV heads, head_dim 128, 200,000 positions, bf16. params_total 34.8e9 reproduces the 69.6 GB of bf16 weights "
     "a published long-context sizing table gives."),
    ("model", "GLM-4-9B-chat-1M",
     "Published architecture of THUDM/glm-4-9b-chat-1m (ChatGLM-style config.json): num_layers 40, 32 query "
     "heads, multi_query_group_num 4 KV groups, kv_channels 128, seq_length 1,048,576, bf16. params_total 9.4e9 "
     "reproduces seed 000's 18.8 GB.",
     "Published architecture of THUDM/glm-4-9b-chat-1m (ChatGLM-style config.json): num_layers 40, 32 query "
     "heads, multi_query_group_num 4 KV groups, kv_channels 128, seq_length 1,048,576, bf16. params_total 9.4e9 "
     "reproduces the 18.8 GB of bf16 weights a published long-context sizing table gives."),
    ("model", "ChatGLM3-6B-128K",
     "from tests/data/hf-configs/THUDM__chatglm3-6b-128k.json. num_layers 28, multi_query_group_num 2 KV groups, "
     "kv_channels 128: 28,672 B per token in bf16, not seed 000's 32 KiB (SPEC errata: the config wins). "
     "seq_length 131,072. params_total 6.4e9 reproduces seed 000's 12.8 GB.",
     "from tests/data/hf-configs/THUDM__chatglm3-6b-128k.json. num_layers 28, multi_query_group_num 2 KV groups, "
     "kv_channels 128: 28,672 B per token in bf16, not the 32 KiB a published long-context sizing table lists "
     "(the config wins). seq_length 131,072. params_total 6.4e9 reproduces that table's 12.8 GB of 16-bit "
     "weights."),
    ("model", "Llama-2-7B",
     "from tests/data/hf-configs/meta-llama__Llama-2-7b-hf.json. Full multi-head attention (32 KV heads = 32 "
     "query heads): 512 KiB per token in bf16, seed 002's contrast with Llama-3-8B. 6.74B parameters as "
     "published.",
     "from tests/data/hf-configs/meta-llama__Llama-2-7b-hf.json. Full multi-head attention (32 KV heads = 32 "
     "query heads): 512 KiB per token in bf16, four times Llama-3-8B's 128 KiB: the common contrast that shows "
     "what GQA saves. 6.74B parameters as published."),
    ("model", "Llama-3-8B",
     "from tests/data/hf-configs/meta-llama__Meta-Llama-3-8B.json. GQA 32 query / 8 KV heads: 128 KiB per token "
     "in bf16 (seed 002's worked example). 8.03B parameters as published; 8,192 positions.",
     "from tests/data/hf-configs/meta-llama__Meta-Llama-3-8B.json. GQA 32 query / 8 KV heads: 128 KiB per token "
     "in bf16 (the common worked example of Llama-3-8B on one H100 with 53 GB of cache). 8.03B parameters as "
     "published; 8,192 positions."),
    ("model", "Llama-3-70B",
     "Published architecture of meta-llama/Meta-Llama-3-70B (config.json and model card): 80 layers, hidden 8192, "
     "64 query / 8 KV heads (GQA, not the MHA seed 001 assumes), head_dim 128, 8,192 positions, bf16. "
     "params_total 70.6e9 as for Llama-3.1-70B.",
     "Published architecture of meta-llama/Meta-Llama-3-70B (config.json and model card): 80 layers, hidden 8192, "
     "64 query / 8 KV heads (GQA, not the MHA that widely quoted 70B-on-one-H100 figures assume), head_dim 128, "
     "8,192 positions, bf16. params_total 70.6e9 as for Llama-3.1-70B."),
    # gpu
    ("gpu", "H100-SXM",
     "H100 SXM5 80GB HBM3. 80 GiB is the seeds' and SPEC's convention; CUDA reports 79.19 GiB (vLLM startup log, "
     "github.com/generative-computing/mellea/pull/416), which the engine rules use. Prices nominal: ~2.5 "
     "USD/GPU-hour cloud on-demand, ~30,000 USD per card. Dense FLOP/s from NVIDIA's H100 Tensor Core GPU "
     "Architecture whitepaper (H100 SXM5: BF16 989.4, FP8 1,978.9 TFLOPS; no FP4 units).",
     "H100 SXM5 80GB HBM3. 80 GiB (the vendor's 80 GB read as GiB) is the common sizing convention; CUDA reports "
     "79.19 GiB (vLLM startup log, github.com/generative-computing/mellea/pull/416), which the engine rules use. "
     "Prices nominal: ~2.5 USD/GPU-hour cloud on-demand, ~30,000 USD per card. Dense FLOP/s from NVIDIA's H100 "
     "Tensor Core GPU Architecture whitepaper (H100 SXM5: BF16 989.4, FP8 1,978.9 TFLOPS; no FP4 units)."),
    ("gpu", "H200",
     "H200 SXM 141GB HBM3e. NVIDIA's spec sheet says 141 GB; the seeds and SPEC read it as 141 GiB (this row "
     "follows them). CUDA reports 139.81 GiB (an 8 x H200 run's PyTorch and vLLM lines, "
     "github.com/sungwon-chae/arxiv_confi etu_logging.md), which the engine rules use. Prices nominal: ~3.5 "
     "USD/GPU-hour, ~35,000 USD per card. Dense FLOP/s: NVIDIA's H200 datasheet gives BF16 1,979 and FP8 3,958 "
     "TFLOPS with sparsity, half that dense (the H100 SXM's GH100 die and clocks, 989.4 and 1,978.9 in the Hopper "
     "whitepaper); no FP4 units.",
     "H200 SXM 141GB HBM3e. NVIDIA's spec sheet says 141 GB; common sizing tables read it as 141 GiB, and this "
     "row follows them. CUDA reports 139.81 GiB (an 8 x H200 run's PyTorch and vLLM lines, "
     "github.com/sungwon-chae/arxiv_confi etu_logging.md), which the engine rules use. Prices nominal: ~3.5 "
     "USD/GPU-hour, ~35,000 USD per card. Dense FLOP/s: NVIDIA's H200 datasheet gives BF16 1,979 and FP8 3,958 "
     "TFLOPS with sparsity, half that dense (the H100 SXM's GH100 die and clocks, 989.4 and 1,978.9 in the Hopper "
     "whitepaper); no FP4 units."),
    ("gpu", "B200",
     "B200 HBM3e. 192 GiB chosen: it is the physical HBM3e size (8 stacks x 24 GiB), the figure seed 001 uses, "
     "and SPEC sizes GPUs by the vendor's HBM figure. NVIDIA's DGX/HGX B200 sheets quote 180 GB usable per GPU "
     "(1,440 GB per 8), and CUDA reports 178.35 GiB (a CUDA device query, github.com/pytorch/ao/pull/4002), which "
     "the engine rules use: for conservative theoretical plans use 178 GiB or a larger reserve. Prices nominal: "
     "~5.0 USD/GPU-hour, ~45,000 USD per card. Dense FLOP/s from NVIDIA's HGX B200 datasheet, per GPU (the "
     "sheet's 8-GPU sparse figures / 8 / 2): BF16 2.25, FP8 4.5, FP4 9 PFLOPS.",
     "B200 HBM3e. 192 GiB chosen: it is the physical HBM3e size (8 stacks x 24 GiB), the figure widely quoted for "
     "B200, and kvreg sizes GPUs by the vendor's HBM figure. NVIDIA's DGX/HGX B200 sheets quote 180 GB usable per "
     "GPU (1,440 GB per 8), and CUDA reports 178.35 GiB (a CUDA device query, github.com/pytorch/ao/pull/4002), "
     "which the engine rules use: for conservative theoretical plans use 178 GiB or a larger reserve. Prices "
     "nominal: ~5.0 USD/GPU-hour, ~45,000 USD per card. Dense FLOP/s from NVIDIA's HGX B200 datasheet, per GPU "
     "(the sheet's 8-GPU sparse figures / 8 / 2): BF16 2.25, FP8 4.5, FP4 9 PFLOPS."),
    ("gpu", "M3-Ultra",
     "Apple M3 Ultra (Mac Studio), as seed 001 uses it: 192 GiB unified memory at 800 GB/s. Unified memory is "
     "shared with macOS and apps, and by default macOS lets the GPU wire only part of it (raise with sysctl "
     "iogpu.wired_limit_mb); plan with a larger reserve. Apple's own M3 Ultra figures are 96/256/512 GB and 819 "
     "GB/s (192 GB / 800 GB/s match the M2 Ultra); edit to your machine. No hourly cloud price; unit_price ~5,500 "
     "USD nominal. No FLOP/s given: Apple publishes no tensor FLOP/s for its GPU.",
     "Apple M3 Ultra (Mac Studio), as widely quoted sizing figures give it: 192 GiB unified memory at 800 GB/s. "
     "Unified memory is shared with macOS and apps, and by default macOS lets the GPU wire only part of it (raise "
     "with sysctl iogpu.wired_limit_mb); plan with a larger reserve. Apple's own M3 Ultra figures are 96/256/512 "
     "GB and 819 GB/s (192 GB / 800 GB/s match the M2 Ultra); edit to your machine. No hourly cloud price; "
     "unit_price ~5,500 USD nominal. No FLOP/s given: Apple publishes no tensor FLOP/s for its GPU."),
    # plan
    ("plan", "chat-llama3-8b",
     "Seed 002's chat service: 1,500 tokens per conversation on average, about 269 concurrent users per H100 with "
     "a 53 GB KV pool (25,272 blocks of 16 tokens / 94 blocks per request).",
     "A chat service on Llama-3-8B: 1,500 tokens per conversation on average, about 269 concurrent users per H100 "
     "with a 53 GB KV pool (25,272 blocks of 16 tokens / 94 blocks per request)."),
    ("plan", "docs-llama3-8b",
     "Seed 002's document (retrieval QA) service: 13,000 tokens per request, about 31 concurrent users per H100. "
     "13,000 tokens exceeds Llama-3-8B's 8,192-position claim (context_within_claim = 0); seed 002 ignores that. "
     "Serve it with a longer-context model, or cap the documents at 8K.",
     "A document (retrieval QA) service on Llama-3-8B: 13,000 tokens per request, about 31 concurrent users per "
     "H100. 13,000 tokens exceeds Llama-3-8B's 8,192-position claim (context_within_claim = 0); the sizing "
     "example this plan follows ignores that. Serve it with a longer-context model, or cap the documents at 8K."),
    ("plan", "mixed-llama3-8b",
     "Seed 002's chat (1,500 tokens) and documents (13,000 tokens) served together, 80% chat and 20% documents: "
     "the mean request holds 237.8 blocks of 16 tokens, so the 53 GB pool holds about 106 concurrent users (85 "
     "chat, 21 documents) per H100 -- between chat alone (269) and documents alone (31). Like docs-llama3-8b, "
     "13,000 tokens exceeds Llama-3-8B's 8,192-position claim.",
     "The chat (1,500 tokens) and document (13,000 tokens) services on Llama-3-8B served together, 80% chat and "
     "20% documents: the mean request holds 237.8 blocks of 16 tokens, so the 53 GB pool holds about 106 "
     "concurrent users (85 chat, 21 documents) per H100 -- between chat alone (269) and documents alone (31). "
     "Like docs-llama3-8b, 13,000 tokens exceeds Llama-3-8B's 8,192-position claim."),
    ("plan", "longctx-llama31-70b",
     "Seed 000: Llama-3.1-70B at 128K on 8xH100, minimum TP 4: about 3.8 concurrent 131,072-token sequences per "
     "replica in bf16 KV.",
     "A long-context service: Llama-3.1-70B at 128K on 8xH100, minimum TP 4: about 3.8 concurrent 131,072-token "
     "sequences per replica in bf16 KV."),
    ("plan", "longctx-qwen3-235b",
     "Seed 000: Qwen3-235B-A22B at 128K on 8xH100, TP 8. With 4 KV heads, TP 8 replicates the cache (48,128 B per "
     "token per GPU), so a replica holds about 2.7 sequences, not seed 000's 5.3 (SPEC errata). The config claims "
     "40,960 positions (131,072 with YaRN rope scaling), so context_within_claim is 0 unless YaRN is enabled.",
     "A long-context service: Qwen3-235B-A22B at 128K on 8xH100, TP 8. With 4 KV heads, TP 8 replicates the cache "
     "(48,128 B per token per GPU), so a replica holds about 2.7 sequences, not the 5.3 of a published "
     "long-context table: a common sizing shortcut divides the cache by TP; kvreg keeps a whole KV head per GPU, "
     "as vLLM and SGLang do. The config claims 40,960 positions (131,072 with YaRN rope scaling), so "
     "context_within_claim is 0 unless YaRN is enabled."),
    ("plan", "longctx-llama31-8b-h200",
     "Seed 000: Llama-3.1-8B at 128K on one H200 per replica: about 6.8 concurrent 131,072-token sequences in "
     "bf16 KV.",
     "A long-context service: Llama-3.1-8B at 128K on one H200 per replica: about 6.8 concurrent 131,072-token "
     "sequences in bf16 KV."),
    # dtype
    ("dtype", "int2",
     "2-bit KV cache quantization, KIVI-style (per-channel keys, per-token values; seed 001's 'INT2 (KIVI)'). KV "
     "only: not a weight format here. Scales and the full-precision residual window are not counted.",
     "2-bit KV cache quantization, KIVI-style (Liu et al., arXiv:2402.02750: per-channel keys, per-token values; "
     "often listed as 'INT2 (KIVI)'). KV only: not a weight format here. Scales and the full-precision residual "
     "window are not counted."),
)


def _rewrite(table: str, name: str, old: str, new: str) -> None:
    """The row's notes become `new` where they are still exactly `old`."""
    op.get_bind().execute(sa.text(f"UPDATE {table} SET notes = :new WHERE name = :name AND notes = :old"),
                          {"new": new, "name": name, "old": old})


def upgrade() -> None:
    for table, name, old, new in NOTES:
        _rewrite(table, name, old, new)


def downgrade() -> None:
    for table, name, old, new in NOTES:
        _rewrite(table, name, new, old)
