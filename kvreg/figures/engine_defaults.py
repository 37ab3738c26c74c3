"""The engines' defaults and the constants of their memory arithmetic, each named once with its source.

A deployment input left NULL stands for its engine's default; the figure declarations
(kvreg.figures.declarations) resolve it from these, and the inputs' meanings (kvreg.figures.inputs) quote
them. docs/engine-rules.md says where each comes from. Standard library only.
"""

GIB = 2**30
MIB = 2**20

# ---- engine defaults (docs/engine-rules.md says where each comes from)
# Engine releases as kvreg.core.rules.release_number encodes them: major x 1,000,000 + minor x 1,000 + patch
# (0.10.1 -> 10,001). A deployment without --engine-version follows the latest release kvreg knows.
VLLM_LATEST_RELEASE = 20000
# --gpu-memory-utilization default: 0.9 up to v0.19, 0.92 from v0.20 (vllm/config/cache.py CacheConfig and
# vllm/entrypoints/llm.py LLM.__init__; SPEC "The vLLM rule").
VLLM_GPU_MEMORY_UTILIZATION = 0.92
VLLM_GPU_MEMORY_UTILIZATION_BEFORE = 0.9
VLLM_GMU_092_RELEASE = 20000
VLLM_MAX_NUM_BATCHED_TOKENS = 8192  # vLLM's default for the OpenAI server on GPUs of 70 GiB and more
# vLLM's max_concurrent_batches: 2 with async scheduling (on by default) at PP 1, else the PP size.
VLLM_ASYNC_CONCURRENT_BATCHES = 2
# Attention kernels take blocks in multiples of 16 tokens (MLA kernels: 64); the alignment vLLM raises a
# hybrid model's attention block by until one attention page holds a layer's state.
VLLM_BLOCK_ALIGNMENT = 16
VLLM_MLA_BLOCK_ALIGNMENT = 64
# Peak activation estimate: this many 16-bit vectors of width attention_heads x head_dim live per batched
# token at the peak of vLLM's profile run (residual, norm, QKV, attention output and the MLP's wider
# intermediates). 1.125 GiB for Llama-3-8B at 8,192 tokens where vLLM v0.6.5 logged 1.26 GiB
# (tests/data/logs/vllm-pr10511-llama3-8b-tp1.log); measure it and give --activation-memory for anything
# that matters.
ACTIVATION_VECTORS_PER_TOKEN = 18
ACTIVATION_BYTES_PER_ELEMENT = 2
# With the model's widths, the forward pass peaks in a layer's MLP when down_proj allocates its output
# (vllm/model_executor/models/llama.py LlamaMLP.forward: `gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up);
# x, _ = self.down_proj(x)`; qwen2.py and the others alike): the gate-up output (2 x intermediate) and the activated
# one (intermediate) are still referenced, beside three vectors of the hidden width: the residual, the MLP's input
# (the caller's `hidden_states = self.mlp(hidden_states)` holds it until the call returns) and down_proj's output.
# Measured, where the forward pass is the peak: Llama-3.1-8B on an RTX 3090 with v0.6.4, V0 without chunked
# prefill, logged 17.06 - 14.99 = 2.07 GiB at 20,000 batched tokens and 17.98 - 14.99 = 2.99 GiB at 29,000
# (tests/data/logs/vllm-issue10517-*.log); 3 x 14,336 + 3 x 4,096 elements of 2 B a token give 2.06 and 2.99 GiB
# (two hidden vectors, kvreg's earlier count, gave 1.91 and 2.77).
ACTIVATION_INTERMEDIATE_VECTORS = 3
ACTIVATION_HIDDEN_VECTORS = 3
# With the model's widths (vllm/model_executor/models/llama.py LlamaMLP: gate_up_proj's 2 x intermediate
# outputs, SiluAndMul's intermediate output, the residual and hidden stream at hidden_size, all in the model
# dtype; not divided by TP: vLLM v0.6.5 logged 1.26 GiB for Llama-3-8B at TP 1 and at TP 2) plus the sampler
# warm-up of the profile run: max_num_seqs (256, vLLM's default) rows of fp32 logits
# and their probabilities over the vocabulary (vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run).
VLLM_SAMPLER_SEQS = 256
# The V0 engine's profile run samples too, and through the same sort path: vllm/worker/model_runner.py
# GPUModelRunnerBase.profile_run (v0.6 to v0.10) builds its max_num_seqs dummy prompts with
# `SamplingParams(top_p=0.99, top_k=self.vocab_size - 1)` ("Enable top-k sampling to reflect the accurate memory
# usage"), and V0's Sampler (vllm/model_executor/layers/sampler.py _apply_top_k_top_p) casts the logits to fp32,
# sorts them (fp32 values, int64 indices), takes their softmax and cumsum, masks and scatters: the bytes per logit of
# V1's sampler before v0.17 (VLLM_V1_SAMPLER_BYTES_PER_LOGIT below). Its forward pass frees each layer's intermediates
# before compute_logits, so the peak is the larger of the two, as in V1. Measured (held out: none of these set the
# constant): Llama-3-8B on an H100 with v0.6.5 logged 1.26 GiB where max(8,192-token forward, 256 x 128,256 x 38 B
# beside the hidden states) = 1.22; Llama-3.2-3B on a T4 with v0.8.2's V0 fallback logged 0.90 where 192 x 128,256 x
# 38 B beside 2,048 hidden states = 0.88 (a sum at 8 B a logit, kvreg's earlier V0 rule, gave 1.03 and 0.30).
# The V0 fallback: v0.8 to v0.10 ran the V0 engine, not V1, on a CUDA GPU below compute
# capability 8.0 (vllm/engine/arg_utils.py EngineArgs._is_v1_supported_oracle: `if current_platform.is_cuda() and
# current_platform.get_device_capability().major < 8: _raise_or_fallback(feature_name="Compute Capability < 8.0")`,
# and the log says "Compute Capability < 8.0 is not supported by the V1 Engine. Falling back to V0."); v0.11 removed
# the V0 engine, so kvreg ends the fallback there (a log of a later release on such a GPU would test that).
VLLM_V0_FALLBACK_CAPABILITY_BELOW = 8.0
VLLM_V0_REMOVED_RELEASE = 11000  # v0.11.0
# The V1 engine (the default from v0.8.0) warms its sampler up with max_num_seqs rows of logits
# (vllm/v1/worker/gpu_model_runner.py profile_run -> _dummy_sampler_run: logits = compute_logits(hidden_states)
# over max_num_reqs rows, then self.sampler with top_k = vocab - 1 and top_p = 0.9), and the server's
# max_num_seqs default depends on the GPU (vllm/engine/arg_utils.py, _set_default_args_v1 / get_batch_defaults:
# 1,024 for the OpenAI server when the device's total memory is 70 GiB or more and it is not an A100, else 256).
VLLM_V1_FIRST_RELEASE = 8000  # v0.8.0, the first release that runs the V1 engine by default
VLLM_LARGE_GPU_BYTES = 70 * GIB  # arg_utils: device_memory >= 70 * GiB_bytes
# ... and not an A100: PR 17885 ("Use small max_num_batched_tokens for A100", May 2025, in v0.9.0) added
# `and "a100" not in device_name` (large batches cost the A100 36% of its throughput at TP 2); it holds through
# v0.24's arg_utils. So an A100 80GB keeps 2,048 batched tokens and 256 sequences. kvreg reads the GPU row's name
# as the device name (the catalog's A100-80GB; a GPU added as, say, "A100 80GB" matches too).
VLLM_A100_SMALL_DEFAULTS_FROM = 9000  # v0.9.0
# Under pipeline parallelism most of vLLM's model files build the input embeddings on the first stage only and the
# lm_head on the last (`if get_pp_group().is_first_rank: ... else PPMissingLayer()`: llama.py, qwen2.py and the
# Qwen3 built on it, deepseek_v2.py for DeepSeek-V2/V3 and Kimi-K2, glm4_moe.py). These architectures' files build
# both on every stage (vLLM 0.12's qwen2_moe.py, qwen3_moe.py, mixtral.py, gpt_oss.py, qwen3_next.py). Measured: a
# Qwen3-30B-A3B run at TP 4 x PP 2 logged 7.33 GiB of weights on both stages, where one matrix a stage gives 7.11
# and both 7.26 (tests/data/logs/vllm-rwood-qwen3-30b-a3b-gh200-tp4-pp2.log).
VLLM_VOCAB_ON_EVERY_STAGE = ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "GptOssForCausalLM",
                             "Qwen3NextForCausalLM")
