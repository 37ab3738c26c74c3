"""Read a Hugging Face ``config.json`` into a model row (the columns of ``kvreg.db.tables.Model``).

Pure functions: no database, no network, no ``transformers``. The family defaults that matter
for memory (Falcon's kv heads and context, Gemma-2's alternating windows, Llama 4's chunked
layers, Qwen2's ``max_window_layers``) are written out here, each next to the rule it follows.

Every problem is a :class:`ConfigError` whose message is one line: the file, what is wrong, and
what to do. Anything the importer had to assume is returned as a warning and kept in ``notes``.

Parameter counts, in order of preference (``import_path``):
1. ``params_b`` given by the user (billions);
2. ``model.safetensors.index.json`` next to ``config.json``: ``metadata.total_size`` bytes divided
   by the bytes per parameter of the native weight dtype. For mixed checkpoints (fp8 linears with
   bf16 embeddings and fp32 scales) this is not the exact count, but params x weight bytes then
   equals the checkpoint's size on disk, which is what the weights occupy in GPU memory;
3. an estimate from the config (embeddings + attention + MLP; MoE: all experts in
   ``params_total``, the routed top-k plus shared experts in ``params_active``), with a warning.

One module per concern, each importing only those before it:
``config`` (the config's keys through its text_config / llm_config / language_config wrapper, family defaults,
ConfigError), ``read`` (the file within kvreg.core.limits), ``keys`` (which keys shape the cache: read, inert or
refused), ``layers`` (layer kinds from every spelling), ``attention`` (heads, widths, MLA, indexer, per-layer kv
heads), ``dtypes`` (weight and model dtypes, context), ``state`` (linear layers' recurrent state), ``params``
(parameter counts, MoE), ``checkpoint`` (safetensors headers and index), ``row`` (the row and its assumptions) and
``messages`` (a batch's warnings). Callers import each name from the module that defines it.
"""
