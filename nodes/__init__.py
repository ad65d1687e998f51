"""ComfyUI V3 nodes of the pack: a thin adapter over `ladr_core` (docs/CONVENTIONS.md, "Thin V3 nodes").

Node modules are imported only by `node_classes()` (called from `comfy_entrypoint`), never at
package import, so importing `nodes` is free. `nodes.host` is the only module touching ComfyUI.
"""

from __future__ import annotations


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
            host.register_model_folder()
            host.install_example_inputs()

        async def get_node_list(self) -> list[type]:
            return node_classes()

    return LADRExtension
