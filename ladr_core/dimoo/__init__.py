"""Lumina-DiMOO runtime (docs/ARCHITECTURE.md section 2), in layers that import downward only
(model/ at the bottom; weights/ and denoise/ on model/; tasks/ on both; jobs, runs, pipeline,
save and input_ranges on top: docs/ARCHITECTURE.md, Layout).

Everything nodes, tests and benchmarks use is exported here and imported from here. Names are
resolved on first use, so ``import ladr_core.dimoo`` stays cheap.
"""

from __future__ import annotations

from .._lazy import by_module, lazy_exports

_EXPORTS = by_module({
    # model/
    ".model.config": "LLaDAConfig DiMOOIds ConfigError DIMOO_DEFAULT_IDS DIMOO_ROPE_CONTEXT "
                     "context_length has_official_ids",
    ".model.transformer": "LLaDAModel rope_tables",
    ".model.packed": "PackedRows attend full_pass partial_pass",
    ".model.offload": "stream_blocks unstream_blocks ALIGN SLOTS",
    ".model.compile": "CompiledPasses COMPILE_BACKENDS COMPILE_MODES",
    ".model.vq": "MASK_GREY PREVIEW_TABLE_FILE build_preview_table fit_preview_table "
                 "preview_from_table save_preview_table decode_codes",
    # weights/
    ".weights.files": "CheckpointError read_config read_json LoadedCheckpoint parse_config",
    ".weights.tokenizer": "load_tokenizer",
    ".weights.checkpoint": "load_checkpoint load_transformer",
    ".weights.formats": "WeightFormat register_format unregister_format weight_formats",
    ".weights.convert": "Conversion convert_folder",
    ".weights.quant_load": "is_quantized_folder check_format_support load_quantized_transformer",
    ".weights.staging": "INCOMPLETE_MARKER",
    ".weights.gguf": "ARCH KEYS gguf_ops",
    ".weights.gguf_write": "write_gguf tensor_type more_bits",
    # denoise/
    ".denoise.prompt": "ImageLayout build_prompt_batch check_image_size cond_text uncond_text "
                       "suggest_size size_problem size_error nearest_multiples SIZE_STEP",
    ".denoise.cache": "MLCacheConfig BranchCache CacheSchedule",
    ".denoise.hostlag": "HostLag",
    ".denoise.denoiser": "DiMOODenoiser",
    # tasks/
    ".tasks.painting": "PaintOptions plan_painting token_mask PaintPlan plan_tokens",
    ".tasks.pictures": "FIT_MODES check_image fit_image fit_painting check_tokens",
    ".tasks.editing": "EDIT_TYPES MULTI_VIEWS MULTITURN DEFAULT_EDIT_CFG DEFAULT_IMAGE_CFG "
                      "build_edit_batch edit_texts "
                      "plan_edit",
    ".tasks.edit_size": "official_edit_size sized_for_edit EDIT_SIZES buckets pick_bucket",
    ".tasks.preview": "PreviewBase FADE painting_base edit_base pool_to_preview",
    ".tasks.selfscore": "SelfScoreConfig SelfScore KINDS block_masks",
    ".tasks.understanding": "AnswerResult UnderstandJob UNDERSTAND_SYSTEM ANSWER_SIZES "
                            "understanding_text answer_row plan_understanding",
    ".tasks.answer_rules": "AnswerRule OfficialOrder ConfidenceThreshold AnswerEntropyBound "
                           "answer_rule answer_rule_classes answer_rule_names resolve_answer_rule "
                           "transfer_counts unregister_answer_rule",
    ".tasks.answering": "ANSWER_RECORD_KEYS AnswerShape decode_answers SAMPLE_CHUNK",
    # the pipeline, converting
    ".pipeline": "DiMOOPipeline",
    ".load": "load_dimoo",
    ".understand": "UNDERSTAND_CONTEXT understand_context",
    ".jobs": "TextJob PaintJob EditJob check_job",
    ".runs": "GenerationResult generator_seed item_generator check_seed images_in_flight "
             "CPU_IN_FLIGHT GPU_IN_FLIGHT",
    ".save": "save_dimoo",
    ".input_ranges": "measure_input_ranges record_input_amax range_items",
    ".model.memory": "answer_memory",
    ".weights.vqfiles": "SHARED_VQ_KEY",
})

# weight formats and converters used as namespaces (ggml.quantize, fp8.dequantize, ...)
_MODULES: dict[str, str] = {
    "fp8": ".weights.fp8",
    "quant": ".weights.quant",
    "ggml": ".weights.ggml",
    "gguf_write": ".weights.gguf_write",
    "staging": ".weights.staging",
    "formats": ".weights.formats",
    "save": ".save",
}

__all__ = sorted([*_EXPORTS, *_MODULES])

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _MODULES)
