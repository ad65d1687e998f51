"""Lumina-DiMOO runtime (docs/ARCHITECTURE.md section 2), in layers that import downward only
(model/ at the bottom; weights/ and denoise/ on model/; tasks/ on both; jobs, runs, pipeline,
save and input_ranges on top: docs/ARCHITECTURE.md, Layout).

Everything nodes, tests and benchmarks use is exported here and imported from here. Names are
resolved on first use, so ``import ladr_core.dimoo`` stays cheap.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    # model/
    "LLaDAConfig": ".model.config",
    "DiMOOIds": ".model.config",
    "ConfigError": ".model.config",
    "DIMOO_DEFAULT_IDS": ".model.config",
    "LLaDAModel": ".model.transformer",
    "rope_tables": ".model.transformer",
    "PackedRows": ".model.packed",
    "attend": ".model.packed",
    "full_pass": ".model.packed",
    "partial_pass": ".model.packed",
    "stream_blocks": ".model.offload",
    "unstream_blocks": ".model.offload",
    "CompiledPasses": ".model.compile",
    "COMPILE_BACKENDS": ".model.compile",
    "COMPILE_MODES": ".model.compile",
    "MASK_GREY": ".model.vq",
    "PREVIEW_TABLE_FILE": ".model.vq",
    "build_preview_table": ".model.vq",
    "fit_preview_table": ".model.vq",
    "preview_from_table": ".model.vq",
    "save_preview_table": ".model.vq",
    # weights/
    "CheckpointError": ".weights.files",
    "read_config": ".weights.files",
    "read_json": ".weights.files",
    "load_tokenizer": ".weights.files",
    "LoadedCheckpoint": ".weights.files",
    "load_checkpoint": ".weights.checkpoint",
    "load_transformer": ".weights.checkpoint",
    "is_quantized_folder": ".weights.quant_load",
    "check_format_support": ".weights.quant_load",
    "load_quantized_transformer": ".weights.quant_load",
    "INCOMPLETE_MARKER": ".weights.staging",
    "ARCH": ".weights.gguf",
    "KEYS": ".weights.gguf",
    "gguf_ops": ".weights.gguf",
    "write_gguf": ".weights.gguf_write",
    "tensor_type": ".weights.gguf_write",
    "more_bits": ".weights.gguf_write",
    # denoise/
    "ImageLayout": ".denoise.prompt",
    "build_prompt_batch": ".denoise.prompt",
    "check_image_size": ".denoise.prompt",
    "cond_text": ".denoise.prompt",
    "uncond_text": ".denoise.prompt",
    "suggest_size": ".denoise.prompt",
    "size_problem": ".denoise.prompt",
    "size_error": ".denoise.prompt",
    "SIZE_STEP": ".denoise.prompt",
    "MLCacheConfig": ".denoise.cache",
    "BranchCache": ".denoise.cache",
    "CacheSchedule": ".denoise.cache",
    "HostLag": ".denoise.hostlag",
    "DiMOODenoiser": ".denoise.denoiser",
    # tasks/
    "PaintOptions": ".tasks.painting",
    "FIT_MODES": ".tasks.painting",
    "check_image": ".tasks.painting",
    "fit_image": ".tasks.painting",
    "fit_painting": ".tasks.painting",
    "plan_painting": ".tasks.painting",
    "token_mask": ".tasks.painting",
    "EDIT_TYPES": ".tasks.editing",
    "DEFAULT_EDIT_CFG": ".tasks.editing",
    "DEFAULT_IMAGE_CFG": ".tasks.editing",
    "build_edit_batch": ".tasks.editing",
    "edit_texts": ".tasks.editing",
    "official_edit_size": ".tasks.edit_size",
    "sized_for_edit": ".tasks.edit_size",
    "EDIT_SIZES": ".tasks.edit_size",
    "plan_edit": ".tasks.editing",
    "PaintPlan": ".tasks.painting",
    "PreviewBase": ".tasks.preview",
    "FADE": ".tasks.preview",
    "painting_base": ".tasks.preview",
    "edit_base": ".tasks.preview",
    "pool_to_preview": ".tasks.preview",
    "buckets": ".tasks.edit_size",
    "pick_bucket": ".tasks.edit_size",
    "SelfScoreConfig": ".tasks.selfscore",
    "SelfScore": ".tasks.selfscore",
    "KINDS": ".tasks.selfscore",
    "block_masks": ".tasks.selfscore",
    # the pipeline, converting
    "load_dimoo": ".pipeline",
    "DiMOOPipeline": ".pipeline",
    "DIMOO_ROPE_CONTEXT": ".model.config",
    "context_length": ".model.config",
    "TextJob": ".jobs",
    "PaintJob": ".jobs",
    "EditJob": ".jobs",
    "check_job": ".jobs",
    "GenerationResult": ".runs",
    "generator_seed": ".runs",
    "item_generator": ".runs",
    "check_seed": ".runs",
    "images_in_flight": ".runs",
    "CPU_IN_FLIGHT": ".runs",
    "GPU_IN_FLIGHT": ".runs",
    "save_dimoo": ".save",
    "Conversion": ".save",
    "convert_folder": ".save",
    "measure_input_ranges": ".input_ranges",
    "record_input_amax": ".input_ranges",
    "range_items": ".input_ranges",
}

# weight formats and converters used as namespaces (ggml.quantize, fp8.dequantize, ...)
_MODULES: dict[str, str] = {
    "fp8": ".weights.fp8",
    "quant": ".weights.quant",
    "ggml": ".weights.ggml",
    "gguf_write": ".weights.gguf_write",
    "staging": ".weights.staging",
    "save": ".save",
}

__all__ = sorted([*_EXPORTS, *_MODULES])

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _MODULES)
