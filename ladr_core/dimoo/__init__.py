"""Lumina-DiMOO runtime (docs/ARCHITECTURE.md section 2), in layers that import downward only
(model/ at the bottom; weights/ and denoise/ on model/; tasks/ on both; the entry modules
directly in ladr_core/dimoo/ on top: load, pipeline, jobs, runs, ...).

The names below (``_EXPORTS``, by owning module) are what a user or a node calls: loading,
generating, painting, editing, understanding and saving. Everything else is a part that the lab
and the tests import from the module that owns it (e.g. ``ladr_core.dimoo.model.packed``).
Names are resolved on first use, so ``import ladr_core.dimoo`` stays cheap.
"""

from __future__ import annotations

from .._lazy import by_module, lazy_exports

_EXPORTS = by_module({
    ".model.config": "DIMOO_ROPE_CONTEXT",
    ".weights.files": "CheckpointError",
    ".weights.staging": "INCOMPLETE_MARKER",
    ".denoise.prompt": "nearest_multiples size_error",
    ".denoise.cache": "MLCacheConfig",
    ".tasks.painting": "PaintOptions",
    ".tasks.pictures": "FIT_MODES check_image fit_image",
    ".tasks.editing": "EDIT_TYPES DEFAULT_EDIT_CFG DEFAULT_IMAGE_CFG",
    ".tasks.edit_size": "official_edit_size",
    ".tasks.preview": "PreviewBase",
    ".tasks.understanding": "ANSWER_SIZES",
    ".tasks.answer_rules": "AnswerRule OfficialOrder ConfidenceThreshold AnswerEntropyBound "
                           "answer_rule answer_rule_classes answer_rule_names",
    ".tasks.answering": "ANSWER_RECORD_KEYS",
    # the pipeline, converting
    ".pipeline": "DiMOOPipeline",
    ".load": "load_dimoo",
    ".understand": "UNDERSTAND_CONTEXT",
    ".jobs": "TextJob PaintJob EditJob check_job",
    ".runs": "GenerationResult images_in_flight GPU_IN_FLIGHT",
    ".save": "save_dimoo",
})

# the weight formats, used as a namespace (formats.weight_formats(), ...)
_MODULES: dict[str, str] = {"formats": ".weights.formats"}

__all__ = sorted([*_EXPORTS, *_MODULES])

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _MODULES)