VLLM_LARGE_GPU_MAX_NUM_SEQS = 1024  # arg_utils default_max_num_seqs on such GPUs (OPENAI_API_SERVER)
# ... and on smaller GPUs the same function's default_max_num_batched_tokens for the OpenAI server is 2,048
# (8,192 from 70 GiB): the V1 profile run's batch there.
VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS = 2048
# Bytes live per logit at the V1 sampler warm-up's peak (vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run,
# after the forward pass of the profile run has freed its activations), measured: llm-d's five vLLM v0.11.0 H100
# runs (tests/data/logs/llm-d-empirical-vllm-memory-results.md) logged activation peaks of 4.76 GiB (Llama-3.1-8B),
# 5.56 (Qwen3-0.6B), 5.64 (Qwen3-32B), 7.38 (gpt-oss-20b) and 4.84 (Llama-3.3-70B at TP 2): less the forward's
# 8,192 output hidden states, 38.3 to 38.6 B for each of the 1,024 x vocabulary logits. The top-k/top-p sort path
# alone (vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p) holds 28 of them: 2 (the model-dtype logits)
# + 4 (the fp32 copy) + 4 (sorted values) + 8 (sort indices) + 4 (sorted probabilities) + 1 + 1 (masks) + 4 (the
# scattered result); the rest is the random sampling after it (probabilities and exponential noise in fp32).
VLLM_V1_SAMPLER_BYTES_PER_LOGIT = 38
# An 8 x L40S run of v0.10.2 (tests/data/logs/vllm-roethig-qwen3-235b-fp8-l40s-tp8.log) logged 1.4 GiB of peak
# activation where 256 x 151,936 logits of 38 B beside 2,048 hidden states give 1.39 GiB.
# From v0.17 the warm-up's top-k/top-p masking no longer sorts the vocabulary: apply_top_k_top_p runs vLLM's Triton
# kernel in place on batches of 8 rows or more (vllm/v1/sample/ops/topk_topp_sampler.py and topk_topp_triton.py,
# PR 33538, first released in v0.17.0), beside a scratch buffer of one fp32 row per SM. What stays live is the
# model-dtype logits (2 B), their fp32 copy (4), the probabilities (4) and the exponential noise (4) of random_sample,
# 14 B, plus that buffer; measured: vLLM 0.19.1 on an A100 40GB (tests/data/logs/
# vllm-durango-qwen3-coder-30b-fp8-a100-40gb.log) had 39.38 x 0.9 - 29.54 - 5.03 = 0.87 GiB for activation and
# non-torch memory, 0.74 GiB after v0.11's 0.13 GiB of non-torch memory: 20 B for each of its 256 x 151,936 logits.
VLLM_TRITON_SAMPLER_FROM = 17000  # v0.17.0
VLLM_TRITON_SAMPLER_BYTES_PER_LOGIT = 20
# From v0.21 vLLM samples with FlashInfer's top-k/top-p kernel by default on GPUs it supports (PR 40376, "FlashInfer
# top-k/top-p sampler enabled by default" in the v0.21.0 notes). Measured: vllm#50722's run (a release from v0.21,
# 1,024 sequences over Qwen3.5's 248,320-token vocabulary) logged 5.66 GiB of peak activation: less its 8,192 x 2,048
# hidden states, 24 B a logit.
VLLM_FLASHINFER_SAMPLER_FROM = 21000  # v0.21.0
VLLM_FLASHINFER_SAMPLER_BYTES_PER_LOGIT = 24
# Before v0.21 FlashInfer's sampler was no default of vLLM's but of the install: v0.8 to v0.10's TopKTopPSampler
# (vllm/v1/sample/ops/topk_topp_sampler.py __init__) takes forward_cuda whenever the flashinfer package imports (>=
# 0.2.3) and VLLM_USE_FLASHINFER_SAMPLER is not set to 0 (envs.py: unset reads None, "is not False"), logging "Using
# FlashInfer for top-p & top-k sampling", else "FlashInfer is not available. Falling back to the PyTorch-native
# implementation". The profile run's dummy sampling (gpu_model_runner.py _dummy_sampler_run: top_k = vocab - 1,
# top_p = 0.9, no generators) then goes to flashinfer_sample -> flashinfer.sampling.top_k_top_p_sampling_from_logits,
# whose default filter_apply_order "top_k_first" runs top_k_mask_logits (a new fp32 tensor) and torch.softmax over it
# (another), then samples from those probabilities in place. Live per logit at the peak: the model-dtype logits
# compute_logits returned (2 B), the sampler's fp32 copy (Sampler.forward: logits.to(torch.float32), 4), the masked
# logits (4) and their probabilities (4): 14 B, against the sort path's 38. Derived, not fitted; dennislee22's five
# v0.10.1 A100 runs that log the line (tests/data/logs/vllm-dennislee-*) then come within 0.7% (docs/engine-rules.md).
VLLM_FLASHINFER_V1_SAMPLER_BYTES_PER_LOGIT = 2 + 4 + 4 + 4
# From v0.22 vLLM runs some architectures on its V2 model runner by default (vllm/config/vllm.py
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES; VLLM_USE_V2_MODEL_RUNNER overrides it either way): Qwen3ForCausalLM from
# v0.22, LlamaForCausalLM and MistralForCausalLM from v0.23, DeepseekV2ForCausalLM, Qwen2MoeForCausalLM and
# GraniteMoeForCausalLM from v0.24 (release, architectures it adds). Its profile run warms the sampler up on the same
# min(max_num_batched_tokens, max_num_seqs) rows (vllm/v1/worker/gpu/model_runner.py _dummy_run), but its sampler
# (vllm/v1/worker/gpu/sample/sampler.py) copies the model-dtype logits to fp32 and, with the warm-up's default
# parameters (no top-k or top-p), samples them with a Triton Gumbel kernel: 2 + 4 = 6 B a logit. It profiles no CUDA
# graphs (profile_cudagraph_memory returns 0): it captures them after sizing the KV cache, as releases before v0.21
# did. Measured: Qwen1.5-MoE-A2.7B at TP 2 on RTX 4090s, vLLM 0.25.1 (tests/data/logs/
# vllm-lyell-qwen15-moe-4090-tp2-v0251.log): 23.64 x 0.88 - 13.39 - 6.97 = 0.44 GiB of activation and non-torch
# memory, where V1's 24 B a logit would give 1.01.
VLLM_V2_RUNNER_ARCHITECTURES = (
    (22000, ("Qwen3ForCausalLM",)),
    (23000, ("LlamaForCausalLM", "MistralForCausalLM")),
    (24000, ("DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM")),
)
# From v0.25 the V2 model runner is the default for every dense model, whatever its architecture ("Model Runner V2 is
# now the default for all dense models (#44443)", the v0.25.0 release notes; vllm/config/vllm.py
# _is_default_v2_model_runner_model keeps the list above for MoE models and excludes MoE and hybrid models otherwise).
# Measured: Qwen2-7B-Instruct (Qwen2ForCausalLM, on no list) at TP 2 on RTX 4090s, vLLM 0.25.1, logs "Using V2 Model
# Runner" (tests/data/logs/vllm-lyell-qwen2-7b-4090-tp2-v0251.log).
VLLM_V2_RUNNER_DENSE_FROM = 25000  # v0.25.0
VLLM_V2_SAMPLER_BYTES_PER_LOGIT = 6
# Non-torch memory (vllm/utils memory_profiling: non_torch_increase), the CUDA context, cuBLAS workspace
# and NCCL buffers the profile run sees outside PyTorch's allocator. vLLM v0.6.5 and v0.6.6 measured it
# from before CUDA was initialised (PR 10511): 1.79 GiB on one H100, 3.58 GiB at TP 2, the second 1.79 GiB
# being NCCL's buffers. Every other release measures from a snapshot taken after CUDA (and, from the V1
# worker that initialises the distributed environment first, NCCL) is set up: the median of the vendored
# logs is 0.25 GiB (0.04 to 0.43 GiB over TP 1 to 8).
VLLM_NON_TORCH_BYTES = round(0.25 * GIB)
# From v0.7 (PR 11809 and PR 12126, "further polish memory profiling", January 2025) the V0 worker takes its
# baseline snapshot after CUDA is initialised, and the V1 worker (v0.8 on) does the same; on one GPU the profile
# run then sees little outside PyTorch: 0.04 GiB on an 8 GB card (vllm#12529, V0), 0.16 GiB on an H100 (mellea#416,
# V0) and, by its own arithmetic, 0.11 GiB for gpt-oss-120b on an H100 (vllm#23278, v0.10.1: 71.27 - 65.97 - 7.33 of
# sampler warm-up + 2.14) - their median, 0.11 GiB, set here. Held out: Llama-3.2-3B on a T4 (v0.8.2's V0 fallback)
# logged 0.05. Before v0.11 at TP x PP > 1 the figure stays VLLM_NON_TORCH_BYTES (0.20 GiB over 8 RTX 3090s in
# vllm#14447, 0.21 over 8 L40S, 0.34 to 0.43 over 4 A100 40GB in vllm#16570), plus NCCL's buffers on a fabric
# (VLLM_V1_NCCL_IN_SNAPSHOT_BEFORE). v0.6.4 and earlier counted every byte in use outside PyTorch, the
# CUDA context and other processes included (0.35 GiB on the RTX 3090 of vllm#10517): they keep 0.25 GiB.
VLLM_V07_TP1_NON_TORCH_BYTES = round(0.11 * GIB)
VLLM_SNAPSHOT_AFTER_CUDA_FROM = 7000  # v0.7.0
# From v0.11 the V1 worker takes that snapshot after CUDA and the distributed environment are set up, and what
# its profile run sees outside PyTorch is smaller and steadier: 0.13, 0.13, 0.13 and 0.14 GiB in llm-d's four
# TP 1 H100 runs of v0.11.0 (tests/data/logs/llm-d-empirical-vllm-memory-results.md), 0.13 GiB at TP 4 in
# vllm#50722's v0.21 run. At TP x PP > 1 llm-d's v0.11.0 runs show 0.42 GiB more (0.55 and 0.54 GiB at TP 2),
# which vllm#50722's v0.21 run at TP 4 no longer does; the logs do not say what it is (communication buffers
# allocated on their first use, in the profile run, are the likely part).
VLLM_V011_NON_TORCH_BYTES = round(0.13 * GIB)
VLLM_V011_TP_NON_TORCH_BYTES = round(0.42 * GIB)
VLLM_V011_TP_NON_TORCH_BEFORE = 21000  # v0.21.0
# A quantized checkpoint keeps its vocabulary matrices (input embeddings and lm_head) at 16 bits in both engines.
# vLLM's VocabParallelEmbedding, and the ParallelLMHead built on it, take UnquantizedEmbeddingMethod unless the
# quantization config returns a method for them (vllm/model_executor/layers/vocab_parallel_embedding.py), and
# FP8 (Fp8Config.get_quant_method), compressed-tensors, ModelOpt and MXFP4 return one only for linear, MoE and
# attention layers; GPTQ and AWQ quantize the lm_head only when the checkpoint says lm_head_quantized. SGLang's
# layers are the same code (python/sglang/srt/layers/vocab_parallel_embedding.py). Measured: llm-d's
# Llama-3.3-70B-Instruct-FP8-dynamic at TP 2 (vLLM v0.11.0) loads 33.88 GiB; 70.6B params x 1 B / 2 = 32.88 GiB
# plus 2 x 128,256 x 8,192 x (2 - 1) B / 2 = 0.98 GiB is 33.85 GiB.
ENGINE_EMBEDDING_BYTES_PER_PARAM = 2
# An MXFP4 checkpoint (gpt-oss: quantization_config quant_method mxfp4) quantizes only its experts: 4-bit values,
# two to a byte, and one 8-bit (e8m0) scale per MXFP4_BLOCK values along the input dimension; attention, router,
# norms, biases, embeddings and lm_head stay bf16 (ENGINE_EMBEDDING_BYTES_PER_PARAM). The engines pad each expert
# matrix to their kernels' tiles (vllm/model_executor/layers/quantization/mxfp4.py, Mxfp4MoEMethod.create_weights
# and process_weights_after_loading; SGLang's python/sglang/srt/layers/quantization/mxfp4.py):
#   - vLLM's Marlin backend (the default before v0.11.1: triton_kernels was not a dependency, so a stock install
#     on Hopper and every GPU before it used Marlin): the expert width per TP rank rounded up to 128, hidden_size
#     to 256 (utils/marlin_utils_fp4.py). vllm#23278's gpt-oss-120b on one H100 (v0.10.1, Marlin) loaded 65.97 GiB.
#   - vLLM's Triton backend on Hopper (from v0.11.1, when triton_kernels became a dependency, vllm#27370): the
#     width rounded up to 64, hidden_size unpadded; the scales are copied into the Hopper swizzled layout
#     (triton_kernels HopperMXScaleLayout: rows rounded up to 256) and the originals kept. llm-d's gpt-oss-20b
#     (v0.11.0 built with triton_kernels) loaded 13.47 GiB, and this layout gives 13.44 GiB from the config.
#   - SGLang: the width rounded up to 64 (without FlashInfer); a copy of the scales its kernels may make is not
#     modelled (no SGLang gpt-oss log to check it against).
# A GPU without FP8 units (CUDA compute capability below 8.9: the A100, A10, RTX 3090) runs an FP8 checkpoint through
# vLLM's Marlin kernels, weight-only (vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py,
# prepare_fp8_layer_for_marlin and prepare_moe_fp8_layer_for_marlin): the fp8 values are repacked at their size, and a
# block-scaled checkpoint's fp32 scales (one per 128 x 128 block) become 16-bit group scales, one per
# MARLIN_FP8_GROUP inputs for every output row: (K / 128) x N x 2 B a matrix, params x 2 / 128 B in all. kvreg's
# 8-bit float weight dtypes are block-scaled (the format of DeepSeek's and Qwen's FP8 releases); a channel-scaled
# checkpoint keeps one scale per output row, which this overstates. Measured: Qwen3-Coder-30B-A3B-FP8 on an A100 40GB
# (vLLM 0.19.1) loaded 29.54 GiB where params x 1 B plus the 16-bit vocabulary matrices are 28.98 GiB; the group scales
# of its 29.9e9 linear weights add 0.43 GiB.
VLLM_MARLIN_FP8_CAPABILITY_BELOW = 8.9
MARLIN_FP8_GROUP = 128
MARLIN_FP8_SCALE_BYTES = 2
FP8_WEIGHT_DTYPES = ("fp8_e4m3", "fp8_e5m2", "fp8")
MXFP4_BLOCK = 32
MXFP4_VALUES_PER_BYTE = 2
VLLM_MXFP4_TRITON_FROM = 11001  # v0.11.1
VLLM_MARLIN_MXFP4_WIDTH_ALIGN = 128
VLLM_MARLIN_MXFP4_HIDDEN_ALIGN = 256
MXFP4_TRITON_WIDTH_ALIGN = 64
VLLM_TRITON_MXFP4_SCALE_ROWS_ALIGN = 256
# RoPE's cos/sin table: both engines build one per model while it loads (get_rope caches it by shape), on every
# GPU, max_position_embeddings rows of the rotated width (cos and sin halves), and the logged weights count it.
# vLLM casts it to the model's dtype (vllm/model_executor/layers/rotary_embedding/base.py: cache.to(dtype), v0.6
# to v0.24); SGLang keeps it in float32 on CUDA (sglang/srt/layers/rotary_embedding.py: "cache needs to be in
# FP32 for numerical stability", cast only off CUDA). Measured: Qwen3-30B-A3B-Instruct-2507 (262,144 positions x
# 128) at TP 4 x PP 2 on GH200s loaded 7.3272 GiB a GPU, 0.0625 GiB above its weights' share, which is that table
# at 2 B.
VLLM_ROPE_CACHE_BYTES_PER_ELEMENT = 2
SGLANG_ROPE_CACHE_BYTES_PER_ELEMENT = 4
VLLM_V065_CONTEXT_BYTES = round(1.79 * GIB)
VLLM_V065_NCCL_BYTES_PER_GPU = round(1.79 * GIB)
VLLM_V065_FIRST, VLLM_V065_LAST = 6005, 6006  # v0.6.5 .. v0.6.6
# From v0.7 to v0.10 both engines' workers took their memory snapshot before init_worker_distributed_environment
# (V0: vllm/worker/worker.py Worker.init_device, `self.baseline_snapshot = MemorySnapshot()` and then "Initialize
# the distributed environment"; V1: vllm/v1/worker/gpu_worker.py Worker.init_device, `init_snapshot =
# MemorySnapshot()` first), so at TP x PP > 1 NCCL's buffers were allocated after the baseline and counted in the
# profile's non_torch_increase, off the KV cache, whichever engine ran (the V0 fallback below compute capability 8.0
# included);
# v0.11 moved the distributed set-up before the snapshot ("Initialize the distributed environment BEFORE taking
# memory snapshot. This ensures NCCL buffers are allocated before we measure available memory"). The buffers
# are VLLM_V065_NCCL_BYTES_PER_GPU, the 1.79 GiB per GPU vLLM v0.6.5 logged for them at TP 2.
VLLM_V1_NCCL_IN_SNAPSHOT_BEFORE = 11000  # v0.11.0 (from VLLM_SNAPSHOT_AFTER_CUDA_FROM, v0.7.0)
# CUDA graphs: before v0.21 vLLM captured them after sizing the KV cache, out of what gpu_memory_utilization
# leaves (from v0.11 its "Actual usage is ..." line reports them beside the budget). From v0.21 it profiles them
# first and takes them out of the KV budget ("CUDA graph memory profiling is enabled (default since v0.21.0)",
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; https://github.com/vllm-project/vllm/issues/50722 quotes both lines).
# kvreg does not estimate them: a plan gives --cuda-graph-memory, or calibrates from a log of such a release.
VLLM_CUDA_GRAPH_IN_BUDGET_RELEASE = 21000  # v0.21.0
# vLLM's "GPU KV cache size: N tokens" line: up to v0.20 num_blocks // kv_cache_groups x the smallest block size
# (vllm/v1/core/kv_cache_utils.py _report_kv_cache_config, read at a v0.1x commit), from v0.21 int(max_concurrency x
# max_model_len), where max_concurrency = num_blocks / the blocks one max_model_len request takes over every group
# (get_max_concurrency_for_kv_cache_config; kv_cache_utils.py get_kv_cache_capacity and update_kv_cache_capacity,
# quoted at lines 2021-2047 of commit 22df3a3 in https://github.com/vllm-project/vllm/issues/54662, after the fixes
# proposed in vllm PRs 38364 and 40694 for https://github.com/vllm-project/vllm/issues/40691). For a model of one KV
# group the two agree up to a block; for a hybrid model (full attention beside sliding-window or linear layers) the
# new line is a concurrency in token units, far from the pool's tokens. The release, from logs: v0.19.0 printed the
# old line (vllm#40691: 290,864 tokens, a whole number of 16-token blocks, beside 33.04x at 32,768 tokens = 1,082,654);
# Gemma 4's line went from ~55k tokens in v0.20.0 to ~525k in v0.21.0 with the same ~50 GB of KV memory
# (https://github.com/vllm-project/vllm/issues/43308); a v0.21.1 development build's DeepSeek-V4 line reads 1,001,650
# tokens beside 5.01x at 200,000, and v0.24.0's 567,978 tokens beside 4.33x at 131,072 (Qwen3.6-35B-A3B,
# tests/data/logs/vllm-club3090-612-qwen36-35b-5090.log): neither a whole number of blocks, each int(concurrency x
# max_model_len).
VLLM_KV_TOKENS_AS_CONCURRENCY_FROM = 21000  # v0.21.0
# vLLM's V0 engine from v0.7.3 padded every KV cache entry to a multiple of 256 bytes on CUDA (PR 12676, "Mem align KV
# caches for CUDA devices (MLA perf improvement)": "for MLA with a head dim of 576 ... and a fp16/bf16 cache, we allocate
# 640 elements per cache entry instead of 576"), until PR 14842 removed it in March 2025, before V1 became the default in
# v0.8.0 (V1 never padded). A standard head of 64 or 128 elements is 256-byte aligned already; an MLA latent is not.
# Measured: DeepSeek-R1 on 8 x H200 with v0.7.3 kept 21.43 GiB for its KV cache and printed 18,418 blocks of 16 tokens:
# 21.43 GiB / (16 x 61 layers x 1,280 B) = 18,418.6 (576-element entries would give 20,466 blocks). PR 14842's own A/B
# run printed 4,739 blocks padded and 5,266 unpadded: 0.900 = 576 / 640. v0.7.2 is not known to pad and is left out.
VLLM_V0_KV_ENTRY_ALIGN_BYTES = 256
VLLM_V0_KV_ENTRY_ALIGN_FROM = 7003  # v0.7.3
# SGLang's --mem-fraction-static when none is given: its server derives one from the GPU's memory in MiB
# and the parallel size (python/sglang/srt/server_args.py, ServerArgs._handle_gpu_memory_settings):
#   reserved_mem = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2 + tp x pp / 8 x 1024
#   (at least 10 x 1024 on GPUs of more than 60 x 1024 MiB), mem_fraction_static = round((gpu_mem - reserved_mem)
#   / gpu_mem, 3), where chunked_prefill_size and cuda_graph_max_bs are themselves defaults by GPU memory (the
#   tiers below). SGLang reads gpu_mem from nvidia-smi (memory.total); kvreg takes the GPU's reported memory,
#   which differs by under 1% (an H100: 81,090 MiB reported, 81,559 in nvidia-smi: 0.834 instead of 0.835).
SGLANG_RESERVED_BASE_MIB = 512  # "Constant meta data (e.g., from attention backend)"
SGLANG_RESERVED_MIB_PER_PREFILL_TOKEN = 1.5  # "For activation during large prefill"
SGLANG_RESERVED_MIN_PREFILL_TOKENS = 2048  # max(chunked_prefill_size, 2048)
SGLANG_RESERVED_MIB_PER_CUDA_GRAPH_BS = 2  # "For cuda graphs": cuda_graph_max_bs x 2
SGLANG_RESERVED_MIB_PER_8_RANKS = 1024  # "Some adjustments for large parallel size": tp x pp / 8 x 1024
SGLANG_LARGE_GPU_MIB = 60 * 1024  # gpu_mem > 60 x 1024: reserve at least ...
SGLANG_LARGE_GPU_MIN_RESERVED_MIB = 10 * 1024  # ... 10 x 1024 MiB
SGLANG_MEM_FRACTION_DECIMALS = 3  # round(..., 3)
# GPU memory tiers (upper bound in MiB, exclusive): default chunked_prefill_size, and cuda_graph_max_bs below
# and from TP 4 (SGLANG_CUDA_GRAPH_TP); the last tier has no upper bound.
SGLANG_MEMORY_TIERS = (
    (20 * 1024, 2048, 8, 8),  # T4, 4080
    (35 * 1024, 2048, 24, 80),  # A10, 4090, 5090
    (60 * 1024, 4096, 32, 160),  # A100 40GB, L40
    (90 * 1024, 8192, 256, 512),  # H100, A100 80GB
    (160 * 1024, 8192, 256, 512),  # H20, H200
    (None, 16384, 512, 512),  # B200, MI300
)
SGLANG_CUDA_GRAPH_TP = 4  # "cuda_graph_max_bs 24 if tp < 4 else 80"
# SGLang's default mem_fraction_static by release (python/sglang/srt/server_args.py of each release's wheel on PyPI,
# read release by release; docs/engine-rules.md cites the lines). kvreg follows the CUDA path without speculative
# decoding, DP attention or multimodal towers (see the docs for those). "gpu_mem" is nvidia-smi's memory in MiB
# (kvreg: the GPU's reported memory); P = TP x PP.
# - up to v0.4.5 (ServerArgs.__post_init__, 0.3.6 lines 155-166, 0.4.5 lines 233-243): by TP alone, whatever the
#   GPU: 0.79 from TP 16, 0.81 from TP 8 (0.82 in v0.3), 0.85 from 4, 0.87 from 2, else 0.88;
# - v0.4.6 (lines 221-238): the same by TP on GPUs of at most 81,920 MiB, else (gpu_mem - 13 x 1024) / gpu_mem;
# - v0.4.7 (lines 253-283): the same tiers by P on GPUs of at most 81,920 MiB, else 0.88; then 0.79 on GPUs above
#   180,000 MiB, and above 96 x 1024 MiB min(f + 48 x 1024 x (1 - f) / gpu_mem, (gpu_mem - 18 x 1024) / gpu_mem);
# - v0.4.8 to v0.5.2 (0.4.9 lines 280-319, 0.5.2 lines 452-496): round((gpu_mem - reserved) / gpu_mem, 3), reserved
#   = (a + P x b) x 1024 MiB by GPU memory (SGLANG_LEGACY_RESERVED_TIERS);
# - from v0.5.3 (_handle_gpu_memory_settings): the reserve of SGLANG_RESERVED_* below, with cuda_graph_max_bs 16
#   rather than 24 below TP 4 on GPUs of 20 to 35 GiB before v0.5.5;
# - from v0.5.10, where the piecewise (prefill) CUDA graphs are on by default (disable_piecewise_cuda_graph; before,
#   --enable-piecewise-cuda-graph), the reserve adds 8 MiB for each prefill capture size (1.5 GiB for an MLA
#   model), except at PP > 1 (0.5.10 lines 1078-1139 and 1302-1310; 0.5.16 reserve_for_graph_mb, lines 4164-4194).
SGLANG_TP_FRACTIONS = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87))  # (from this parallel size, fraction)
SGLANG_SMALL_TP_FRACTION = 0.88
SGLANG_TP8_FRACTION_BEFORE_040 = 0.82
SGLANG_FRACTION_040_FROM = 4000  # v0.4.0
SGLANG_FRACTION_BY_MEMORY_FROM = 4006  # v0.4.6: large GPUs leave the TP tiers
SGLANG_V046_LARGE_GPU_MIB = 81920
SGLANG_V046_RESERVED_MIB = 13 * 1024
SGLANG_V047_FROM = 4007
SGLANG_V047_HUGE_GPU_MIB = 180 * 1000  # "gpu_mem > 180 * 1000 and is_cuda()"
SGLANG_V047_HUGE_GPU_FRACTION = 0.79
SGLANG_V047_BIG_GPU_MIB = 96 * 1024
SGLANG_V047_HEADROOM_MIB = 48 * 1024
SGLANG_V047_RESERVED_MIB = 18 * 1024  # "15 GB + additional 3GB for cuda graph"
SGLANG_RESERVED_FORMULA_FROM = 4008  # v0.4.8: round((gpu_mem - reserved_mem) / gpu_mem, 3)
# v0.4.8 to v0.5.2: (upper bound in MiB, exclusive, or None; a GiB; b GiB per GPU of P): reserved = (a + P x b) GiB
SGLANG_LEGACY_RESERVED_TIERS = ((20 * 1024, 2.8, 0.1), (35 * 1024, 2.8, 0.1), (90 * 1024, 9.5, 0.5),
                                (100 * 1024, 12, 0.5), (160 * 1024, 12, 0.5), (None, 32, 0))
