"""ComfyUI V3 nodes of the pack: a thin adapter over `ladr_core` (docs/CONVENTIONS.md, "Thin V3 nodes").

Node modules are imported only by `node_classes()` (called from `comfy_entrypoint`), never at
package import, so importing `nodes` is free. `nodes.host` is the only module touching ComfyUI.
The names code outside the pack may use (the lab's graph runner and studies) are `__all__`,
each imported from its module on first use (docs/CONVENTIONS.md, "Public names").
"""

from __future__ import annotations

from ladr_core import by_module, lazy_exports

_EXPORTS = by_module({
    ".handles": "DiMOOModel TOKENS_TYPE",
    ".loader": "BUILT_IN EMOJI NANO",
    ".sampler": "DiMOOSampler split_prompts",
    ".edit": "DiMOOEdit",
    ".policy": "LADRPolicyNode PolicyFields build_strategy",
    ".rules": "AUTO RuleFields build_rule",
    ".run": "make_callback node_schedule schedule_note",
    ".decode": "decode_tokens",
    ".understand": "CAPTION_QUESTION one_line",
})
_MODULES = {"host": ".host"}

__all__ = sorted([*_EXPORTS, *_MODULES, "extension_class", "node_classes"])

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _MODULES)


def node_classes() -> list[type]:
    """All node classes, in menu order. Their `node_id`s are stable forever."""
    from .answer_rule import AnswerRuleNode
    from .cache import MLCacheOptions
    from .calibrate import LADRCalibrate
    from .canvas import CanvasNode, PaintCanvasNode, TokenCanvasNode
    from .compile import CompileDiMOO
    from .decode import DiMOOVQDecode
    from .edit import DiMOOEdit
    from .encode import DiMOOVQEncode
    from .loader import LoadDiMOOModel
    from .paint import PaintOptionsNode
    from .policy import LADRPolicyNode, ProphetPolicyNode
    from .rules import SamplingRuleNode
    from .sampler import DiMOOSampler
    from .sampler_legacy import LegacyDiMOOSampler
    from .understand import DiMOOAsk, DiMOOCaption

    return [LoadDiMOOModel, DiMOOSampler, SamplingRuleNode, CanvasNode, PaintCanvasNode,
            TokenCanvasNode, LADRPolicyNode, ProphetPolicyNode, MLCacheOptions, DiMOOVQDecode,
            CompileDiMOO, LADRCalibrate, DiMOOEdit, DiMOOVQEncode, DiMOOCaption, DiMOOAsk,
            AnswerRuleNode, LegacyDiMOOSampler, PaintOptionsNode]


def extension_class() -> type:
    """The `ComfyExtension` subclass returned by the pack's `comfy_entrypoint`."""
    from . import host

    _io, base = host.v3()

    class LADRExtension(base):
        async def on_load(self) -> None:
            from .canvas import note_prompt

            host.register_model_folder()
            host.install_example_inputs()
            host.serve_help_in_every_language()
            host.add_prompt_handler(note_prompt)  # DiMOO Canvas's grid check at /prompt

        async def get_node_list(self) -> list[type]:
            return node_classes()

    return LADRExtension