SGLANG_RESERVE_FORMULA_V053_FROM = 5003  # v0.5.3: 512 + chunked prefill x 1.5 + cuda graphs x 2 + P / 8 x 1024
SGLANG_CUDA_GRAPH_BS_24_FROM = 5005  # v0.5.5: cuda_graph_max_bs 24 (16 before) below TP 4 on 20 to 35 GiB GPUs
SGLANG_V053_SMALL_CUDA_GRAPH_BS = 16
SGLANG_PREFILL_GRAPHS_FROM = 5010  # v0.5.10: piecewise CUDA graphs on by default
SGLANG_MIB_PER_PREFILL_GRAPH = 8  # "len(self.piecewise_cuda_graph_tokens) * 8"
SGLANG_MLA_PREFILL_GRAPHS_MIB = 1.5 * 1024


def sglang_prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill (piecewise) CUDA graphs SGLang captures up to max_tokens (its chunked_prefill_size):
    server_args.py _generate_piecewise_cuda_graph_tokens, 4 to 32 by 4, 48 to 256 by 16, 288 to 512 by 32, 576 to
    1,024 by 64, 1,280 to 4,096 by 256, then by 512 (8,192 tokens: 58 graphs)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return sum(1 for s in sizes if s <= max_tokens)


# Multimodal models: SGLang scales mem_fraction_static down for them (ModelConfig.is_multimodal, by architecture; kvreg:
# a model row with tower_params). Read from each release's wheel on PyPI:
# - up to v0.4.4, x 0.95 in ModelRunner.__init__ (model_runner.py 0.4.3 lines 137-142, 0.4.4 lines 242-243: "Automatically
#   reduce --mem-fraction-static ... because this is a multimodal model"), on any fraction, given or default;
# - v0.4.5 to v0.4.8, x 0.90 there (0.4.5 lines 273-274, 0.4.8 lines 414-415), on any fraction;
# - v0.4.9, x 0.90 in ServerArgs.__post_init__ on the default only ("Multimodal models need more memory for the image
#   processor", server_args.py 0.4.9 lines 324-329);
# - from v0.4.10, on the default only, x 0.95 x a factor from the vision tower's size (ServerArgs.adjust_mem_fraction_for_vlm,
#   0.4.10 lines 334-335 and 1946-1987; 0.5.6 lines 866-869 and 4278-4312; 0.5.23 arg_groups/memory_hook.py lines 282-337
#   and 417-460): complexity = vision_config.num_hidden_layers (24 when absent) x hidden_size (1024 when absent) ** 2 over
#   ViT-L/14's 24 x 1024 ** 2, factor = clamp(1 - 0.1 x (complexity - 1), 0.8, 1.05). From v0.5.23 not with
#   --language-only / --language-model-only, nor on a disaggregated decode server, and a post-capture KV sizing takes 8 GiB
#   instead (not modelled).
SGLANG_MM_FRACTION_BEFORE_045 = 0.95
SGLANG_MM_FRACTION_090_FROM = 4005  # v0.4.5
SGLANG_MM_FRACTION_090 = 0.90
SGLANG_MM_DEFAULT_ONLY_FROM = 4009  # v0.4.9: the scaling moves to server_args, on the default only
SGLANG_MM_VIT_SCALED_FROM = 4010  # v0.4.10: adjust_mem_fraction_for_vlm
SGLANG_VLM_BASE_FACTOR = 0.95  # base_mem_fraction_reduction_ratio
SGLANG_VLM_BASELINE_LAYERS = 24  # "baseline ViT params (ViT-L/14)", also getattr's default for num_hidden_layers
SGLANG_VLM_BASELINE_HIDDEN = 1024  # ... and for hidden_size
SGLANG_VLM_SENSITIVITY = 0.1  # "every time the complexity grows 100%, adjust final factor for 10%"
SGLANG_VLM_FACTOR_MIN = 0.8
SGLANG_VLM_FACTOR_MAX = 1.05
# The towers' weights: vLLM and SGLang build a multimodal model's vision/audio tower on every GPU, whatever the pipeline
# stage, its linear layers split over TP (vLLM vllm/model_executor/models/qwen2_vl.py Qwen2VLForConditionalGeneration.
# __init__: `self.visual = Qwen2VisionTransformer(...)` of ColumnParallelLinear / RowParallelLinear layers, replicated
# only with mm_encoder_tp_mode "data"; the tower is not built, and its weights skipped, when the prompt limits of every
# modality are 0: `if multimodal_config.get_limit_per_prompt("image") or ...get_limit_per_prompt("video")`, else
# `self.visual = None`, read at commit 002d181a; gemma3_mm.py at commit 0004c540 builds its SigLIP vision_tower and
# multi_modal_projector and loads every weight). Quantized checkpoints keep the tower in the model's 16-bit dtype
# (their quantization configs list it among the modules not converted).
TOWER_BYTES_PER_PARAM = 2
# Memory in use on a GPU before SGLang loads weights: the CUDA context, and at TP x PP > 1 NCCL's and the custom
# all-reduce's buffers (python/sglang/srt/model_executor/model_runner.py: init_torch_distributed takes the smallest
# free memory over the ranks, min_per_gpu_memory, as pre_model_load_memory; its log's "Load weight begin. avail mem"
# is one rank's free memory then). Measured on one H100 node (79.18 GiB reported) with one SGLang build, August 2026
# (tests/data/logs/sglang-mystous-*.log): 79.18 - 78.48 = 0.70 GiB at TP 1, 79.18 - 77.33 = 1.85 GiB on six of the
# eight ranks at TP 8 (NCCL 2.29.7, "All Reduce config: symmetric_memory = 18.01 MB, local_buffer = 8.00 MB,
# multicast = True"). Other logs put it at 0.37 GiB at TP 1 (an early-2025 release) and 2 to 3 GiB at TP 4 and 8 on
# H200 and B200: measure it (--non-torch-memory, or calibrate from a log) where it matters.
SGLANG_STARTUP_BYTES = round(0.70 * GIB)
SGLANG_STARTUP_TP_BYTES = round(1.85 * GIB)
SGLANG_SWA_FULL_TOKENS_RATIO = 0.8  # SGLang --swa-full-tokens-ratio default: sliding pool / full pool
# ... from v0.4.10, whose ModelRunner gives a model with a sliding window (not Llama 4) a pool of its own for the
# sliding layers (model_runner.py 0.4.10 lines 282-290: `if not self.server_args.disable_hybrid_swa_memory and
# self.sliding_window_size ...: self.is_hybrid = True`, SWAKVPool; server_args.py 0.4.10 lines 87-88 add
# swa_full_tokens_ratio 0.8 and --disable-hybrid-swa-memory). v0.4.9 and earlier keep one pool in which every
# sliding layer holds as many tokens as the full ones (0.4.9's hybrid pool is Llama 4's opt-in --hybrid-kvcache-ratio
# only, configs/model_config.py is_hybrid_model; 0.4.8 has none).
SGLANG_HYBRID_SWA_POOL_FROM = 4010  # v0.4.10
# SGLang's max_running_requests when none is given (python/sglang/srt/mem_cache/kv_cache_configurator.py,
# KVCacheConfigurator.resolve_max_num_reqs, per attention-DP worker):
#   estimated = int(max_total_num_tokens / context_len x 512); estimated = max(min(estimated, 4096), 2048)
#   max_num_reqs = min(estimated, max_total_num_tokens // 2)
# Real summary lines agree: 104,273 tokens at context_len 40,960 give int(1,303.4) -> 2,048; 1,707,904 tokens at
# 40,960 give int(21,348.8) -> 4,096. Hybrid state models also cap it at max_mamba_cache_size // ratio (below).
SGLANG_RUNNING_REQUESTS_PER_CONTEXT = 512
SGLANG_RUNNING_REQUESTS_FLOOR = 2048
SGLANG_RUNNING_REQUESTS_CEILING = 4096
SGLANG_TOKENS_PER_RUNNING_REQUEST = 2  # max_total_num_tokens // 2
# SGLang's hybrid models (Gated DeltaNet, Mamba2) keep each request's state in a slot of its own, sized
# before the KV cells (python/sglang/srt/mem_cache/kv_cache_configurator.py _handle_max_mamba_cache, no
# speculative decoding, no --max-mamba-cache-size):
#   mamba_budget = rest_memory x mamba_full_memory_ratio / (1 + mamba_full_memory_ratio)
#   max_mamba_cache_size = int((mamba_budget - per_req) // per_req); the cells get rest_memory - (slots + 1) x per_req
# (the pool allocates one padding slot beyond max_mamba_cache_size, index 0; its reservation is SGLang PR 32184,
# July 2026; before it the budget reserved slots x per_req and the padding came out of the slack)
# mamba_cache_per_req (configs/mamba_utils.py Mamba2CacheParams) = (conv elements x conv itemsize + temporal
# elements x temporal itemsize) x layers, per TP rank; the conv state is bfloat16 and the temporal (SSM)
# state float32 unless the config names mamba_ssm_dtype (mamba2_state_dtype).
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9  # ServerArgs.mamba_full_memory_ratio
SGLANG_MAMBA_SSM_BYTES = 4  # float32
# resolve_max_num_reqs: max_num_reqs = min(max_num_reqs, max_mamba_cache_size // _calculate_mamba_ratio()), the
# ratio MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3 with the radix cache on and the default no_buffer
# mamba_scheduler_strategy (1 with --disable-radix-cache).
SGLANG_MAMBA_SLOTS_PER_REQUEST = 3
